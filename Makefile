# dlconform: `make` builds, `make conformance` runs the suite, `make test` tests the project.
# The interpreter under test: the active virtualenv's when there is one, else Debian's.
PYTHON ?= $(if $(VIRTUAL_ENV),$(VIRTUAL_ENV)/bin/python3,$(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3))
# q (single-quoting for the shell) and the Debian tier targets
include harness/tiers/tiers.mk
.DEFAULT_GOAL := all
ifeq ($(filter clean,$(MAKECMDGOALS)),)
ifeq ($(shell command -v $(call q,$(PYTHON)) 2>/dev/null),)
$(error PYTHON=$(PYTHON) is not an executable Python interpreter)
endif
endif
OUT ?= reports/out
TARGETS ?=
CLAUSE ?=
CC ?= gcc
BUILD := build
INC := $(BUILD)/include
HEADER := $(INC)/dlpack/dlpack.h
CFLAGS_STRICT := -std=c11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE -I$(INC) -Iprobes
SAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

EXT_SUFFIX = $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
PY_INCLUDES = $(shell $(PYTHON) -c 'import sysconfig; print("-I" + sysconfig.get_paths()["include"])')
PKG := harness/dlconform
PROBE_SO = $(PKG)/_probe$(EXT_SUFFIX)
REF_SO = $(PKG)/_ref$(EXT_SUFFIX)

CHECK_SRC := $(wildcard probes/check*.c)
PROBE_SRC := $(wildcard probes/probe/*.c)
REF_SRC := $(wildcard probes/ref/*.c)
CHECK_TEST_SRC := $(wildcard probes/tests/test_*.c)
SIM_SRC := $(wildcard probes/cuda/sim/*.c)
SIM_HEADERS := $(wildcard probes/cuda/sim/*.h)
SIM_LIB := $(BUILD)/cuda/sim/libcudart.so
C_HEADERS := $(wildcard probes/*.h probes/probe/*.h probes/ref/*.h probes/tests/*.h)

export PYTHONPATH := $(CURDIR)/harness$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: all build modules deps test-deps header conformance test ctest pytest clean cuda
all: build
build: modules $(BUILD)/test_check $(BUILD)/test_cudasim
# What a conformance run loads: the extension modules and the simulated CUDA runtime (the C
# unit tests, built with the sanitizers' runtimes, are make test's alone).
modules: $(HEADER) $(PROBE_SO) $(REF_SO) $(SIM_LIB)

deps:
	@PYTHON=$(call q,$(PYTHON)) sh probes/build-tools/deps.sh build
test-deps:
	@PYTHON=$(call q,$(PYTHON)) sh probes/build-tools/deps.sh test

header: $(HEADER)
$(HEADER):
	@sh probes/build-tools/dlpack_header.sh $(INC)

# Extension modules export only PyInit_* (PyMODINIT_FUNC): hidden visibility makes calls
# between their own files direct, with no PLT stub on the benchmarked hand-out paths. Link-time
# optimisation where the compiler can link with it (some GCC installs lack the LTO plugin:
# "could not run lto-wrapper"); LTO=0 leaves it out.
LTO ?= $(shell printf 'int main(void){return 0;}' | $(CC) -flto=auto -x c - -o /dev/null 2>/dev/null && echo 1 || echo 0)
MODULE_FLAGS = -fPIC -shared -fvisibility=hidden $(if $(filter 1,$(LTO)),-flto=auto)
$(PROBE_SO): $(PROBE_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	$(CC) $(CFLAGS_STRICT) $(PY_INCLUDES) $(MODULE_FLAGS) -o $@ $(PROBE_SRC) $(CHECK_SRC) -lpthread
$(REF_SO): $(REF_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	$(CC) $(CFLAGS_STRICT) $(PY_INCLUDES) $(MODULE_FLAGS) -o $@ $(REF_SRC) $(CHECK_SRC) -lpthread

# C unit tests of probes/check run under ASan and UBSan.
$(BUILD)/test_check: $(CHECK_TEST_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	$(CC) $(CFLAGS_STRICT) $(SAN_FLAGS) -o $@ $(CHECK_TEST_SRC) $(CHECK_SRC)

# The simulated CUDA runtime (probes/cuda/sim): plain C, built everywhere. kit.cuda loads it
# when DLCONFORM_CUDART names it; it exports dlc_slow_fill itself (no separate helper library).
# No SONAME: it must never stand in for a libcudart.so.N a library asks for by name.
$(SIM_LIB): $(SIM_SRC) $(SIM_HEADERS)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_STRICT) -fPIC -shared -fvisibility=hidden -o $@ $(SIM_SRC) -lpthread
# Its C unit tests, under ASan and UBSan (run by ctest).
$(BUILD)/test_cudasim: probes/tests/cudasim.c $(SIM_SRC) $(SIM_HEADERS) probes/tests/tap.h
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_STRICT) $(SAN_FLAGS) -o $@ probes/tests/cudasim.c $(SIM_SRC) -lpthread

# CUDA (probes/cuda): built where nvcc exists. The stream probe prints "skip: no CUDA device"
# at run time without a GPU; the helper library build/cuda/libdlc_cuda.so (dlc_slow_fill, for
# kit.cuda) links the shared CUDA runtime, so its streams are those of the libcudart kit.cuda loads.
NVCC ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
cuda:
	@if [ -z "$(NVCC)" ]; then echo "make cuda: no nvcc; probes/cuda not built (the stream checks report skip)"; \
	else mkdir -p $(BUILD)/cuda && \
	  $(NVCC) -O2 -cudart shared -shared -Xcompiler -fPIC,-fvisibility=hidden,-Wall,-Wextra,-Werror \
	    -o $(BUILD)/cuda/libdlc_cuda.so probes/cuda/dlc_cuda.cu && \
	  $(NVCC) -O2 -Xcompiler -Wall,-Wextra,-Werror -o $(BUILD)/cuda/stream_probe \
	  probes/cuda/stream_probe.cu && { $(BUILD)/cuda/stream_probe; rc=$$?; [ $$rc -eq 0 ] || [ $$rc -eq 77 ]; }; fi

include fuzz/fuzz.mk
include probes/tsan.mk
include probes/nanobind/nanobind.mk

# `make conformance` exits with dlconform's own status: 0 clean (or only known findings), 1
# findings, 2 when its run cannot be trusted (README: a usage error, a target that cannot load, an
# error verdict...). A recipe cannot do that (make exits 2 whenever a recipe
# fails), so the run (conformance-run) happens while make reads this file, its output on
# stderr, and its status, read back from $(OUT)/exit-status, becomes make's: 1 through make's
# question mode (-q), 2 through $(error).
ifeq ($(MAKECMDGOALS),conformance)
CONFORMANCE_VARS := PYTHON OUT TARGETS CLAUSE JOBS KNOWN TIER TIER_DIR DEVICE EXAMPLES SEED
CONFORMANCE_STATUS := $(shell $(MAKE) --no-print-directory conformance-run \
  $(foreach v,$(CONFORMANCE_VARS),$(if $(filter-out undefined,$(origin $(v))),$(v)=$(call q,$($(v))))) >&2; \
  cat $(call q,$(OUT))/exit-status 2>/dev/null || echo 2)
ifeq ($(CONFORMANCE_STATUS),1)
MAKEFLAGS += -q
else ifneq ($(CONFORMANCE_STATUS),0)
$(error dlconform exit status $(CONFORMANCE_STATUS): the run cannot be trusted, the lines above say why (reports in $(OUT)))
endif
endif
.PHONY: conformance conformance-run
conformance:
	@:
RUN_CONFORMANCE = $(PYTHON) -m dlconform run $(foreach t,$(TARGETS),--target $(call q,$(t))) --out $(call q,$(OUT)) \
  $(if $(CLAUSE),--clause $(call q,$(CLAUSE))) $(if $(JOBS),--jobs $(call q,$(JOBS))) $(if $(KNOWN),--known $(call q,$(KNOWN))) \
  $(if $(DEVICE),--device $(call q,$(DEVICE))) $(if $(EXAMPLES),--examples $(call q,$(EXAMPLES))) \
  $(if $(SEED),--seed $(call q,$(SEED)))
ifneq ($(TIER),)
# In a Debian tier (harness/tiers): built with mmdebstrap, probes built inside with its Python.
conformance-run:
	@mkdir -p $(call q,$(OUT)); rm -f $(call q,$(OUT))/exit-status; rc=0; \
	  $(MAKE) --no-print-directory tier-conformance || rc=$$?; \
	  if [ -f $(call q,$(OUT))/$(call q,$(TIER))/exit-status ]; then cp $(call q,$(OUT))/$(call q,$(TIER))/exit-status $(call q,$(OUT))/exit-status; \
	  else echo 2 > $(call q,$(OUT))/exit-status; fi
else
# DEVICE=cuda: the device checks of every target with a CUDA variant (dlconform run --device);
# the CUDA helper is built (make cuda) where the runtime finds a device.
conformance-run: deps
	@mkdir -p $(call q,$(OUT)); rm -f $(call q,$(OUT))/exit-status
	@$(MAKE) --no-print-directory modules
	@if [ "$(DEVICE)" = cuda ] && $(PYTHON) -c 'import sys; from dlconform.kit import cuda; \
	  sys.exit(cuda.runtime() is None or cuda.runtime().simulated)'; then $(MAKE) --no-print-directory cuda; fi
	@rc=0; $(RUN_CONFORMANCE) || rc=$$?; echo $$rc > $(call q,$(OUT))/exit-status
endif

# The exchange-overhead benchmark (harness/dlconform/bench/); figures into $(OUT)/results.json,
# results.md and bench.svg. REPEATS runs of the whole set flag noisy figures. --suite adds the
# suite's own throughput (checks per second per target, each target's suites run once, alone).
REPEATS ?= 5
ifneq ($(TIER),)
bench: tier-bench
else
bench: deps
	@$(MAKE) --no-print-directory build
	@mkdir -p $(OUT); $(PYTHON) -m dlconform bench $(foreach t,$(TARGETS),--target '$(t)') --out $(OUT) --repeats $(REPEATS) --suite
endif
.PHONY: bench

# Every finding's reproducer of the last run in $(OUT), run again (dlconform recheck): which still
# reproduce; recheck.md and recheck.json into $(OUT)/recheck. Exit 0 all, 1 some not, 2 broken.
.PHONY: recheck
recheck: modules
	@$(PYTHON) -m dlconform recheck --results $(call q,$(OUT))/results.json --out $(call q,$(OUT))/recheck \
	  $(if $(JOBS),--jobs $(call q,$(JOBS))) $(if $(CLAUSE),--clause $(call q,$(CLAUSE)))

# The compatibility matrix (harness/dlconform/matrix/run.py): conformance in each Debian tier
# (built when missing) and on the host, merged into $(MATRIX_OUT) (matrix.json, MATRIX.md,
# index.html). `make publish` re-renders it from the latest runs in $(MATRIX_RUNS), running nothing.
# make matrix refuses a tree with changes (the runs record a clean `git describe`); ALLOW_DIRTY=1
# runs anyway and records the revision as -dirty.
TIERS ?= bookworm trixie sid
MATRIX_RUNS ?= reports/out/matrix
MATRIX_OUT ?= reports/matrix
MATRIX_JOBS ?= 3
.PHONY: matrix publish
matrix: deps
	@$(MAKE) --no-print-directory build
	@$(PYTHON) -m dlconform.matrix.run --tiers '$(TIERS)' --targets '$(TARGETS)' --runs $(MATRIX_RUNS) \
	  --out $(MATRIX_OUT) --jobs $(MATRIX_JOBS) $(if $(CLAUSE),--clause '$(CLAUSE)') $(if $(ALLOW_DIRTY),--allow-dirty)
publish:
	@$(PYTHON) -m dlconform.matrix.run --publish --runs $(MATRIX_RUNS) --out $(MATRIX_OUT)

# The clause catalogue: suites/clauses.json is built from suites/clauses.md, its one source.
.PHONY: catalogue
catalogue:
	$(PYTHON) suites/tools/build_catalogue.py

ctest: $(BUILD)/test_check $(BUILD)/test_cudasim
	$(BUILD)/test_check
	$(BUILD)/test_cudasim

# The Python of the project against .flake8 (pyflakes and pycodestyle).
.PHONY: lint
lint:
	$(PYTHON) -m flake8 harness suites fuzz probes

pytest: build
	$(PYTHON) -m pytest -q -p no:cacheprovider harness/tests

# The whole calibration: every built-in fault of ref and pyref on the whole suite (about 10
# CPU-minutes), then harness/tests/calibration_map.json written anew from it (the cases each
# fault runs in make test besides the tests of its own clause). -x: a failing assertion leaves
# the map as it was.
.PHONY: calibrate
calibrate: build
	DLCONFORM_CALIBRATE=full $(PYTHON) -m pytest -x -q -p no:cacheprovider harness/tests/test_calibration.py

test: test-deps
	@$(MAKE) --no-print-directory lint
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory ctest
	@$(MAKE) --no-print-directory tsan-if-available
	@$(MAKE) --no-print-directory pytest

clean:
	rm -rf $(BUILD) $(PKG)/_probe*.so $(PKG)/_ref*.so $(PKG)/_nanobind*.so
