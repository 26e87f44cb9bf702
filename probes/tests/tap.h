/* tap: minimal assertion counters for the C unit tests. Each CHECK counts one pass or one
 * failure; tap_finish() prints the closing "N passed, N failed" line and returns the exit
 * status (non-zero when anything failed). */
#ifndef DLCONFORM_TAP_H
#define DLCONFORM_TAP_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static int tap_passed, tap_failed;

static void tap_result(int ok, const char *file, int line, const char *what) {
  if (ok) {
    ++tap_passed;
  } else {
    ++tap_failed;
    printf("FAIL %s:%d: %s\n", file, line, what);
  }
}

#define CHECK(cond) tap_result(!!(cond), __FILE__, __LINE__, #cond)

#define CHECK_INT(got, want)                                                               \
  do {                                                                                     \
    long long g_ = (long long)(got), w_ = (long long)(want);                               \
    tap_result(g_ == w_, __FILE__, __LINE__, #got " == " #want);                           \
    if (g_ != w_) printf("     got %lld, want %lld\n", g_, w_);                            \
  } while (0)

#define CHECK_STR(got, want)                                                               \
  do {                                                                                     \
    const char *g_ = (got), *w_ = (want);                                                  \
    int ok_ = (g_ == NULL && w_ == NULL) || (g_ && w_ && strcmp(g_, w_) == 0);             \
    tap_result(ok_, __FILE__, __LINE__, #got " == " #want);                                \
    if (!ok_) printf("     got \"%s\", want \"%s\"\n", g_ ? g_ : "(null)", w_ ? w_ : "(null)"); \
  } while (0)

static int tap_finish(void) {
  printf("%d passed, %d failed\n", tap_passed, tap_failed);
  return tap_failed != 0;
}

#endif /* DLCONFORM_TAP_H */
