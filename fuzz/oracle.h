/* oracle: how a fuzz target reports a breach. One line on stderr, then abort():
 *     dlconform-oracle: CLAUSE: message
 * Both libFuzzer and AFL++ then record the input as a crash, and triage keys on the line.
 * CLAUSE is one of:
 *   - a clause ID of suites/clauses.json;
 *   - EXC, a refusal whose exception class no catalogue clause names for the case, or a
 *     SystemError (fuzz/README.md, "Why these oracles");
 *   - EXTENT, probes/check's extent arithmetic against its stated contract;
 *   - REPORT, a malformed dlc_report.
 *
 * The dedup key of a breach is "CLAUSE: message" with every number (decimal, or 0x hex)
 * replaced by N (dlc_oracle_normalize), so one bug seen with different sizes is one key.
 *
 * Known findings can be set aside, to look for new ones:
 *   - DLCONFORM_FUZZ_IGNORE: comma-separated bare CLAUSE values;
 *   - DLCONFORM_FUZZ_IGNORE_FILE: a file of lines, each a bare CLAUSE or a dedup key
 *     (fuzz/known/TARGET.txt, and what `make fuzz-ci` found earlier in the same run).
 * dlc_oracle_fail then returns, and the target goes on with its next oracle. A consumer
 * target also stops sending inputs that break an ignored bare must-refuse clause: a consumer
 * that crashes on them, rather than accepting, would otherwise end every run the same way. */
#ifndef DLCONFORM_FUZZ_ORACLE_H
#define DLCONFORM_FUZZ_ORACLE_H

#include <stddef.h>

/* Opens the tail of a message whose breach the spec leaves ambiguous: "(ambiguous: why)".
 * fuzz-ci reports such a finding at SHOULD (a warn, not a crash), as the suites warn for the
 * same case (harness/dlconform/fuzz/ci.py, finding_level). */
#define DLC_AMBIGUOUS "(ambiguous: "

/* Opens the tail of a message about an invalid argument that was accepted: "(invalid
 * argument: why)". The array API leaves the behaviour unspecified, so fuzz-ci reports it at
 * SHOULD, as the suites' grading does (suites/README.md, Grading). */
#define DLC_INVALID_ARGUMENT "(invalid argument: "

/* 1 when clause is ignored as a whole (a bare clause in either list). */
int dlc_oracle_ignored(const char *clause);

/* Copies in to out (capacity cap, NUL-terminated) with numbers replaced by N. */
void dlc_oracle_normalize(const char *in, char *out, size_t cap);

/* 1 when DLCONFORM_FUZZ_KEEP_GOING is set: dlc_oracle_fail then reports every breach and
 * returns, so a replay of many inputs in one process gives each input's first breach. */
int dlc_oracle_keeps_going(void);

/* Reports a breach of clause and aborts, unless clause or its key is ignored (then it
 * returns), or dlc_oracle_keeps_going (then it reports and returns). */
void dlc_oracle_fail(const char *clause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* DLCONFORM_FUZZ_ORACLE_H */
