# fuzz/sanitize.mk: `make sanitize` (included from fuzz/fuzz.mk).
# Builds _probe and _ref with ASan+UBSan into $(SAN_DIR)/harness/dlconform (a copy of the
# Python package next to them, in a tree shaped like the repository's: $(SAN_DIR)/suites and
# $(SAN_DIR)/fuzz link to the checkout's, where dlconform finds the suites and the fuzz seeds),
# never over harness/dlconform/*.so, which other checkouts import;
# builds the fuzz targets' ASan+UBSan binaries and the C unit tests; then runs, under ASan
# (TOOLCHAIN.md: LD_PRELOAD of the ASan runtime, detect_leaks=0, PYTHONMALLOC=malloc):
#   - the C unit tests of probes/check and of the fuzz record codec,
#   - the suites against ref (must be clean: exit 0, no fail/crash/timeout),
#   - the device run (--device cuda) against ref@cuda and pyref@cuda on the simulated CUDA
#     runtime (the same: the C CUDA tensor, its table and cuda_from_dlpack under the sanitizers),
#   - each fuzz target (its own ASan+UBSan build) for SAN_FUZZ_SECONDS against ref, the
#     consumer target also in its CUDA mode (ref@cuda, the simulated runtime) (must find
#     nothing; they import the regular _ref: an extension built for the preloaded shared
#     runtime cannot load into an executable with the static one).
# The sanitized extensions are built with clang (the runtime preloaded into python is
# clang's); UBSan is part of that runtime, and -fno-sanitize-recover makes a report fatal.
# quarantine_size_mb=1: with ASan's default 256 MB quarantine, freed memory is held back, so
# OWN-02's memory-growth check (export/release cycles must not grow RSS) sees growth that is
# the quarantine's; a 1 MB quarantine still catches a use right after a free.
SAN_DIR ?= $(BUILD)/san
SAN_CC ?= clang-14
SAN_OUT ?= $(OUT)/sanitize
SAN_FUZZ_SECONDS ?= 10
SAN_PKG := $(SAN_DIR)/harness/dlconform
SAN_EXT = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
SAN_PYINC = $(shell $(PYTHON) -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])')
SAN_CFLAGS := -std=c11 -O1 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I$(INC) -Iprobes \
  -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
SAN_ENV = LD_PRELOAD=$$($(SAN_CC) -print-file-name=libclang_rt.asan-x86_64.so) \
  ASAN_OPTIONS=detect_leaks=0:quarantine_size_mb=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 PYTHONMALLOC=malloc

.PHONY: sanitize sanitize-build
sanitize-build: $(INC)/dlpack/dlpack.h
	@mkdir -p $(SAN_PKG)
	@cd harness && find dlconform -name '*.py' -o -name '*.json' | \
	  while read f; do mkdir -p "$(CURDIR)/$(SAN_PKG)/../$$(dirname $$f)"; \
	    cp -p "$$f" "$(CURDIR)/$(SAN_PKG)/../$$f"; done
	@# the repository around the copy (dlconform.REPO_DIR): the checks' own subprocesses import
	@# their support package from its suites/, the seed checks read its fuzz/corpus/seeds
	@ln -sfn "$(CURDIR)/suites" "$(SAN_DIR)/suites"
	@ln -sfn "$(CURDIR)/fuzz" "$(SAN_DIR)/fuzz"
	$(SAN_CC) $(SAN_CFLAGS) $(SAN_PYINC) -fPIC -shared -shared-libasan \
	  -o $(SAN_PKG)/_probe$(SAN_EXT) $(wildcard probes/probe/*.c) $(CHECK_SRC) -lpthread
	$(SAN_CC) $(SAN_CFLAGS) $(SAN_PYINC) -fPIC -shared -shared-libasan \
	  -o $(SAN_PKG)/_ref$(SAN_EXT) $(wildcard probes/ref/*.c) $(CHECK_SRC) -lpthread
	@$(FUZZ_SUBMAKE) $(FUZZ_DIR)/validator.asan $(FUZZ_DIR)/consumer.asan $(FUZZ_DIR)/test_record

sanitize: fuzz-tools sanitize-build $(SIM_LIB)
	@$(MAKE) --no-print-directory $(BUILD)/test_check && $(BUILD)/test_check
	$(FUZZ_DIR)/test_record
	@rm -rf $(SAN_OUT); mkdir -p $(SAN_OUT)
	@echo "sanitize: suites against ref under ASan+UBSan ($(SAN_PKG))"
	@rc=0; $(SAN_ENV) PYTHONPATH=$(CURDIR)/$(SAN_DIR)/harness $(PYTHON) -m dlconform run --target ref \
	  --suites $(CURDIR)/suites --out $(SAN_OUT) -q || rc=$$?; \
	grep -h "AddressSanitizer\|runtime error" $(SAN_OUT)/logs/*.err 2>/dev/null | head -5; \
	if grep -qs "AddressSanitizer\|runtime error" $(SAN_OUT)/logs/*.err; then rc=1; fi; \
	if [ $$rc -ne 0 ]; then echo "sanitize: suites against ref are not clean (exit $$rc; $(SAN_OUT))"; exit 1; fi
	@echo "sanitize: the device run against ref@cuda and pyref@cuda (simulated CUDA runtime)"
	@rc=0; $(SAN_ENV) PYTHONPATH=$(CURDIR)/$(SAN_DIR)/harness DLCONFORM_CUDART=$(CURDIR)/$(SIM_LIB) $(PYTHON) -m dlconform \
	  run --device cuda --target ref --target pyref --suites $(CURDIR)/suites --out $(SAN_OUT)/device -q || rc=$$?; \
	grep -h "AddressSanitizer\|runtime error" $(SAN_OUT)/device/logs/*.err 2>/dev/null | head -5; \
	if grep -qs "AddressSanitizer\|runtime error" $(SAN_OUT)/device/logs/*.err; then rc=1; fi; \
	if [ $$rc -ne 0 ]; then echo "sanitize: the device run is not clean (exit $$rc; $(SAN_OUT)/device)"; exit 1; fi
	@for t in validator ref producer-ref ref@cuda producer-ref@cuda; do \
	  DLCONFORM_CUDART=$(CURDIR)/$(SIM_LIB) $(MAKE) --no-print-directory fuzz-ci TARGET=$$t FUZZ_SECONDS=$(SAN_FUZZ_SECONDS) \
	    OUT=$(SAN_OUT) FUZZ_CI_ARGS=--no-merge || exit 1; done
	@echo "sanitize: clean"
