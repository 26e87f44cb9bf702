"""Session fixtures shared by the harness's own tests."""
import pytest


@pytest.fixture(scope="session")
def fault_findings(tmp_path_factory):
    """The non-pass records of every built-in fault of ref and pyref, run on its clause
    (fault_repros.findings: one run per clause, two at a time)."""
    import fault_repros

    return fault_repros.findings(tmp_path_factory.mktemp("faults"))
