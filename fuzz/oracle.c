/* oracle: breach reporting with an optional ignore list (see oracle.h). */
#include "oracle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IGNORED 32

static char ignore_buf[512];
static const char *ignored[MAX_IGNORED];
static int n_ignored = -1; /* -1: DLCONFORM_FUZZ_IGNORE not parsed yet */

static void parse_ignored(void) {
  n_ignored = 0;
  const char *env = getenv("DLCONFORM_FUZZ_IGNORE");
  if (env == NULL) return;
  snprintf(ignore_buf, sizeof ignore_buf, "%s", env);
  char *save = NULL;
  for (char *tok = strtok_r(ignore_buf, ",", &save); tok && n_ignored < MAX_IGNORED;
       tok = strtok_r(NULL, ",", &save))
    if (*tok) ignored[n_ignored++] = tok;
}

int dlc_oracle_ignored(const char *clause) {
  if (n_ignored < 0) parse_ignored();
  for (int i = 0; i < n_ignored; ++i)
    if (strcmp(ignored[i], clause) == 0) return 1;
  return 0;
}

void dlc_oracle_fail(const char *clause, const char *fmt, ...) {
  if (dlc_oracle_ignored(clause)) return;
  va_list ap;
  fprintf(stderr, "dlconform-oracle: %s: ", clause);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  fflush(stderr);
  abort();
}
