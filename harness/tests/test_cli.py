"""`python3 -m dlconform run`: exit codes, skipped targets, output files."""
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

from dlconform.runner import child_env, safe_name
from fakes import FAKE, write_suite

REPO_LIBS = Path(__file__).resolve().parent / "libs"

PASSING = '''
import pytest

@pytest.mark.clause("T-01")
def test_ok(target):
    assert target.make("uint8", (1,), b"x").data == b"x"

@pytest.mark.clause("T-02")
def test_should(check):
    check.that(False, "T-02", "a SHOULD breach is a warning")
'''
FAILING = '''
import pytest

@pytest.mark.clause("T-01")
def test_bad():
    assert False
'''


def dlc(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "dlconform"] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=child_env(), cwd=cwd, timeout=120, text=True)


def suite(tmp_path, src):
    return write_suite(str(tmp_path / "suite"), {"test_s.py": src}, {"T-01": "MUST", "T-02": "SHOULD"})


def test_exit_0_when_nothing_fails(tmp_path):
    out = tmp_path / "out"
    p = dlc("run", "--target", FAKE, "--suites", suite(tmp_path, PASSING), "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["summary"][FAKE]["pass"] == 1 and doc["summary"][FAKE]["warn"] == 1
    assert doc["targets"][FAKE]["status"] == "ran"
    assert (out / "results.md").exists() and (out / "results.junit.xml").exists()
    streamed = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["clause"] for r in streamed) == ["T-01", "T-02"]  # as they came: the lanes race
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_exit_1_on_fail(tmp_path):
    p = dlc("run", "--target", FAKE, "--suites", suite(tmp_path, FAILING), "--out", str(tmp_path / "out"))
    assert p.returncode == 1


def test_a_named_target_that_cannot_load_is_exit_2_even_beside_others(tmp_path):
    """A CI job that names a library expects it tested: a named target that cannot be imported
    makes the run exit 2, said in one line up front; the targets that load still run and keep
    their results, and the bad one is reported as not loaded."""
    out = tmp_path / "out"
    p = dlc("run", "--target", FAKE, "--target", "no_such_lib_xyz", "--suites", suite(tmp_path, PASSING),
            "--out", str(out))
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert lines[0] == "dlconform: target 'no_such_lib_xyz': cannot import module 'no_such_lib_xyz' " \
        "(ModuleNotFoundError)"
    assert "dlconform: error: 'no_such_lib_xyz' cannot be loaded (said above); the other targets ran" in lines
    assert "Traceback" not in p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert doc["targets"]["no_such_lib_xyz"]["status"] == "not loaded"
    assert "cannot import module" in doc["targets"]["no_such_lib_xyz"]["reason"]
    assert doc["targets"][FAKE]["status"] == "ran"
    assert doc["summary"][FAKE]["pass"] == 1 and doc["summary"][FAKE]["warn"] == 1
    assert [r["verdict"] for r in doc["results"] if r["target"] == "no_such_lib_xyz"] == ["skip"]
    assert doc["run"]["exit_status"] == 2
    assert "| no_such_lib_xyz | not loaded: cannot import module" in (out / "results.md").read_text()


def test_a_clause_filter_that_matches_nothing_is_exit_2(tmp_path):
    for glob in ("NOPE-*", "T-9?"):
        p = dlc("run", "--target", FAKE, "--suites", suite(tmp_path, PASSING), "--clause", glob,
                "--out", str(tmp_path / "out"))
        assert p.returncode == 2
        assert p.stderr.strip().splitlines() == ["dlconform: error: --clause %r matches no clause of the catalogue "
                                                 "(ids look like CAP-01; suites/clauses.md lists them)" % glob]


def test_exit_2_when_no_target_can_run(tmp_path):
    out = tmp_path / "out"
    p = dlc("run", "--target", "no_such_lib_xyz", "--target", "bad/file.py:Nope", "--suites",
            suite(tmp_path, PASSING), "--out", str(out))
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert "Traceback" not in p.stderr
    assert lines[0].startswith("dlconform: target 'no_such_lib_xyz': cannot import module")
    assert lines[1].startswith("dlconform: target 'bad/file.py:Nope': no adapter file")
    assert lines[-1] == "dlconform: error: no target can be run"
    doc = json.loads((out / "results.json").read_text())
    assert {r["verdict"] for r in doc["results"]} == {"skip"}


def test_bad_flag_is_one_line_and_exit_2(tmp_path):
    p = dlc("run", "--no-such-flag")
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1
    assert "unrecognized arguments: --no-such-flag" in p.stderr
    p = dlc("run", "--timeout", "-3")
    assert p.returncode == 2 and "must be > 0" in p.stderr
    p = dlc("frobnicate")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1


def test_missing_suites_folder_is_usage_error(tmp_path):
    p = dlc("run", "--target", FAKE, "--suites", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out"))
    assert p.returncode == 2
    assert "no suites folder" in p.stderr and "Traceback" not in p.stderr


def test_clause_filter_and_file_adapter(tmp_path):
    adapter = tmp_path / "adapter.py"
    adapter.write_text("import sys\nsys.path.insert(0, %r)\nfrom fakes import FakeTarget\n\ndef make():\n"
                       "    return FakeTarget()\n" % os.path.dirname(FAKE.split(":")[0]))
    out = tmp_path / "out"
    spec = "%s:make" % adapter
    p = dlc("run", "--target", spec, "--suites", suite(tmp_path, PASSING), "--out", str(out), "--clause", "T-01")
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [(r["target"], r["clause"], r["verdict"]) for r in doc["results"]] == [(spec, "T-01", "pass")]
    assert doc["run"]["clause"] == "T-01"


TRIVIAL = '''
import pytest

@pytest.mark.clause("T-01")
def test_ok(target):
    pass
'''


def test_jobs_runs_targets_in_parallel_and_reports_in_command_line_order(tmp_path):
    out = tmp_path / "out"
    p = dlc("run", "--jobs", "2", "--target", FAKE, "--target", "ref", "--suites", suite(tmp_path, TRIVIAL),
            "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [doc["targets"][t]["status"] for t in (FAKE, "ref")] == ["ran", "ran"]
    assert [r["target"] for r in doc["results"]] == [FAKE, "ref"]
    streamed = [json.loads(l) for l in (out / "results.jsonl").read_text().splitlines()]
    assert sorted(r["target"] for r in streamed) == sorted([FAKE, "ref"])  # whole lines, any order


def test_bad_jobs_value_is_a_usage_error(tmp_path):
    for bad in ("0", "two"):
        p = dlc("run", "--jobs", bad, "--target", "ref", "--out", str(tmp_path / "out"))
        assert p.returncode == 2
        assert len(p.stderr.strip().splitlines()) == 1 and "--jobs" in p.stderr


DEPTH = '''
import os
import shlex
import pytest

@pytest.mark.clause("T-01")
def test_depth(check):
    check.record("T-01", "pass", "%s %s" % (os.environ.get("DLCONFORM_EXAMPLES"), os.environ.get("DLCONFORM_SEED")))
'''


def test_the_depth_of_a_run_reaches_its_checks_and_its_record(tmp_path):
    """--examples and --seed reach the checks' processes (strategies.py reads them there), the
    per-test limit grows with the examples (30 s per 20), and results.json says how deep the run
    was; a bad value is one line and exit 2."""
    out = tmp_path / "out"
    p = dlc("run", "--suites", suite(tmp_path, DEPTH), "--target", FAKE, "--out", str(out), "--examples", "200",
            "--seed", "42")
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [r["message"] for r in doc["results"] if r["clause"] == "T-01"] == ["200 42"]
    assert (doc["run"]["examples"], doc["run"]["seed"], doc["run"]["timeout"]) == (200, 42, 300.0)
    for flag, bad in (("--examples", "0"), ("--examples", "many"), ("--seed", "x")):
        p = dlc("run", "--target", "ref", "--out", str(tmp_path / "bad"), flag, bad)
        assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and flag in p.stderr, p.stderr


PLANTED = '''
import pytest

def helper(a, b):
    return a + b

@pytest.mark.clause("T-01")
def test_suite_indexes_an_empty_list(target, check):
    check.record("T-01", "pass")
    names = []
    assert names[0]

@pytest.mark.clause("T-02")
def test_suite_calls_its_helper_wrongly():
    helper(1)

@pytest.mark.clause("T-03")
def test_library_raises_inside_a_call():
    int("not a number")  # a call raised it: the library's, not the suite's
'''


def test_a_harness_error_is_its_own_verdict_and_exits_2(tmp_path):
    """An exception the suite's own code raises (an index, a wrong call of its own helper) is the
    verdict `error`, never the library's fail; the run names it and exits 2. An exception raised
    inside a call into other code stays the library's (fail)."""
    src = write_suite(str(tmp_path / "suite"), {"test_s.py": PLANTED}, {"T-01": "MUST", "T-02": "MUST", "T-03": "MUST"})
    out = tmp_path / "out"
    p = dlc("run", "--target", FAKE, "--suites", src, "--out", str(out))
    verdicts = {r["clause"]: r for r in json.loads((out / "results.json").read_text())["results"]}
    assert verdicts["T-01"]["verdict"] == "error" and "IndexError" in verdicts["T-01"]["message"]
    assert "test_s.py:10" in verdicts["T-01"]["message"]
    assert verdicts["T-02"]["verdict"] == "error" and "helper() missing 1 required" in verdicts["T-02"]["message"]
    assert verdicts["T-03"]["verdict"] == "fail"
    assert p.returncode == 2
    assert "harness error (the suite, not %s): test_s.py::test_suite_indexes_an_empty_list T-01" % FAKE in p.stderr


def test_a_run_without_the_built_extensions_says_what_to_run(tmp_path):
    """From a fresh clone (no `make build`), `python3 -m dlconform run` says in one line what to
    run instead of reporting crashes against the library."""
    import shutil

    from dlconform import PACKAGE_DIR

    copy = tmp_path / "harness" / "dlconform"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "harness"))
    from dlconform import SUITES_DIR

    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "numpy", "--suites", SUITES_DIR,
                        "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "run `make build`" in lines[0] and "_probe" in lines[0], p.stderr


SLOW = '''
import time, pytest

@pytest.mark.clause("T-01")
def test_quick(check):
    check.that(False, "T-01", "a finding before the interruption")

@pytest.mark.clause("T-02")
def test_slow():
    time.sleep(60)
'''


def test_an_interrupted_run_reports_what_finished(tmp_path):
    """SIGTERM (as a CI runner cancels) or Ctrl-C: the report holds what finished, says it is
    incomplete, records no crash for the child the interruption killed, and the status is 130."""
    import signal
    import time

    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "dlconform", "run", "--target", FAKE, "--suites",
                          suite(tmp_path, SLOW), "--out", str(out)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=child_env(), text=True)
    deadline = time.monotonic() + 60
    jsonl = out / "results.jsonl"
    while time.monotonic() < deadline and not (jsonl.exists() and "T-01" in jsonl.read_text()):
        time.sleep(0.1)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    doc = json.loads((out / "results.json").read_text())
    assert [(r["clause"], r["verdict"]) for r in doc["results"]] == [("T-01", "fail")]
    assert doc["run"]["exit_status"] == 130 and doc["run"]["incomplete"].startswith("interrupted")
    assert doc["targets"][FAKE]["status"] == "interrupted"
    assert "Incomplete run" in (out / "results.md").read_text()
    assert err.strip().splitlines()[-1].startswith("dlconform: interrupted; the report holds what finished")


def test_a_library_beside_the_caller_is_found_by_the_children(tmp_path):
    """A maintainer runs `python -m dlconform run --target mylib` in the folder that holds
    mylib.py, with nothing on PYTHONPATH for it: the children import it as the parent does,
    although their working folder is the suites' parent."""
    import shutil

    from dlconform import HARNESS_DIR

    libs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libs")
    project = tmp_path / "project"
    project.mkdir()
    for name in ("viewlib.py", "dlpack_structs.py"):
        shutil.copy(os.path.join(libs, name), str(project))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIEWLIB_BUG")}
    env["PYTHONPATH"] = HARNESS_DIR
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "viewlib", "--tests", "test_fields.py",
                        "--out", "out", "-q"], cwd=str(project), env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:]
    summary = json.loads((project / "out" / "results.json").read_text())["summary"]["viewlib"]
    assert summary["pass"] > 0 and not summary["crash"] and not summary["error"], summary


def _processes_mentioning(text):
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as f:
                if text.encode() in f.read():
                    found.append(pid)
        except OSError:
            pass
    return found


def test_lanes_share_the_tests_and_leave_no_warm_parent_behind(tmp_path):
    """--jobs 2: each target's tests are shared by two lanes (each test once, in one of them);
    the warm parents (one per target, prefetched) are gone when the run ends."""
    src = "".join('@pytest.mark.clause("T-01")\ndef test_%d(target):\n    pass\n\n' % i for i in range(12))
    folder = suite(tmp_path, "import pytest\n\n" + src)
    out = tmp_path / "out"
    p = dlc("run", "--jobs", "2", "--target", FAKE, "--target", "ref", "--suites", folder, "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    for spec in (FAKE, "ref"):
        tests = [r["test"] for r in doc["results"] if r["target"] == spec]
        assert sorted(tests) == sorted("test_s.py::test_%d" % i for i in range(12)), tests
    assert (out / "work" / (safe_name(FAKE) + ".lane1")).is_dir()  # the second lane ran
    assert not _processes_mentioning(folder), "warm parents left running"


def test_a_virtualenv_without_pytest_is_told_to_pip_install_it(tmp_path):
    """A plain virtualenv (no system site packages) lacks pytest: deps.sh (make conformance's
    first step) and `dlconform run --python` each say so in one line and name pip for that
    interpreter, not a Debian package it would never see; neither tries to install anything."""
    import venv

    from test_meta import REPO

    venv.create(tmp_path / "v", with_pip=False)
    python = str(tmp_path / "v" / "bin" / "python3")
    p = subprocess.run(["sh", str(REPO / "probes" / "build-tools" / "deps.sh"), "build"], capture_output=True,
                       text=True, env=dict(os.environ, PYTHON=python), timeout=60)
    assert p.returncode == 1 and "%s -m pip install pytest hypothesis" % python in p.stderr, p.stderr
    assert "installing" not in p.stdout
    out = tmp_path / "out"
    r = dlc("run", "--target", "ref", "--python", python, "--out", str(out))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert "%s -m pip install pytest" % python in lines[0], lines


def test_the_command_finds_a_module_beside_the_caller(tmp_path):
    """`dlconform run --target mylib` from the folder holding mylib.py works as `python -m
    dlconform` does, although the console script's own path lacks that folder (the children get
    it: runner.child_env); a module that is nowhere is still one clear line, exit 2."""
    bin_dir, project = tmp_path / "bin", tmp_path / "project"
    bin_dir.mkdir()
    project.mkdir()
    script = bin_dir / "dlconform"  # what pip's console script runs
    script.write_text("import sys\nfrom dlconform.cli import main\nsys.exit(main())\n")
    (project / "mylib_beside.py").write_text((REPO_LIBS / "bytecopy.py").read_text())
    (project / "dlpack_structs.py").write_text((REPO_LIBS / "dlpack_structs.py").read_text())
    env = child_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in env["PYTHONPATH"].split(os.pathsep)
                                        if os.path.abspath(p) != os.path.abspath(os.getcwd()))
    for lib, code in (("mylib_beside", 0), ("no_such_lib_here", 2)):
        p = subprocess.run([sys.executable, str(script), "run", "--target", lib, "--tests", "test_fields.py",
                            "--out", str(tmp_path / lib), "-q"], capture_output=True, text=True, env=env,
                           cwd=str(project), timeout=300)
        assert p.returncode == code, p.stdout + p.stderr
    assert "cannot import module 'no_such_lib_here' (ModuleNotFoundError)" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 2, p.stderr


def test_the_recheck_line_works_from_any_folder(tmp_path, monkeypatch):
    """The line a run with findings prints names absolute paths (it is copied into other
    folders, CI steps), and an installed dlconform (its suites inside the package) needs no
    PYTHONPATH."""
    import dlconform
    from dlconform.cli import recheck_line

    monkeypatch.chdir(tmp_path)
    line = recheck_line(os.path.join("out", "results.json"))
    assert line.startswith("PYTHONPATH=%s\"${PYTHONPATH:+:$PYTHONPATH}\" " % dlconform.HARNESS_DIR), line
    assert line.endswith(" -m dlconform recheck --results %s" % (tmp_path / "out" / "results.json")), line
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = subprocess.run(["sh", "-c", line + " --help"], cwd=str(elsewhere), env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and "--results" in p.stdout, p.stderr
    monkeypatch.setattr(dlconform, "SUITES_DIR", os.path.join(dlconform.PACKAGE_DIR, "suites"))
    assert recheck_line("r.json").startswith(shlex.quote(sys.executable) + " -m dlconform recheck"), \
        recheck_line("r.json")


def test_fuzz_repro_refuses_an_unknown_target_in_one_line(tmp_path):
    """`dlconform fuzz-repro --target nosuch FILE` wrote a script that imports nosuch (exit 0).
    A target fuzz-ci could not run (a module that cannot be found, a device without a fuzz
    mode) is one line and exit 2; a built-in consumer, a module that can be found (without
    importing it) and producer-NAME are taken; a file name whose prefix is no target gets the
    default, numpy, said in one line."""
    seed = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                        "fuzz", "corpus", "seeds", "legacy-float32-2x3")
    (tmp_path / "mylib_xyz.py").write_text("raise SystemExit('imported')\n")  # found, never imported
    for target, says in (("nosuch", "target 'nosuch': cannot import module 'nosuch' (ModuleNotFoundError)"),
                         ("producer-nosuch", "target 'producer-nosuch': cannot import module 'nosuch' "
                                             "(ModuleNotFoundError)"),
                         ("nosuch@cuda", "target 'nosuch@cuda': cannot import module 'nosuch' (ModuleNotFoundError)"),
                         ("ref@tpu", "ref@tpu: the fuzz targets' device modes are cuda (NAME@cuda)")):
        p = dlc("fuzz-repro", "--target", target, seed, cwd=str(tmp_path))
        assert (p.returncode, p.stdout, p.stderr) == (2, "", "fuzz-repro: %s\n" % says), p.stderr
    for target in ("ref", "numpy", "producer-ref", "ref@cuda", "mylib_xyz", "producer-mylib_xyz"):
        p = dlc("fuzz-repro", "--target", target, seed, cwd=str(tmp_path))
        assert p.returncode == 0 and p.stdout.startswith("# run: ") and not p.stderr, (target, p.stderr)
    p = dlc("fuzz-repro", seed, cwd=str(tmp_path))
    assert p.returncode == 0 and "numpy.from_dlpack" in p.stdout, p.stderr
    assert p.stderr == "fuzz-repro: the file name's prefix 'legacy' is no target here: a numpy reproducer " \
        "(--target names another)\n"


def test_a_clause_glob_is_taken_in_any_case(tmp_path):
    """Clause ids are upper case (CAP-01); `--clause cap-01` was refused as matching nothing.
    A glob in any case is taken, as its upper-case self."""
    out = tmp_path / "out"
    p = dlc("run", "--target", FAKE, "--suites", suite(tmp_path, PASSING), "--clause", "t-0[2-9]", "--out", str(out))
    assert p.returncode == 0, p.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [r["clause"] for r in doc["results"]] == ["T-02"] and doc["run"]["clause"] == "T-0[2-9]"
