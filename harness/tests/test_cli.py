"""`python3 -m dlconform run`: exit codes, skipped targets, output files."""
import json
import os
import subprocess
import sys

from dlconform.runner import child_env
from dlconform.testing import write_suite

FAKE = "dlconform.testing:FakeTarget"
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
    assert [r["clause"] for r in streamed] == ["T-01", "T-02"]
    assert not [n for n in os.listdir(out) if n.endswith(".tmp")]


def test_exit_1_on_fail_and_unknown_target_is_a_skip(tmp_path):
    out = tmp_path / "out"
    p = dlc("run", "--target", FAKE, "--target", "no_such_lib_xyz", "--suites", suite(tmp_path, FAILING),
            "--out", str(out))
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "dlconform: target 'no_such_lib_xyz': cannot import module 'no_such_lib_xyz' (ModuleNotFoundError)"]
    doc = json.loads((out / "results.json").read_text())
    assert doc["targets"]["no_such_lib_xyz"]["status"] == "skipped"
    skips = [r for r in doc["results"] if r["target"] == "no_such_lib_xyz"]
    assert [r["verdict"] for r in skips] == ["skip"]


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
    adapter.write_text("from dlconform.testing import FakeTarget\n\ndef make():\n    return FakeTarget()\n")
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
