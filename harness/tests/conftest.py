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
def fault_findings(tmp_path_factory):
    """The non-pass records of every built-in fault of ref and pyref, run on its clause
    (fault_repros.findings: two runners, one fault after another)."""
    import fault_repros

    return fault_repros.findings(tmp_path_factory.mktemp("faults"))
