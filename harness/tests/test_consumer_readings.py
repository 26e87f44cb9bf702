"""Consumer checks whose verdict depends on how the result holds what was imported: VER-09
(unknown dtype codes and device types), DT-07/08 (fp6/fp4 with other bits), DT-09 (packed fp4),
VER-05 (a legacy capsule after max_version), API-06/ERR-03 (an object without the methods).

Each runs against three small Python consumers (file adapters) that keep the capsule and
describe their result differently: one reads everything as a known type on the CPU
("misread"), one carries the capsule's dtype and device unchanged ("carry", like tvm_ffi),
one keeps untyped bytes with no device ("bytes", like mpi4py's MPI.buffer). The verdicts are
the catalogue readings (suites/clauses.md), and every check still fails for the
consumer that misreads.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

ADAPTER = '''
from dlconform import _probe
from dlconform.targets.base import Target
from dlconform.targets.dtypes import row_major_strides


class Result:
    """Keeps the capsule (unrenamed: its destructor runs the deleter when the result dies)."""

    def __init__(self, cap, info, device):
        self.cap, self.info, self._device = cap, info, device

    def __dlpack_device__(self):
        return self._device


class BareResult(Result):
    __dlpack_device__ = None  # a bare address: no device


class PyConsumer(Target):
    roles = frozenset({"consumer"})
    MODE = None

    def from_dlpack(self, obj, **kw):
        if kw:
            raise TypeError("no keywords")
        if not hasattr(obj, "__dlpack__"):
            if self.MODE == "misread":
                return Result(None, None, (1, 0))
            if self.MODE == "carry":
                raise TypeError("expected a tensor or a capsule")
            raise AttributeError("__dlpack__")
        try:
            cap = obj.__dlpack__(max_version=(1, 3))
        except TypeError:
            cap = obj.__dlpack__()
        info = _probe.inspect(cap)
        if info["name"] not in ("dltensor", "dltensor_versioned"):
            raise BufferError("capsule named %r" % info["name"])
        if info["kind"] == "versioned" and info["version"][0] != 1:
            raise BufferError("version %r" % (info["version"],))
        if self.MODE == "bytes":
            if info["kind"] != "versioned":
                raise BufferError("a legacy capsule although max_version was passed")
            return BareResult(cap, info, None)
        return Result(cap, info, (1, 0) if self.MODE == "misread" else tuple(info["device"]))

    def describe(self, y):
        i = y.info
        code, bits, lanes = i["dtype"]
        shape = tuple(i["shape"] or ())
        dtype = {"misread": (1, 8, 1) if bits < 8 else (2, bits, lanes), "carry": tuple(i["dtype"]),
                 "bytes": "bytes"}[self.MODE]
        return {"ptr": (i["data"] or 0) + i["byte_offset"], "shape": shape,
                "strides": tuple(i["strides"]) if i["strides"] else row_major_strides(shape),
                "itemsize": max(1, (bits * lanes + 7) // 8), "readonly": False, "dtype": dtype}


class Misread(PyConsumer):
    name = "misread"
    MODE = "misread"


class Carry(PyConsumer):
    name = "carry"
    MODE = "carry"


class Bytes(PyConsumer):
    name = "bytes"
    MODE = "bytes"
'''

CLAUSES = "VER-09,DT-07,DT-08,DT-09,VER-05,API-06,ERR-03"

EXPECTED = {
    "Misread": {"VER-09": "fail", "DT-07": "fail", "DT-08": "fail", "DT-09": "fail", "API-06": "fail",
                "ERR-03": "fail"},
    "Carry": {"VER-09": "warn", "DT-07": "fail", "DT-08": "fail", "DT-09": "pass", "VER-05": "pass",
              "API-06": "warn", "ERR-03": "warn"},
    "Bytes": {"VER-09": "warn", "DT-07": "fail", "DT-08": "fail", "DT-09": "pass", "VER-05": "warn",
              "API-06": "pass", "ERR-03": "pass"},
}

ORDER = ["pass", "unsupported", "skip", "warn", "timeout", "crash", "fail"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readings")
    adapter = tmp / "pyconsumer.py"
    adapter.write_text(ADAPTER)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), env.get("PYTHONPATH")]))
    out = tmp / "out"
    args = [sys.executable, "-m", "dlconform", "run", "--out", str(out), "--clause", CLAUSES]
    for cls in EXPECTED:
        args += ["--target", "%s:%s" % (adapter, cls)]
    proc = subprocess.run(args, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    data = json.loads((out / "results.json").read_text())
    worst = {}
    for r in data["results"]:
        # the producer-side checks of these clauses, and the device checks (no CUDA device here):
        # unsupported
        if r["role"] != "consumer" or r["test"].startswith("test_cuda_"):
            continue
        cls = r["target"].rsplit(":", 1)[-1]
        cur = worst.setdefault(cls, {}).get(r["clause"], "pass")
        if ORDER.index(r["verdict"]) >= ORDER.index(cur):
            worst[cls][r["clause"]] = r["verdict"]
    return worst, data, proc


@pytest.mark.parametrize("cls", sorted(EXPECTED))
def test_verdicts_follow_the_readings(runs, cls):
    worst, data, proc = runs
    assert cls in worst, proc.stderr[-2000:]
    got = {c: worst[cls].get(c) for c in EXPECTED[cls]}
    detail = [(r["clause"], r["verdict"], r["test"], r["message"][:300]) for r in data["results"]
              if r["target"].endswith(":" + cls) and r["role"] == "consumer" and r["verdict"] != "pass"]
    assert got == EXPECTED[cls], "\n".join(map(str, detail))
