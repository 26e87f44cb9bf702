# fuzz/fuzz.mk: in-process fuzz targets. Included from the top Makefile; also usable alone:
#   make -f Makefile -f fuzz/fuzz.mk fuzz
# Targets:
#   make fuzz                 install clang-14/libclang-rt-14-dev/afl++ when missing (root),
#                             then build every target with every engine installed
#   make fuzz-ci TARGET=validator|numpy|torch|ref|<module>|producer-NAME FUZZ_SECONDS=60
#                             CI mode (harness/dlconform/fuzz/ci.py): bounded rounds, triage,
#                             minimised crashes, Python reproducers, dedup against
#                             fuzz/known/TARGET.txt, summary and results.json; exit 1 when new
#   make fuzz-ci TIER=sid TARGET=numpy FUZZ_SECONDS=600
#                             the same inside a Debian tier (harness/tiers/tier.sh fuzz-ci): the
#                             tier's clang and Python, known list fuzz/known/TIER/TARGET.txt,
#                             outputs in $(OUT)/TIER/fuzz
#   make fuzz-replay FILE=... [TARGET=...] [PRODUCER=...]   replay one input (TARGET defaults
#                             to the file name's prefix before the first '-')
#   make fuzz-parallel TARGET=... JOBS=N FUZZ_SECONDS=S   AFL++ -M/-S on N cores
#   make fuzz-test            C unit test of the record codec and mutator, Python-side tests
#                             (with the targets: the XAPI-15 oracle must fire, the Python
#                             reproducers agree with the targets' oracles, and fuzz-ci fuzzes
#                             what the user's PYTHONPATH and virtualenv find)
#   make fuzz-seeds           rewrite fuzz/corpus/seeds/ from fuzz/tests/write_seeds.c
#   make sanitize             fuzz/sanitize.mk
#   build/fuzz/dump_record FILE...   print an input as its decoded record (triage)
# Binaries in build/fuzz/: <t>.asan (libFuzzer, ASan+UBSan), <t>.fast (libFuzzer only, for
# throughput), <t>.afl (afl-clang-fast -fsanitize=fuzzer), dlc_mutator.so (AFL++ custom
# mutator), for t in validator, consumer, producer, pyempty and pybase (the baselines).

# The interpreter whose libraries are fuzzed: as in the top Makefile, the active virtualenv's
# python3 when there is one, else Debian's.
PYTHON ?= $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python3,$(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3))
BUILD ?= build
INC ?= $(BUILD)/include
OUT ?= reports/out
CHECK_SRC ?= $(wildcard probes/check*.c)

FUZZ_CC ?= clang-14
FUZZ_AFL_CC ?= afl-clang-fast
# AFL++ reads the same ignore list at compile time (src:/fun: lines), as libFuzzer builds do.
FUZZ_AFL_ENV = AFL_LLVM_DENYLIST=$(CURDIR)/fuzz/coverage.ignore AFL_QUIET=1
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_OUT := $(OUT)/fuzz
FUZZ_SECONDS ?= 60
TARGET ?= validator

FUZZ_CFLAGS := -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -fno-omit-frame-pointer \
  -I$(INC) -Iprobes -Ifuzz
FUZZ_COV := -fsanitize-coverage-ignorelist=fuzz/coverage.ignore
FUZZ_SAN := -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined $(FUZZ_COV)
FUZZ_FAST := -fsanitize=fuzzer $(FUZZ_COV)
FUZZ_PY_CFLAGS = -I$(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])') \
  -DDLC_HARNESS_DIR='"$(CURDIR)/harness"'
FUZZ_PY_LIBS = $(shell $(PYTHON) -c 'import sysconfig as s; v = s.get_config_var; \
  print("-L" + v("LIBDIR"), "-lpython" + v("LDVERSION"), v("LIBS"), v("SYSLIBS"))')

FUZZ_HDR := $(wildcard fuzz/*.h probes/*.h) $(INC)/dlpack/dlpack.h fuzz/coverage.ignore
FUZZ_CORE := fuzz/record.c fuzz/layout.c fuzz/oracle.c
FUZZ_MUT := fuzz/mutate.c fuzz/mutator.c
# the producer target: its CUDA mode (producer-NAME@cuda) and the device memory it reads
FUZZ_PROD := fuzz/target_producer.c fuzz/pyhost.c fuzz/producer_cuda.c fuzz/devmem.c
FUZZ_PY := fuzz/pyhost.c fuzz/producer.c fuzz/forge.c fuzz/exchange.c fuzz/consumer_oracles.c \
  fuzz/devices.c fuzz/devmem.c fuzz/copy_values.c fuzz/result_view.c fuzz/plain_import.c \
  fuzz/xapi_offer.c fuzz/xapi_guard.c

FUZZ_HAVE_AFL = $(shell command -v $(FUZZ_AFL_CC) 2>/dev/null)
FUZZ_LF_BINS := $(foreach t,validator consumer producer pyempty pybase,$(FUZZ_DIR)/$(t).asan $(FUZZ_DIR)/$(t).fast)
FUZZ_AFL_BINS := $(foreach t,validator consumer producer pyempty pybase,$(FUZZ_DIR)/$(t).afl) $(FUZZ_DIR)/dlc_mutator.so

.PHONY: fuzz fuzz-tools fuzz-build fuzz-ci fuzz-replay fuzz-test fuzz-seeds fuzz-parallel

# After fuzz-tools, a fresh make reads fuzz.mk alone, so engines it just installed count.
FUZZ_SUBMAKE = $(MAKE) --no-print-directory -f fuzz/fuzz.mk PYTHON='$(PYTHON)' BUILD='$(BUILD)' \
  INC='$(INC)' OUT='$(OUT)'

fuzz: fuzz-tools $(INC)/dlpack/dlpack.h
	@$(FUZZ_SUBMAKE) fuzz-build

# Engines from Debian, installed only when missing and only as root.
fuzz-tools:
	@need=""; command -v $(FUZZ_CC) >/dev/null 2>&1 || need="clang-14 libclang-rt-14-dev"; \
	if command -v $(FUZZ_CC) >/dev/null 2>&1 && \
	   ! test -f "$$($(FUZZ_CC) -print-file-name=libclang_rt.fuzzer-x86_64.a)"; then \
	  need="$$need libclang-rt-14-dev"; fi; \
	command -v $(FUZZ_AFL_CC) >/dev/null 2>&1 || need="$$need afl++"; \
	if [ -n "$$need" ]; then \
	  if [ "$$(id -u)" -eq 0 ]; then echo "fuzz: installing $$need"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null || \
	    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$need >/dev/null; }; \
	  else echo "fuzz: missing $$need (not root: not installing)"; fi; fi

fuzz-build: $(FUZZ_LF_BINS) $(if $(FUZZ_HAVE_AFL),$(FUZZ_AFL_BINS)) $(FUZZ_DIR)/test_record \
  $(FUZZ_DIR)/test_record.pool $(FUZZ_DIR)/dump_record

$(FUZZ_DIR):
	@mkdir -p $@

# libFuzzer builds: the structure-aware LLVMFuzzerCustomMutator is compiled in.
$(FUZZ_DIR)/validator.%: fuzz/target_validator.c $(FUZZ_CORE) $(FUZZ_MUT) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(if $(filter asan,$*),$(FUZZ_SAN),$(FUZZ_FAST)) -DDLC_ENGINE_LIBFUZZER \
	  -o $@ fuzz/target_validator.c $(FUZZ_CORE) $(FUZZ_MUT) $(CHECK_SRC)
$(FUZZ_DIR)/consumer.%: fuzz/target_consumer.c $(FUZZ_PY) $(FUZZ_CORE) $(FUZZ_MUT) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) $(if $(filter asan,$*),$(FUZZ_SAN),$(FUZZ_FAST)) \
	  -DDLC_ENGINE_LIBFUZZER -o $@ fuzz/target_consumer.c $(FUZZ_PY) $(FUZZ_CORE) $(FUZZ_MUT) \
	  $(CHECK_SRC) $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/producer.%: $(FUZZ_PROD) $(FUZZ_CORE) $(FUZZ_MUT) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) $(if $(filter asan,$*),$(FUZZ_SAN),$(FUZZ_FAST)) \
	  -DDLC_ENGINE_LIBFUZZER -o $@ $(FUZZ_PROD) $(FUZZ_CORE) $(FUZZ_MUT) \
	  $(CHECK_SRC) $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/pybase.%: fuzz/target_pybase.c fuzz/pyhost.c fuzz/producer.c $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) $(if $(filter asan,$*),$(FUZZ_SAN),$(FUZZ_FAST)) \
	  -o $@ fuzz/target_pybase.c fuzz/pyhost.c fuzz/producer.c $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/pyempty.%: fuzz/target_pyempty.c fuzz/pyhost.c $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) $(if $(filter asan,$*),$(FUZZ_SAN),$(FUZZ_FAST)) \
	  -o $@ fuzz/target_pyempty.c fuzz/pyhost.c $(FUZZ_PY_LIBS)

# AFL++ builds (persistent mode, shared-memory input via -fsanitize=fuzzer's driver); the
# mutator is the separate dlc_mutator.so (AFL_CUSTOM_MUTATOR_LIBRARY).
$(FUZZ_DIR)/validator.afl: fuzz/target_validator.c $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_AFL_ENV) $(FUZZ_AFL_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ fuzz/target_validator.c $(FUZZ_CORE) $(CHECK_SRC)
$(FUZZ_DIR)/consumer.afl: fuzz/target_consumer.c $(FUZZ_PY) $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_AFL_ENV) $(FUZZ_AFL_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) -fsanitize=fuzzer -o $@ fuzz/target_consumer.c \
	  $(FUZZ_PY) $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/producer.afl: $(FUZZ_PROD) $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_AFL_ENV) $(FUZZ_AFL_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) -fsanitize=fuzzer -o $@ $(FUZZ_PROD) \
	  $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/pybase.afl: fuzz/target_pybase.c fuzz/pyhost.c fuzz/producer.c $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_AFL_ENV) $(FUZZ_AFL_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) -fsanitize=fuzzer -o $@ fuzz/target_pybase.c \
	  fuzz/pyhost.c fuzz/producer.c $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/pyempty.afl: fuzz/target_pyempty.c fuzz/pyhost.c $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_AFL_ENV) $(FUZZ_AFL_CC) $(FUZZ_CFLAGS) $(FUZZ_PY_CFLAGS) -fsanitize=fuzzer -o $@ fuzz/target_pyempty.c \
	  fuzz/pyhost.c $(FUZZ_PY_LIBS)
$(FUZZ_DIR)/dlc_mutator.so: $(FUZZ_MUT) $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fPIC -shared -DDLC_ENGINE_AFL -o $@ $(FUZZ_MUT) $(FUZZ_CORE) $(CHECK_SRC)

# Codec and mutator unit test, under ASan and UBSan.
$(FUZZ_DIR)/test_record: fuzz/tests/test_record.c $(FUZZ_CORE) fuzz/mutate.c $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=address,undefined -fno-sanitize-recover=undefined \
	  -o $@ fuzz/tests/test_record.c $(FUZZ_CORE) fuzz/mutate.c $(CHECK_SRC)
# The same test without sanitizers: the throughput builds' buffer pool (layout.c, DLC_POOL).
$(FUZZ_DIR)/test_record.pool: fuzz/tests/test_record.c $(FUZZ_CORE) fuzz/mutate.c $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/tests/test_record.c $(FUZZ_CORE) fuzz/mutate.c $(CHECK_SRC)
fuzz-test: $(FUZZ_DIR)/test_record $(FUZZ_DIR)/test_record.pool $(FUZZ_DIR)/dump_record $(FUZZ_DIR)/consumer.asan \
  $(FUZZ_DIR)/producer.asan
	$(FUZZ_DIR)/test_record
	$(FUZZ_DIR)/test_record.pool
	$(PYTHON) fuzz/tests/test_fuzz_py.py
	$(PYTHON) fuzz/tests/test_fuzz_ci_env.py
	$(PYTHON) fuzz/tests/test_oracle_agreement.py

$(FUZZ_DIR)/write_seeds: fuzz/tests/write_seeds.c $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/tests/write_seeds.c $(FUZZ_CORE) $(CHECK_SRC)
$(FUZZ_DIR)/dump_record: fuzz/tests/dump_record.c $(FUZZ_CORE) $(CHECK_SRC) $(FUZZ_HDR) | $(FUZZ_DIR)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ fuzz/tests/dump_record.c $(FUZZ_CORE) $(CHECK_SRC)
fuzz-seeds: $(FUZZ_DIR)/write_seeds
	rm -f fuzz/corpus/seeds/*; mkdir -p fuzz/corpus/seeds
	$(FUZZ_DIR)/write_seeds fuzz/corpus/seeds

# validator -> validator.asan; producer-NAME -> producer.asan with producer NAME; any other
# TARGET is a consumer name for consumer.asan (NAME@cuda: in the CUDA mode, fuzz/devmem.h).
fuzz_bin = $(FUZZ_DIR)/$(if $(filter validator,$(1)),validator,$(if $(filter producer-%,$(1)),producer,consumer)).asan
fuzz_producer = $(if $(filter producer-%,$(1)),--producer $(patsubst producer-%,%,$(1)))

# CI mode (harness/dlconform/fuzz/ci.py): bounded rounds, triage, minimisation, Python
# reproducers, dedup against FUZZ_KNOWN (default fuzz/known/TARGET.txt; empty: none), summary
# in $(FUZZ_OUT)/TARGET-summary.*, `crash` records merged into $(OUT)/results.json. The user's
# PYTHONPATH and virtualenv count (a library's PR build is found as python3 finds it). fuzz-ci's
# exit status (1 only for a new finding) goes to $(FUZZ_OUT)/TARGET.exit-status (make's own is 2). FUZZ_TOOLS is the rule that provides the engine: a tier's fuzz-ci
# sets it empty (tier.sh installs the toolchain layer itself; nothing is installed by make).
# With TIER set, fuzz-ci runs inside that Debian tier, as conformance does (harness/tiers).
FUZZ_MIN_SECONDS ?= 10
FUZZ_TOOLS ?= fuzz-tools
FUZZ_KNOWN ?= fuzz/known/$(TARGET).txt
ifeq ($(TIER),)
fuzz-ci: $(FUZZ_TOOLS) $(INC)/dlpack/dlpack.h
	@$(FUZZ_SUBMAKE) $(call fuzz_bin,$(TARGET))
	@echo "fuzz-ci: $(TARGET) for $(FUZZ_SECONDS) s; log $(FUZZ_OUT)/$(TARGET).log"
	@mkdir -p $(FUZZ_OUT); rc=0; PYTHONPATH=$(CURDIR)/harness$${PYTHONPATH:+:$$PYTHONPATH} \
	  $(PYTHON) -m dlconform fuzz-ci --target $(TARGET) \
	  --seconds $(FUZZ_SECONDS) --bin $(call fuzz_bin,$(TARGET)) --out $(OUT) --known '$(FUZZ_KNOWN)' \
	  --minimize-seconds $(FUZZ_MIN_SECONDS) $(call fuzz_producer,$(TARGET)) $(FUZZ_CI_ARGS) || rc=$$?; \
	  echo $$rc > $(FUZZ_OUT)/$(TARGET).exit-status; exit $$rc
else
fuzz-ci: tier-fuzz-ci
endif

fuzz-replay:
	@test -n "$(FILE)" || { echo "usage: make fuzz-replay FILE=path [TARGET=name]"; exit 2; }
	@test -f "$(FILE)" || { echo "fuzz-replay: no input file $(FILE)"; exit 2; }
	@t="$(if $(filter command line,$(origin TARGET)),$(TARGET),$(firstword $(subst -, ,$(notdir $(FILE)))))"; \
	[ "$$t" = producer ] && t=$$(basename "$(FILE)" | cut -d- -f1-2); \
	case "$$t" in validator) b=$(FUZZ_DIR)/validator.asan ;; producer-*) b=$(FUZZ_DIR)/producer.asan ;; \
	  *) b=$(FUZZ_DIR)/consumer.asan ;; esac; \
	p=$${t#producer-}; p=$${p%%@*}; [ -n "$(PRODUCER)" ] && p=$(PRODUCER); \
	$(FUZZ_SUBMAKE) $$b >/dev/null && \
	echo "fuzz-replay: $$t: $$b $(FILE)" && \
	ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:handle_abort=1:protect_shadow_gap=0 \
	  UBSAN_OPTIONS=print_stacktrace=1 \
	  DLCONFORM_FUZZ_TRIAGE=1 DLCONFORM_FUZZ_CONSUMER=$${t%%@*} DLCONFORM_FUZZ_PRODUCER=$$p \
	  DLCONFORM_FUZZ_DEVICE=$$(case "$$t" in *@*) echo "$${t#*@}" ;; esac) \
	  DLCONFORM_FUZZ_PYTHON='$(PYTHON)' \
	  $$b -artifact_prefix=$(FUZZ_DIR)/replay- $(FILE); rc=$$?; \
	if [ "$$t" != validator ]; then echo "fuzz-replay: Python reproducer: PYTHONPATH=harness $(PYTHON) -m dlconform fuzz-repro --target $$t $(FILE)"; fi; exit $$rc
include fuzz/sanitize.mk

# AFL++ across JOBS cores: one -M main and JOBS-1 -S secondaries, FUZZ_SECONDS each (-V), no
# UI, the structure-aware mutator (dlc_mutator.so) next to AFL++'s own havoc. Crashes are
# copied to $(FUZZ_OUT)/TARGET-afl-<instance>-<id> for make fuzz-replay / fuzz-repro; exit 1
# when there is one. TARGET as for fuzz-ci (validator, producer-NAME, or a consumer).
JOBS ?= 2
afl_bin = $(FUZZ_DIR)/$(if $(filter validator,$(1)),validator,$(if $(filter producer-%,$(1)),producer,consumer)).afl
fuzz-parallel: fuzz
	@test -n "$(FUZZ_HAVE_AFL)" || { echo "fuzz-parallel: afl-fuzz is not installed"; exit 2; }
	@o=$(FUZZ_DIR)/afl-$(TARGET); rm -rf $$o; mkdir -p $$o $(FUZZ_OUT); \
	echo "fuzz-parallel: $(TARGET): $(JOBS) AFL++ instance(s) for $(FUZZ_SECONDS) s in $$o"; \
	export AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_NO_AFFINITY=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
	  AFL_CUSTOM_MUTATOR_LIBRARY=$(CURDIR)/$(FUZZ_DIR)/dlc_mutator.so \
	  DLCONFORM_FUZZ_CONSUMER=$(TARGET) DLCONFORM_FUZZ_PRODUCER=$(patsubst producer-%,%,$(TARGET)); \
	for i in $$(seq 1 $(JOBS)); do \
	  if [ $$i -eq 1 ]; then role="-M main"; else role="-S s$$i"; fi; \
	  afl-fuzz $$role -V $(FUZZ_SECONDS) -t 20000 -m none -i fuzz/corpus/seeds -o $$o \
	    -x fuzz/dlpack.dict -- $(call afl_bin,$(TARGET)) >$$o/$$i.log 2>&1 & \
	done; wait; \
	n=0; for c in $$o/*/crashes/id:*; do [ -f "$$c" ] || continue; n=$$((n+1)); \
	  inst=$$(basename $$(dirname $$(dirname $$c))); \
	  cp "$$c" $(FUZZ_OUT)/$(TARGET)-afl-$$inst-$$(basename "$$c" | cut -d, -f1 | tr : -); done; \
	for s in $$o/*/fuzzer_stats; do echo "fuzz-parallel: $$(basename $$(dirname $$s)): $$(grep -h 'execs_done\|execs_per_sec' $$s | tr -s ' ' | tr '\n' ' ')"; done; \
	if [ $$n -gt 0 ]; then echo "fuzz-parallel: $(TARGET): $$n crash(es) in $(FUZZ_OUT)/$(TARGET)-afl-*"; exit 1; fi; \
	echo "fuzz-parallel: $(TARGET): nothing found"
