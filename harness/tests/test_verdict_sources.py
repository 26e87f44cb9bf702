"""Whose verdict (issue 20): the library's findings are the library's, and only they.

- a known file keeps matching when the library's version moves (a line without a version
  covers every version), and nothing is reported fixed that was not seen passing;
- an interpreter that cannot run the suite (no pytest) is the environment's problem: one line,
  exit 2, no verdict for any library;
- an exception in a target's oracle (its `expected`) is dlconform's `error` (exit 2), never
  the library's fail.
"""
import json
import os
import stat
import subprocess
import sys

import pytest

from dlconform.runner import child_env
from fakes import have_ref

pytestmark = pytest.mark.skipif(not have_ref(), reason="dlconform._ref/_probe not built (make build)")

#: a producer with one planted finding (CAP-01) whose version comes from the environment
BUMPED = '''
import os
from dlconform.targets.ref import RefTarget


class Bumped(RefTarget):
    def __init__(self):
        super().__init__(name="bumped", fault="legacy_capsule_name", role="producer")

    def versions(self):
        return {"bumped": os.environ["BUMPED_VERSION"]}
'''

#: ref whose value oracle breaks: the adapter's error, not the library's
BROKEN_ORACLE = '''
from dlconform.targets.ref import RefTarget


class BrokenOracle(RefTarget):
    def __init__(self):
        super().__init__(name="broken-oracle", role="producer")

    def expected(self, x):
        return {}[("planted: the oracle's own bug", x.dtype)]  # a lookup that always fails
'''


def _run(tmp_path, name, *args, python=None, env=None):
    out = tmp_path / name
    cmd = [sys.executable, "-m", "dlconform", "run", "-q", "--out", str(out), *args]
    if python:
        cmd += ["--python", python]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**child_env(), **(env or {})}, timeout=300)
    doc = json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None
    return p, doc


def test_a_version_bump_keeps_the_known_file(tmp_path):
    adapter = tmp_path / "bumped.py"
    adapter.write_text(BUMPED)
    spec, known = "%s:Bumped" % adapter, tmp_path / "known.txt"
    args = ("--target", spec, "--clause", "CAP-01", "--tests", "test_capsule.py")
    p, doc = _run(tmp_path, "v040", *args, "--write-known", str(known), env={"BUMPED_VERSION": "0.4.0"})
    assert p.returncode == 1, p.stderr[-2000:]
    lines = [line for line in known.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert lines and all("@" not in line.split()[0] for line in lines), lines  # no version written
    p, doc = _run(tmp_path, "v041", *args, "--known", str(known), env={"BUMPED_VERSION": "0.4.1"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert "fixed" not in p.stderr and not doc["run"]["known"]["fixed"]
    fails = [r for r in doc["results"] if r["verdict"] == "fail"]
    assert fails and all(r.get("known") for r in fails)


def test_an_interpreter_without_pytest_is_one_line_and_exit_2(tmp_path):
    python = tmp_path / "python-without-site"
    python.write_text("#!/bin/sh\nexec %s -S \"$@\"\n" % sys.executable)  # -S: no dist-packages, no pytest
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    p, doc = _run(tmp_path, "nopytest", "--target", "ref", "--tests", "test_capsule.py", python=str(python))
    assert p.returncode == 2, (p.stdout + p.stderr)[-2000:]
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pytest" in lines[0], lines
    assert doc is None or not [r for r in doc["results"] if r["verdict"] in ("fail", "crash")]


def test_an_oracle_that_raises_is_an_error_not_a_fail(tmp_path):
    adapter = tmp_path / "broken_oracle.py"
    adapter.write_text(BROKEN_ORACLE)
    p, doc = _run(tmp_path, "oracle", "--target", "%s:BrokenOracle" % adapter, "--tests", "test_capsule.py",
                  "--clause", "CAP-01")
    assert p.returncode == 2, (p.stdout + p.stderr)[-2000:]
    verdicts = {r["verdict"] for r in doc["results"] if r["clause"] == "CAP-01"}
    assert verdicts == {"error"}, [(r["verdict"], r["message"][:200]) for r in doc["results"]]
    assert os.path.basename(str(adapter)) in json.dumps([r["message"] for r in doc["results"]])


#: a consumer whose results no reader of dlconform's can observe (a dtype the buffer protocol has
#: no format for, and no export of their own)
UNREADABLE = '''
class Result:
    @property
    def __array_interface__(self):
        raise BufferError("Buffers of type BF16 are not supported by the Python buffer protocol")


def from_dlpack(x, *, device=None, copy=None):
    x.__dlpack__()  # taken, never consumed: the capsule's destructor gives it back
    return Result()
'''


def test_a_result_no_reader_can_observe_is_unsupported(tmp_path, monkeypatch):
    from dlconform.kit import HostTensor, Unsupported
    from dlconform.targets.generic import GenericTarget

    (tmp_path / "unreadable_lib.py").write_text(UNREADABLE)
    monkeypatch.syspath_prepend(str(tmp_path))
    target = GenericTarget("unreadable_lib")
    with pytest.raises(Unsupported, match="nothing dlconform can read"):  # the producer's tensors
        target.make("float32", (2, 3), bytes(24))
    y = target.from_dlpack(HostTensor("float32", (2, 3), bytes(24)))
    with pytest.raises(Unsupported, match="cannot read"):  # the consumer's results
        target.describe(y)
