/* check_report: the fixed-capacity list of violations every validator appends to. */
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void dlc_report_init(dlc_report *r) {
  r->count = 0;
  r->truncated = 0;
}

/* Invariant: 0 <= count <= DLC_MAX_VIOLATIONS; items[0..count) hold a clause (never NULL;
 * a NULL clause is stored as "?") and a NUL-terminated message cut to DLC_MESSAGE_LEN - 1
 * bytes. A violation that does not fit sets truncated and is otherwise dropped. */
void dlc_report_add(dlc_report *r, const char *clause, const char *fmt, ...) {
  if (r->count >= DLC_MAX_VIOLATIONS) {
    r->truncated = 1;
    return;
  }
  dlc_violation *v = &r->items[r->count++];
  v->clause = clause ? clause : "?";
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(v->message, sizeof v->message, fmt, ap);
  va_end(ap);
}

int dlc_report_has(const dlc_report *r, const char *clause) {
  for (int i = 0; i < r->count; ++i) {
    if (strcmp(r->items[i].clause, clause) == 0) return 1;
  }
  return 0;
}
