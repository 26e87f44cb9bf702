"""Session fixtures shared by the harness's own tests."""
import concurrent.futures
import os
import sys
import threading

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The folders of the scripts that test_ci_recipes.py imports: .ci/library/check (gha) and
# fuzz/oss-fuzz (bundle).
sys.path.insert(0, os.path.join(ROOT, ".ci", "library", "check"))
sys.path.insert(0, os.path.join(ROOT, "fuzz", "oss-fuzz"))


#: the test files that read the faults' runs (fault_runs, fault_findings)
FAULT_RUN_USERS = {"test_bugreport.py", "test_calibration.py", "test_cuda_checks.py", "test_pyref.py",
                   "test_repro_faults.py"}
_BACKGROUND = {}


def pytest_collection_modifyitems(session, config, items):
    """The faults' runs take half a minute of both cores, the standalone scripts of their
    findings (test_bugreport.py) as long again, and most other tests leave one core idle most of
    the time (waiting on a child, a browser, a sleep): where tests that read the runs are
    collected, they go last, and the runs and the scripts are made meanwhile in a thread of
    their own at a lower priority (Linux nice 10, which the thread's children inherit), so that
    they use the core the other tests leave idle. What each test asserts is unchanged."""
    users = [item for item in items if item.path.name in FAULT_RUN_USERS]
    if not users or config.option.collectonly or len(users) == len(items):
        return
    items[:] = [item for item in items if item.path.name not in FAULT_RUN_USERS] + users
    factory = config._tmp_path_factory
    tasks = [("fault_runs", _fault_runs, (factory.mktemp("faults"),))]
    if any(item.path.name == "test_bugreport.py" and "standalone_runs" in item.fixturenames for item in users):
        tasks += [(("standalone", library), _standalone_runs, (library, factory.mktemp("standalone-" + library)))
                  for library in ("ref", "pyref")]
    for key, _, _ in tasks:
        _BACKGROUND[key] = concurrent.futures.Future()
    # a daemon thread: a session that stops early (-x, Ctrl-C) does not wait for it at its exit
    threading.Thread(target=_niced, args=(tasks,), daemon=True).start()


def _niced(tasks):
    """Runs the tasks one after another at nice 10, each one's outcome into its future."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)  # this thread and its children
    except (AttributeError, OSError):
        pass
    for key, fn, args in tasks:
        try:
            _BACKGROUND[key].set_result(fn(*args))
        except BaseException as e:  # noqa: B902 -- handed to the test that reads it
            _BACKGROUND[key].set_exception(e)


def _fault_runs(out):
    import fault_repros

    return fault_repros.clause_runs(out)


def _standalone_runs(library, folder):
    import fault_repros

    return fault_repros.standalone_runs(fault_repros.findings(_BACKGROUND["fault_runs"].result()), library, folder)


@pytest.fixture(scope="session")
def standalone_runs(fault_findings, tmp_path_factory):
    """A function of a library giving fault_repros.standalone_runs of its faults' findings:
    made in the background where the session could (pytest_collection_modifyitems)."""
    import fault_repros

    def get(library):
        if ("standalone", library) in _BACKGROUND:
            return _BACKGROUND["standalone", library].result()
        return fault_repros.standalone_runs(fault_findings, library, tmp_path_factory.mktemp("standalone-" + library))

    return get


@pytest.fixture(scope="session")
def fault_runs(tmp_path_factory):
    """{(library, fault): records} of every built-in fault of ref and pyref, run on the tests
    of its clause (fault_repros.clause_runs: two runners, one fault after another); the
    calibration reads them all. Made in the background where the session has other tests
    to run meanwhile (pytest_collection_modifyitems)."""
    if "fault_runs" in _BACKGROUND:
        return _BACKGROUND["fault_runs"].result()
    return _fault_runs(tmp_path_factory.mktemp("faults"))


@pytest.fixture(scope="session")
def fault_findings(fault_runs):
    """Their non-pass records, each with its fault: the reproducers the tests run."""
    import fault_repros

    return fault_repros.findings(fault_runs)
