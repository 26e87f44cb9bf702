"""Meta-tests: the suite is calibrated against the reference and its built-in faults.

- `ref` passes every clause: a check that fails on the reference is a wrong check.
- Every built-in fault is caught by a check on the clause it breaks: a check never seen
  failing is not yet a check.
- Every MUST clause of the spine groups that a CPU can check has at least one test.
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dlconform import catalogue

REPO = Path(__file__).resolve().parents[2]
SPINE_GROUPS = ("CAP", "OWN", "VER", "LAY", "DT", "FLG", "ERR")


def run_dlconform(out, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "dlconform", "run", "--out", str(out), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    results_file = Path(out) / "results.json"
    data = json.loads(results_file.read_text()) if results_file.exists() else None
    return proc, data


def collect():
    """(clause id -> node ids of the suite tests marked with it, node id -> what it feeds), from
    a collection of suites/."""
    from dlconform.pytest_plugin import item_feeds

    class Collector:
        def __init__(self):
            self.by_clause, self.feeds = {}, {}

        def pytest_collection_modifyitems(self, items):
            for item in items:
                self.feeds[item.nodeid] = item_feeds(item)
                for mark in item.iter_markers("clause"):
                    for cid in mark.args:
                        self.by_clause.setdefault(cid, []).append(item.nodeid)

    collector = Collector()
    rc = pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", "-p", "dlconform.pytest_plugin",
                      "--dlc-target", "ref", str(REPO / "suites")], plugins=[collector])
    assert rc == 0, f"collecting suites/ failed with {rc}"
    return collector.by_clause, collector.feeds


def collected_clauses():
    """Maps clause id -> node ids of the suite tests marked with it (collection only)."""
    return collect()[0]


def test_what_checks_feed_agrees_with_the_catalogue():
    """The grading model (suites/README.md): a check that feeds invalid input or an invalid
    argument (@pytest.mark.feeds) cites only clauses whose catalogue Input note names that kind,
    and every such note has a check of its kind, so a reader of the catalogue sees which
    verdicts the model softens."""
    by_clause, feeds = collect()
    cat = {c.id: c for c in catalogue.load().clauses}
    kind_of = {cid: (c.get("input") or "valid").split(":", 1)[0] for cid, c in cat.items()}
    wrong = [(node, cid, kind, kind_of.get(cid)) for cid, nodes in by_clause.items() for node in nodes
             for kind in [feeds[node]] if kind != "valid" and kind_of.get(cid) != kind]
    assert not wrong, "checks whose feeds kind the catalogue does not name for the clause: %s" % wrong
    unchecked = [cid for cid, kind in kind_of.items() if kind != "valid"
                 and not any(feeds[n] == kind for n in by_clause.get(cid, []))]
    assert not unchecked, "Input notes with no check of that kind: %s" % unchecked


def test_every_cpu_must_clause_of_the_spine_groups_has_a_test():
    by_clause = collected_clauses()
    missing = [c.id for c in catalogue.load().clauses
               if c.group in SPINE_GROUPS and c.level == "MUST" and c.needs == "cpu"
               and not by_clause.get(c.id)]
    assert not missing, f"MUST clauses without a test: {missing}"


def test_every_marked_clause_is_in_the_catalogue():
    known = {c.id for c in catalogue.load().clauses}
    unknown = sorted(set(collected_clauses()) - known)
    assert not unknown, f"tests cite clauses the catalogue lacks: {unknown}"


def test_ref_passes_every_check(tmp_path):
    proc, data = run_dlconform(tmp_path, "--target", "ref")
    assert data is not None, proc.stderr
    results = [r for r in data["results"] if r["target"] == "ref"]
    assert len(results) > 100, f"only {len(results)} results for ref"
    # interop records with another library as producer (`peer`) judge that pair, not ref alone:
    # a host producer that cannot export a dtype gives `unsupported` there
    not_pass = [(r["clause"], r["verdict"], r["test"], r["message"]) for r in results
                if r["verdict"] != "pass" and r.get("peer") in (None, "ref")]
    assert not not_pass, "ref must pass everything:\n" + "\n".join(map(str, not_pass))
    assert proc.returncode == 0, proc.stderr


# Faults that are data races and nothing else: no suite check can see them from Python
# (every exchange-API call holds the GIL), so the check that catches them is the TSan stress
# of ref's cache (probes/tests/tsan_cache.c, `make tsan`, part of `make test`): exit 66.
TSAN_FAULTS = {"cache_no_cas", "cache_deleter_no_gil"}


_TSAN_BUILD = threading.Lock()


def _tsan_build():
    """(ok, why): builds build/tsan_cache once, where the compiler links -fsanitize=thread."""
    with _TSAN_BUILD:
        probe = subprocess.run(["sh", "-c", "echo 'int main(void){return 0;}' | ${CC:-cc} -fsanitize=thread -x c - "
                                "-o /tmp/dlconform_tsan_probe && rm -f /tmp/dlconform_tsan_probe"], capture_output=True)
        if probe.returncode != 0:
            return False, "no TSan here"
        build = subprocess.run(["make", "--no-print-directory", "build/tsan_cache"], cwd=REPO, capture_output=True,
                               text=True, timeout=600)
        return build.returncode == 0, build.stderr[-400:]


def _tsan_fault(name, clause):
    ok, why = _tsan_build()
    if not ok and why == "no TSan here":
        return name, clause, ["skip:no TSan on this machine, not checked"], ""
    if not ok:
        return name, clause, [], "tsan_cache did not build: " + why
    env = dict(os.environ, DLCONFORM_REF_FAULT=name, TSAN_OPTIONS="halt_on_error=0")
    p = subprocess.run([str(REPO / "build" / "tsan_cache")], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode == 66 and "ThreadSanitizer: data race" in p.stderr:
        return name, clause, ["tsan:data race (tsan_cache exit 66)"], ""
    return name, clause, [], "tsan_cache exit %d" % p.returncode


def _run_fault(tmp_path, name, clause):
    if name in TSAN_FAULTS:
        return _tsan_fault(name, clause)
    out = tmp_path / name
    proc, data = run_dlconform(out, "--target", f"ref:fault={name}", "--clause", clause)
    if data is None:
        return name, clause, [], f"no results.json (rc {proc.returncode}): {proc.stderr[-400:]}"
    caught = sorted({f"{r['verdict']}:{r['test'].split('::')[-1]}" for r in data["results"]
                     if r["clause"] == clause and r["verdict"] != "pass"})
    return name, clause, caught, ""


def test_every_builtin_fault_is_caught_on_its_clause(tmp_path):
    from dlconform import _ref
    faults = sorted(_ref.FAULTS.items())
    assert len(faults) >= 12
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(lambda kv: _run_fault(tmp_path, kv[0], kv[1][0]), faults))
    width = max(len(n) for n, *_ in rows)
    print("\nfault -> clause -> caught by")
    for name, clause, caught, err in rows:
        print(f"  {name:<{width}}  {clause:<8} {', '.join(caught) or 'NOT CAUGHT ' + err}")
    missed = [(name, clause, err) for name, clause, caught, err in rows if not caught]
    assert not missed, f"faults no check catches: {missed}"


def test_every_clause_has_a_check_or_a_recorded_reason():
    """Coverage over the whole catalogue (all 119 clauses): each clause is marked on at least
    one suite test, or carries `no_check` (why it cannot be checked here); never both."""
    clauses = catalogue.load().clauses
    assert len(clauses) == 119, f"the catalogue has {len(clauses)} clauses, not 119"
    by_clause = collected_clauses()
    neither = [c.id for c in clauses if not by_clause.get(c.id) and not c.get("no_check")]
    both = [c.id for c in clauses if by_clause.get(c.id) and c.get("no_check")]
    assert not neither, f"clauses with no test and no recorded reason: {neither}"
    assert not both, f"clauses with a test that also claim no check is possible: {both}"
    checked = sum(1 for c in clauses if by_clause.get(c.id))
    print(f"\ncoverage: {checked} of {len(clauses)} clauses checked, {len(clauses) - checked} with a reason")


def _watch(tmp_path, *args):
    log = tmp_path / "state.log"
    env = dict(os.environ, DLCONFORM_STATE_LOG=str(log))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "dlconform", "run", "-q", "--target", "dlconform.testing:StateWatcher",
                           "--out", str(tmp_path / "out"), *args], env=env, capture_output=True, text=True, timeout=900)
    diffs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, diffs


def test_the_suite_leaves_the_process_alone(tmp_path):
    """The library under test sees its process as any Python process: at every make and
    from_dlpack of the whole suite, the signal handlers, warnings filters, exception hooks, GC
    settings, recursion limit, environment, standard streams and ctypes.pythonapi prototypes are
    those of a plain interpreter that imported the same libraries (testing.StateWatcher)."""
    proc, diffs = _watch(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not diffs, "the suite changed what the library can observe:\n" + "\n".join(map(json.dumps, diffs[:10]))


def test_the_state_watcher_sees_a_change(tmp_path):
    """The watcher itself can fail: a check that sets a warnings filter and a ctypes prototype
    before it calls the library is seen."""
    from dlconform.testing import write_suite

    src = write_suite(str(tmp_path / "suite"), {"test_meddles.py": '''
import ctypes, warnings, pytest

@pytest.mark.clause("T-01")
def test_meddles(target):
    warnings.simplefilter("error")
    ctypes.pythonapi.PyCapsule_GetName.restype = ctypes.c_char_p
    try:
        target.make("float32", (2,), bytes(8))
    finally:
        warnings.resetwarnings()
        ctypes.pythonapi.PyCapsule_GetName.restype = ctypes.c_int
'''}, {"T-01": "MUST"})
    proc, diffs = _watch(tmp_path, "--suites", src)
    assert diffs and {"warnings", "ctypes"} <= set(diffs[0]["diff"]), (proc.stderr[-2000:], diffs)
