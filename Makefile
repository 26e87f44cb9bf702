# dlconform: `make` builds, `make conformance` runs the suite, `make test` tests the project.
PYTHON ?= $(shell test -x /usr/bin/python3 && echo /usr/bin/python3 || command -v python3)
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
C_HEADERS := $(wildcard probes/*.h probes/probe/*.h probes/ref/*.h probes/tests/*.h)

export PYTHONPATH := $(CURDIR)/harness$(if $(PYTHONPATH),:$(PYTHONPATH))

.PHONY: all build deps test-deps header conformance test ctest pytest clean
all: build
build: $(HEADER) $(PROBE_SO) $(REF_SO) $(BUILD)/test_check

deps:
	@sh probes/build-tools/deps.sh build
test-deps:
	@sh probes/build-tools/deps.sh test

header: $(HEADER)
$(HEADER):
	@sh probes/build-tools/dlpack_header.sh $(INC)

$(PROBE_SO): $(PROBE_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	$(CC) $(CFLAGS_STRICT) $(PY_INCLUDES) -fPIC -shared -o $@ $(PROBE_SRC) $(CHECK_SRC) -lpthread
$(REF_SO): $(REF_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	$(CC) $(CFLAGS_STRICT) $(PY_INCLUDES) -fPIC -shared -o $@ $(REF_SRC) $(CHECK_SRC) -lpthread

# C unit tests of probes/check run under ASan and UBSan.
$(BUILD)/test_check: $(CHECK_TEST_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	$(CC) $(CFLAGS_STRICT) $(SAN_FLAGS) -o $@ $(CHECK_TEST_SRC) $(CHECK_SRC)

include harness/tiers/tiers.mk
include fuzz/fuzz.mk

ifneq ($(TIER),)
# In a Debian tier (harness/tiers): built with mmdebstrap, probes built inside with its Python.
conformance: tier-conformance
else
conformance: deps
	@$(MAKE) --no-print-directory build
	@mkdir -p $(OUT); rc=0; $(PYTHON) -m dlconform run $(foreach t,$(TARGETS),--target '$(t)') --out $(OUT) \
	  $(if $(CLAUSE),--clause '$(CLAUSE)') || rc=$$?; echo $$rc > $(OUT)/exit-status; exit $$rc
endif

ctest: $(BUILD)/test_check
	$(BUILD)/test_check

pytest: build
	$(PYTHON) -m pytest -q -p no:cacheprovider harness/tests

test: test-deps
	@$(MAKE) --no-print-directory build
	@$(MAKE) --no-print-directory ctest
	@$(MAKE) --no-print-directory pytest

clean:
	rm -rf $(BUILD) $(PKG)/_probe*.so $(PKG)/_ref*.so
