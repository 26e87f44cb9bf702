"""Session fixtures shared by the harness's own tests."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The folders of the scripts that test_ci_recipes.py imports: .ci/library/check (gha) and
# fuzz/oss-fuzz (bundle).
sys.path.insert(0, os.path.join(ROOT, ".ci", "library", "check"))
sys.path.insert(0, os.path.join(ROOT, "fuzz", "oss-fuzz"))


@pytest.fixture(scope="session")
def fault_runs(tmp_path_factory):
    """{(library, fault): records} of every built-in fault of ref and pyref, run on the tests
    of its clause (fault_repros.clause_runs: two runners, one fault after another); the
    calibration reads them all."""
    import fault_repros

    return fault_repros.clause_runs(tmp_path_factory.mktemp("faults"))


@pytest.fixture(scope="session")
def fault_findings(fault_runs):
    """Their non-pass records, each with its fault: the reproducers the tests run."""
    import fault_repros

    return fault_repros.findings(fault_runs)
