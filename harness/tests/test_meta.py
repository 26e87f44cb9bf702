"""Meta-tests of the suite's coverage of the catalogue, and `run_dlconform`, the helper that
runs dlconform for the other meta-tests.

- Every MUST clause of the spine groups that a CPU can check has at least one test.
- Every test cites clauses of the catalogue; every clause has a test or a recorded reason.

The calibration against ref, pyref and their built-in faults is test_calibration.py.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fakes import WATCHER

from dlconform import catalogue

REPO = Path(__file__).resolve().parents[2]
SPINE_GROUPS = ("CAP", "OWN", "VER", "LAY", "DT", "FLG", "ERR")


def run_dlconform(out, *args, timeout=600, env=None):
    """(the process, results.json's data or None) of `dlconform run --out OUT ARGS`; `env`:
    variables to set for it."""
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "dlconform", "run", "--out", str(out), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
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
    proc = subprocess.run([sys.executable, "-m", "dlconform", "run", "-q", "--target", WATCHER,
                           "--out", str(tmp_path / "out"), *args], env=env, capture_output=True, text=True, timeout=900)
    diffs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return proc, diffs


def test_the_suite_leaves_the_process_alone(tmp_path):
    """The library under test sees its process as any Python process: at every make and
    from_dlpack of the whole suite, the signal handlers, warnings filters, exception hooks, GC
    settings, recursion limit, environment, standard streams and ctypes.pythonapi prototypes are
    those of a plain interpreter that imported the same libraries (fakes.StateWatcher)."""
    proc, diffs = _watch(tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not diffs, "the suite changed what the library can observe:\n" + "\n".join(map(json.dumps, diffs[:10]))


def test_the_state_watcher_sees_a_change(tmp_path):
    """The watcher itself can fail: a check that sets a warnings filter and a ctypes prototype
    before it calls the library is seen."""
    from fakes import write_suite

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
