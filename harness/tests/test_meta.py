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

from dlconform import catalogue

REPO = Path(__file__).resolve().parents[2]
SPINE_GROUPS = ("CAP", "OWN", "VER", "LAY", "DT", "FLG", "ERR")


def run_dlconform(out, *args, timeout=600):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, "-m", "dlconform", "run", "--out", str(out), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    results_file = Path(out) / "results.json"
    data = json.loads(results_file.read_text()) if results_file.exists() else None
    return proc, data


def collected_clauses():
    """Maps clause id -> node ids of the suite tests marked with it (collection only)."""
    class Collector:
        def __init__(self):
            self.by_clause = {}

        def pytest_collection_modifyitems(self, items):
            for item in items:
                for mark in item.iter_markers("clause"):
                    for cid in mark.args:
                        self.by_clause.setdefault(cid, []).append(item.nodeid)

    collector = Collector()
    rc = pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", "-p", "dlconform.pytest_plugin",
                      "--dlc-target", "ref", str(REPO / "suites")], plugins=[collector])
    assert rc == 0, f"collecting suites/ failed with {rc}"
    return collector.by_clause


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
