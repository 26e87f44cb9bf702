"""Meta-test: every built-in fault's reproducers reproduce (issue 12, item 8).

Each fail, crash, warn or timeout record of a fault of ref or pyref, run on the fault's clause,
carries a snippet that names how to run it, exits non-zero under the fault (a crash dies by
its signal) and exits 0 with the fault off. Rerun hints write to a fresh folder.
"""
import sys

import fault_repros as fr

# (library, fault, test function) -> why its reproducer cannot do that (seen, to fix); none today
EXCEPTIONS = {}


def _groups(findings):
    """{(library, fault, repro): [records]}"""
    out = {}
    for r in findings:
        out.setdefault((r["library"], r["fault"], r["repro"]), []).append(r)
    return out


def test_every_fault_has_findings_with_reproducers(fault_findings):
    caught = {(r["library"], r["fault"]) for r in fault_findings}
    missed = [f[:2] for f in fr.faults() if f[:2] not in caught]
    assert not missed, "faults with no non-pass record on their clause: %s" % missed
    hints = [r for r in fault_findings if "dlconform run" in r["repro"]]
    assert all('--out "$(mktemp -d)"' in r["repro"] for r in hints), [r["repro"] for r in hints][:3]
    bare = [(r["fault"], r["test"]) for r in fault_findings if not r["repro"].startswith(fr.RUN)]
    assert not bare, "records whose reproducer is no snippet with a run line: %s" % bare[:10]


def test_reproducers_fail_under_their_fault_and_pass_without(fault_findings, tmp_path):
    groups = _groups(fault_findings)

    def one(item):
        (library, fault, text), recs = item
        name = fr.slug("%s_%s_%s" % (library, fault, recs[0]["test"].split("::")[-1]), text)
        key = (library, fault, recs[0]["test"].split("::")[-1].split("[")[0])
        if key in EXCEPTIONS:
            return None
        head = text.splitlines()[0]
        problems = []
        if head != "# run: PYTHONPATH=%s %s repro.py" % (fr.HARNESS, sys.executable) and "PYTHONMALLOC" not in head:
            problems.append("run line %r" % head)
        rc, out = fr.run(text, tmp_path, name + "_on")
        if rc in (0, None):
            problems.append("under the fault: exit %s (%s)" % (rc, fr.tail(out)))
        elif rc > 0 and "REPRODUCED " not in out:
            problems.append("under the fault: exit %s without naming the clause (%s)" % (rc, fr.tail(out)))
        rc, out = fr.run(fr.fault_off(text, library, fault), tmp_path, name + "_off")
        if rc != 0:
            problems.append("fault off: exit %s (%s)" % (rc, fr.tail(out)))
        if problems:
            return "%s:%s %s %s: %s" % (library, fault, recs[0]["clause"], recs[0]["test"], "; ".join(problems))
        return None

    bad = [p for p in fr.run_many(one, sorted(groups.items(), key=lambda kv: kv[0][:2])) if p]
    seen = {(r["library"], r["fault"], r["test"].split("::")[-1].split("[")[0]) for r in fault_findings}
    bad += ["exception %r names no record any more: drop it" % (key,) for key in sorted(set(EXCEPTIONS) - seen)]
    print("\n%d reproducers of %d records, %d exceptions" % (len(groups), len(fault_findings), len(EXCEPTIONS)))
    assert not bad, "\n".join(bad)
