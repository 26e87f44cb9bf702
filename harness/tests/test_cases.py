"""A check's case forked from the warm parent (dlconform/cases.py, zygote.py): it must end as the
`python -c SCRIPT` it stands for would, and never outlive its limit or the check that asked."""
import json
import os
import sys

from dlconform.runner import Runner
from fakes import FAKE, write_suite

# Each scenario is a script run through cases.run by a check in the runner's child; the check
# writes what came back to a file named in the environment, which the test below reads.
SUITE = r'''
import json, os, pytest
from dlconform import cases

SCRIPTS = {
    "normal": """
import atexit, os, sys
atexit.register(lambda: print("ATEXIT", flush=True))
print(sys.argv, __name__, os.environ.get("DLC_CASE_VAR"), os.getcwd(), os.getppid())
print("to stderr", file=sys.stderr)
""",
    "raises": "def f():\n    raise ValueError('boom')\nf()\n",
    "exits": "import sys\nsys.exit(3)\n",
    "segv": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "sleeps": "import time\ntime.sleep(60)\n",
}


@pytest.mark.clause("T-01")
def test_scenarios(tmp_path):
    seen = {"test_pid": os.getpid(), "test_ppid": os.getppid(), "cwd": str(tmp_path)}
    for name, script in SCRIPTS.items():
        env = dict(os.environ, DLC_CASE_VAR="v-" + name)
        began = __import__("time").monotonic()
        got = cases.run(script, env, str(tmp_path), 1.0 if name == "sleeps" else 30.0)
        seen[name] = None if got is None else list(got) + [__import__("time").monotonic() - began]
    with open(os.environ["DLC_CASE_OUT"], "w") as f:
        json.dump(seen, f)


@pytest.mark.clause("T-01")
def test_the_check_dies_with_a_case_running(tmp_path):
    import threading
    pid_file = os.environ["DLC_CASE_OUT"] + ".pid"
    script = "import os, time\nopen(%r, 'w').write(str(os.getpid()))\ntime.sleep(60)\n" % pid_file
    threading.Thread(target=cases.run, args=(script, dict(os.environ), str(tmp_path), 120.0), daemon=True).start()
    for _ in range(500):
        if os.path.exists(pid_file) and open(pid_file).read():
            break
        __import__("time").sleep(0.01)
    os._exit(0)  # the runner's child ends; its zygote must not leave the case running


@pytest.mark.clause("T-01")
def test_x_after_the_death():
    """In the next child of the same zygote: the case of the dead check is gone."""
    pid = int(open(os.environ["DLC_CASE_OUT"] + ".pid").read())
    for _ in range(300):
        if not os.path.exists("/proc/%d" % pid):
            break
        __import__("time").sleep(0.01)
    with open(os.environ["DLC_CASE_OUT"] + ".after", "w") as f:
        f.write("alive" if os.path.exists("/proc/%d" % pid) else "gone")
'''


def test_a_forked_case_ends_as_python_c_would(tmp_path, monkeypatch):
    suite = write_suite(str(tmp_path / "suite"), {"test_cases_fake.py": SUITE}, {"T-01": "MUST"})
    out = str(tmp_path / "seen.json")
    monkeypatch.setenv("DLC_CASE_OUT", out)
    monkeypatch.delenv("DLCONFORM_FORK", raising=False)
    Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=20).run_target(FAKE)
    seen = json.load(open(out))

    rc, stdout, stderr, _ = seen["normal"]
    argv, name, var, cwd, ppid = stdout.splitlines()[0].split()
    assert rc == 0 and stdout.splitlines()[-1] == "ATEXIT", stdout  # the interpreter finalised
    assert argv == "['-c']" and name == "__main__" and var == "v-normal"
    assert cwd == seen["cwd"] != os.getcwd() and stderr == "to stderr\n"
    # forked from the warm parent (the check's own parent), not from the check's process
    assert int(ppid) == seen["test_ppid"] != seen["test_pid"]

    rc, stdout, stderr, _ = seen["raises"]
    assert rc == 1 and stderr.strip().splitlines()[-1] == "ValueError: boom", stderr
    assert stderr.startswith("Traceback") and "zygote" not in stderr and 'File "<string>", line 3' in stderr
    assert seen["exits"][0] == 3
    assert seen["segv"][0] == -11
    rc, stdout, stderr, took = seen["sleeps"]
    assert rc is None and took < 10  # killed at its limit (1 s), reported as a timeout

    assert open(out + ".after").read() == "gone", "the case outlived the check that asked for it"


def test_without_a_warm_parent_there_is_no_forked_case():
    from dlconform import cases

    assert cases.run("pass", dict(os.environ), os.getcwd(), 5) is None
