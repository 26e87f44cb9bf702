/* oracle: breach reporting with ignore lists (see oracle.h). */
#include "oracle.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_IGNORED 32
#define MAX_KEYS 256
#define KEY_MAX 200

static char ignore_buf[512];
static const char *ignored[MAX_IGNORED]; /* bare clauses: DLCONFORM_FUZZ_IGNORE + file */
static int n_ignored = -1;               /* -1: not parsed yet */
static char keys[MAX_KEYS][KEY_MAX];     /* "CLAUSE: normalised message" lines of the file */
static int n_keys;
static int keep_going; /* DLCONFORM_FUZZ_KEEP_GOING: report each breach, abort on none */

static void add_clause(const char *tok) {
  if (*tok && n_ignored < MAX_IGNORED) ignored[n_ignored++] = tok;
}

/* Ignore file: one key per line; a line without ": " is a bare clause. Lines starting with
 * '#' and blank lines are skipped. Bare clauses are copied into a static pool. */
static void parse_file(const char *path) {
  static char pool[MAX_IGNORED][32];
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    line[strcspn(line, "\r\n")] = '\0';
    if (line[0] == '\0' || line[0] == '#') continue;
    if (strstr(line, ": ") == NULL) {
      if (n_ignored < MAX_IGNORED) {
        snprintf(pool[n_ignored], sizeof pool[0], "%s", line);
        add_clause(pool[n_ignored]);
      }
    } else if (n_keys < MAX_KEYS) {
      snprintf(keys[n_keys++], KEY_MAX, "%s", line);
    }
  }
  fclose(f);
}

static void parse_ignored(void) {
  n_ignored = 0;
  keep_going = getenv("DLCONFORM_FUZZ_KEEP_GOING") != NULL;
  const char *env = getenv("DLCONFORM_FUZZ_IGNORE");
  if (env != NULL) {
    snprintf(ignore_buf, sizeof ignore_buf, "%s", env);
    char *save = NULL;
    for (char *tok = strtok_r(ignore_buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
      add_clause(tok);
  }
  const char *file = getenv("DLCONFORM_FUZZ_IGNORE_FILE");
  if (file != NULL && *file) parse_file(file);
}

int dlc_oracle_keeps_going(void) {
  if (n_ignored < 0) parse_ignored();
  return keep_going;
}

/* String equality without strcmp: libFuzzer intercepts strcmp process-wide and records
 * every mismatch for its CMP mutations, which is only noise for these lookups (and, per
 * input, a cost). */
static int same(const char *a, const char *b) {
  if (a == b) return 1;
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

/* Per-input lookups memoised by clause pointer (clauses are string literals); a hit also
 * compares the text, so a reused buffer with other contents is looked up again. */
#define MEMO 64
static struct {
  const char *ptr;
  char text[24];
  int ignored;
} memo[MEMO];

int dlc_oracle_ignored(const char *clause) {
  if (n_ignored < 0) parse_ignored();
  size_t h = ((uintptr_t)clause >> 3) % MEMO;
  if (memo[h].ptr == clause && same(memo[h].text, clause)) return memo[h].ignored;
  int yes = 0;
  for (int i = 0; i < n_ignored && !yes; ++i) yes = same(ignored[i], clause);
  if (strlen(clause) < sizeof memo[h].text) {
    memo[h].ptr = clause;
    memcpy(memo[h].text, clause, strlen(clause) + 1);
    memo[h].ignored = yes;
  }
  return yes;
}

/* Length of the token at in[i] that normalises to N (0: none): a number, or a literal N alone
 * (so that normalising a key again leaves it as it is). */
static size_t number_at(const char *in, size_t i) {
  size_t j = i;
  if (in[j] == '0' && (in[j + 1] == 'x' || in[j + 1] == 'X')) {
    j += 2;
    while (isxdigit((unsigned char)in[j])) ++j;
    return j - i;
  }
  if (isdigit((unsigned char)in[j]) ||
      (in[j] == '-' && isdigit((unsigned char)in[j + 1]) && (j == 0 || !isalnum((unsigned char)in[j - 1])))) {
    ++j;
    while (isdigit((unsigned char)in[j])) ++j;
    return j - i;
  }
  if (in[j] == 'N' && (j == 0 || !isalnum((unsigned char)in[j - 1])) && !isalnum((unsigned char)in[j + 1]))
    return 1;
  return 0;
}

void dlc_oracle_normalize(const char *in, char *out, size_t cap) {
  size_t o = 0;
  int depth = 0; /* inside [...]: a list of numbers (a shape, strides) is one N, any length */
  if (cap == 0) return;
  for (size_t i = 0; in[i] != '\0' && o + 1 < cap;) {
    size_t n = number_at(in, i);
    if (n > 0) {
      i += n;
      if (depth > 0 && o >= 3 && memcmp(out + o - 3, "N, ", 3) == 0)
        o -= 2; /* "N, N" -> "N" */
      else
        out[o++] = 'N';
    } else {
      depth += in[i] == '[' ? 1 : in[i] == ']' && depth > 0 ? -1 : 0;
      out[o++] = in[i++];
    }
  }
  out[o] = '\0';
}

/* 1 when "clause: normalised message" is a line of the ignore file. */
static int key_ignored(const char *clause, const char *msg) {
  if (n_keys == 0) return 0;
  char norm[KEY_MAX], key[KEY_MAX + 40];
  dlc_oracle_normalize(msg, norm, sizeof norm);
  snprintf(key, sizeof key, "%s: %s", clause, norm);
  key[KEY_MAX - 1] = '\0'; /* keys are compared at the file's line capacity */
  for (int i = 0; i < n_keys; ++i)
    if (same(keys[i], key)) return 1;
  return 0;
}

void dlc_oracle_fail(const char *clause, const char *fmt, ...) {
  if (dlc_oracle_ignored(clause)) return;
  char msg[4096]; /* whole: a cut list would normalise differently at each length */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (key_ignored(clause, msg)) return;
  fprintf(stderr, "dlconform-oracle: %s: %s\n", clause, msg);
  fflush(stderr);
  if (!keep_going) abort();
}
