/* fixed_env: OSS-Fuzz and ClusterFuzzLite run a target with no environment of ours, so
 * build.sh bakes the consumer or producer name into each executable. A constructor sets
 * DLC_FIXED_ENV_NAME=DLC_FIXED_ENV_VALUE before LLVMFuzzerInitialize (pyhost reads it), unless
 * the variable is already set (a local override). */
#include <stdlib.h>

#ifndef DLC_FIXED_ENV_NAME
#error "define DLC_FIXED_ENV_NAME and DLC_FIXED_ENV_VALUE"
#endif

__attribute__((constructor)) static void dlc_fixed_env(void) {
  setenv(DLC_FIXED_ENV_NAME, DLC_FIXED_ENV_VALUE, 0);
}

/* The embedded interpreter is never finalised, so what it allocated is still reachable at
 * exit; LeakSanitizer would report that as a leak of every run. Allocation failures are
 * answered with NULL (MemoryError), as make fuzz-ci runs them. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0:allocator_may_return_null=1"; }
