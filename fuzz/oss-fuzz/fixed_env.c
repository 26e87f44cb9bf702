/* fixed_env: OSS-Fuzz and ClusterFuzzLite run a target with no environment of ours, so
 * build.sh bakes the consumer or producer name into each executable. A constructor sets
 * DLC_FIXED_ENV_NAME=DLC_FIXED_ENV_VALUE before LLVMFuzzerInitialize (pyhost reads it), and
 * DLCONFORM_FUZZ_IGNORE_FILE to the known findings build.sh put beside the executable
 * (EXE.known, fuzz/known/ format; oracle.h), when there are some. A variable already set
 * is left alone (a local override). */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef DLC_FIXED_ENV_NAME
#error "define DLC_FIXED_ENV_NAME and DLC_FIXED_ENV_VALUE"
#endif

__attribute__((constructor)) static void dlc_fixed_env(void) {
  setenv(DLC_FIXED_ENV_NAME, DLC_FIXED_ENV_VALUE, 0);
  static const char suffix[] = ".known";
  char known[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", known, sizeof known - sizeof suffix);
  if (n <= 0) return;
  memcpy(known + n, suffix, sizeof suffix);
  if (access(known, R_OK) == 0) setenv("DLCONFORM_FUZZ_IGNORE_FILE", known, 0);
}

/* The embedded interpreter is never finalised, so what it allocated is still reachable at
 * exit; LeakSanitizer would report that as a leak of every run. Allocation failures are
 * answered with NULL (MemoryError), as make fuzz-ci runs them. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0:allocator_may_return_null=1"; }
