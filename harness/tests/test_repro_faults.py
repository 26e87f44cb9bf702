"""Meta-test: every built-in fault's reproducers reproduce (issue 12, item 8; issue 19).

Each fail, crash, warn or timeout record of a fault of ref or pyref, run on the fault's clause,
carries a script that names how to run it, exits non-zero under the fault (a crash dies by its
signal) and exits 0 with the fault off. The scripts are the checks' own code
(dlconform.repro.script), so this holds the generator, not a second copy of each check.

A script whose standalone form test_bugreport.py runs (the same check and arguments, with the
modules embedded instead of imported) is run here only as a sample, one per library and test
file, which holds the linked form's imports (issue 22: each script ran twice before).
"""
import sys

import fault_repros as fr
from dlconform import HARNESS_DIR, SUITES_DIR
from dlconform.repro import CALLERS_PATH


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
    assert not bare, "records whose reproducer is no script with a run line: %s" % bare[:10]
    # a finding's script is about the finding's clause
    unfocused = [(r["fault"], r["test"], r["clause"]) for r in fault_findings if r["verdict"] != "crash"
                 and "focus=%r" % r["clause"] not in r["repro"]]
    assert not unfocused, unfocused[:10]


def _to_run(groups, findings):
    """The groups whose standalone form test_bugreport.py does not run, and the first of each
    library and test file among the others."""
    standalone = {(library, repro) for library in ("ref", "pyref")
                  for repro, _ in fr.standalone_scripts(findings, library)[0].values()}
    out, sampled = {}, set()
    for key, recs in sorted(groups.items(), key=lambda kv: kv[0][:2]):
        library, _, text = key
        where = (library, recs[0]["test"].split("::")[0])
        if (library, text) not in standalone or where not in sampled:
            out[key] = recs
            sampled.add(where)
    return out


def test_reproducers_fail_under_their_fault_and_pass_without(fault_findings, tmp_path):
    groups = _groups(fault_findings)
    run = _to_run(groups, fault_findings)
    head = '# run: PYTHONPATH=%s:%s"%s" %s repro.py' % (HARNESS_DIR, SUITES_DIR, CALLERS_PATH, sys.executable)

    def one(item):
        (library, fault, text), recs = item
        name = fr.slug("%s_%s_%s" % (library, fault, recs[0]["test"].split("::")[-1]), text)
        problems = []
        first = text.splitlines()[0]
        if first != head and not first.endswith(head[len("# run: "):]):
            problems.append("run line %r" % first)
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

    bad = [p for p in fr.run_many(one, sorted(run.items(), key=lambda kv: kv[0][:2])) if p]
    print("\n%d reproducers of %d records; %d run here, the others standalone in test_bugreport.py"
          % (len(groups), len(fault_findings), len(run)))
    assert not bad, "\n".join(bad)
