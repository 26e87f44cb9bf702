# TSan stress of ref's cached export (probes/tests/tsan_cache.c); included from the top Makefile.
#   make tsan       build build/tsan_cache with -fsanitize=thread and run it three times: the
#                   real cache must be race-free in both disciplines (exit 0); with
#                   DLCONFORM_REF_FAULT=cache_no_cas or cache_deleter_no_gil TSan must report
#                   a race (exit 66).
#   make tsan-if-available   the same where the compiler links -fsanitize=thread, else a note.
# The executable embeds libpython ($(PYTHON)-config --embed) and compiles the ref sources
# itself, so nothing in harness/dlconform/ is a sanitizer build.
TSAN_CC ?= $(CC)
TSAN_BIN := $(BUILD)/tsan_cache
TSAN_PYCONFIG = $(shell test -x $(PYTHON)-config && echo $(PYTHON)-config || echo python3-config)
TSAN_CFLAGS = $(CFLAGS_STRICT) -O1 -fsanitize=thread -fno-omit-frame-pointer $(PY_INCLUDES)
TSAN_LDLIBS = $(shell $(TSAN_PYCONFIG) --embed --ldflags) -lpthread

.PHONY: tsan tsan-if-available
$(TSAN_BIN): probes/tests/tsan_cache.c $(REF_SRC) $(CHECK_SRC) $(C_HEADERS) $(HEADER)
	@mkdir -p $(BUILD)
	$(TSAN_CC) $(TSAN_CFLAGS) -o $@ probes/tests/tsan_cache.c $(REF_SRC) $(CHECK_SRC) $(TSAN_LDLIBS)

tsan: $(TSAN_BIN)
	@TSAN_OPTIONS=halt_on_error=0 $(TSAN_BIN) >/dev/null 2>$(BUILD)/tsan_clean.log; rc=$$?; \
	  if [ $$rc -ne 0 ]; then echo "tsan: the real cache is not race-free (exit $$rc; $(BUILD)/tsan_clean.log)"; exit 1; fi; \
	  echo "tsan: real cache race-free (exit 0)"
	@DLCONFORM_REF_FAULT=cache_no_cas TSAN_OPTIONS=halt_on_error=0 $(TSAN_BIN) >/dev/null 2>$(BUILD)/tsan_fault.log; rc=$$?; \
	  if [ $$rc -ne 66 ]; then echo "tsan: cache_no_cas not caught (exit $$rc, expected 66; $(BUILD)/tsan_fault.log)"; exit 1; fi; \
	  echo "tsan: cache_no_cas caught (exit 66)"
	@DLCONFORM_REF_FAULT=cache_deleter_no_gil TSAN_OPTIONS=halt_on_error=0 $(TSAN_BIN) >/dev/null 2>$(BUILD)/tsan_fault_gil.log; rc=$$?; \
	  if [ $$rc -ne 66 ]; then echo "tsan: cache_deleter_no_gil not caught (exit $$rc, expected 66; $(BUILD)/tsan_fault_gil.log)"; exit 1; fi; \
	  echo "tsan: cache_deleter_no_gil caught (exit 66)"

tsan-if-available:
	@if echo 'int main(void){return 0;}' | $(TSAN_CC) -fsanitize=thread -x c - -o $(BUILD)/.tsan_probe 2>/dev/null; then \
	  rm -f $(BUILD)/.tsan_probe; $(MAKE) --no-print-directory tsan; \
	else echo "tsan: $(TSAN_CC) cannot link -fsanitize=thread here; skipped"; fi
