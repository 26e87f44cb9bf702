/* oracle: how a fuzz target reports a breach. One line on stderr, then abort(), so both
 * libFuzzer and AFL++ record the input as a crash and triage can key on the line:
 *     dlconform-oracle: CLAUSE: message
 * CLAUSE is a clause ID of suites/clauses.json, or EXC for an exception class DESIGN.md
 * (Oracles, Exceptions) calls a finding but no catalogue clause names, EXTENT for a
 * disagreement of probes/check's extent arithmetic with its stated contract, or REPORT for
 * a malformed dlc_report.
 *
 * Known findings can be set aside to look for new ones: DLCONFORM_FUZZ_IGNORE is a
 * comma-separated list of CLAUSE values whose breaches are not reported; dlc_oracle_fail
 * then returns and the target goes on with its next oracle. A consumer target also stops
 * sending inputs that break an ignored must-refuse clause, since a consumer that crashes on
 * them (rather than accepting) would otherwise end every run the same way. */
#ifndef DLCONFORM_FUZZ_ORACLE_H
#define DLCONFORM_FUZZ_ORACLE_H

/* 1 when clause is listed in DLCONFORM_FUZZ_IGNORE. */
int dlc_oracle_ignored(const char *clause);

/* Reports a breach of clause and aborts, unless clause is ignored (then it returns). */
void dlc_oracle_fail(const char *clause, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif /* DLCONFORM_FUZZ_ORACLE_H */
