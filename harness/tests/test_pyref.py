"""Tests of dlconform.pyref, the pure-Python (ctypes) reference library.

- pyref passes every suite check; what it cannot be checked on is `unsupported` or `skip`
  for a reason that is right for it (no C exchange API, no sub-byte dtypes, no device with
  streams);
- each built-in pyref fault is caught on the clause it breaks;
- the library itself: round trips with numpy, torch and _ref, deleter accounting, refusals,
  faults, and that it stands alone (no dlconform, no numpy).
"""
import gc
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlconform import _probe, _ref, pyref
from dlconform.runner import child_env
from test_meta import run_dlconform

PYREF_DIR = Path(pyref.__file__).parent

#: (verdict, clause, message) patterns of the records that are right for pyref without a pass
RIGHT_WITHOUT_PASS = (
    ("unsupported", r"XAPI-\d+|OWN-0[45]|VER-07",
     r"no C exchange API|no __dlpack_c_exchange_api__|does not use the C exchange API|offers no exchange API"),
    ("unsupported", r"DT-0[789]|FLG-06", r"(has|exports) no sub-byte dtype"),
    ("skip", r"STR-\d+|CPY-0[45]", r"needs a GPU or another device with streams"),
    # the device files (test_cuda_*.py): plain pyref's arrays are on the CPU (pyref@cuda is judged
    # there)
    ("unsupported", r"STR-\d+|CPY-0[1-8]|FLG-0[34]|XAPI-1[4-79]|CAP-03|OWN-03|VER-0[89]|LAY-0[348]|LAY-1[01]|"
     r"LAY-09|DT-0[3-8]|DT-13|API-05|DEV-0[67]|VER-0[156]|CAP-04|ERR-02|OWN-06|FLG-05",
     r"the target has no CUDA device"),
    ("unsupported", r"[A-Z]+-\d+", r"route the C exchange API not offered"),
    # pyref's from_dlpack does not use an offered exchange table: that route is not taken
    ("unsupported", r"CAP-03|SEM-01", r"route not taken: the consumer imported through __dlpack__"),
    # test_library_round_trip is the generic target's: pyref's adapter reads its results itself
    ("unsupported", r"LAY-0[348]|LAY-11|FLG-02", r"reads its consumer's results without the library's own export"),
)


def _right_without_pass(record):
    return any(record["verdict"] == verdict and re.fullmatch(clause, record["clause"])
               and re.search(message, record["message"]) for verdict, clause, message in RIGHT_WITHOUT_PASS)


# ---- the suite against pyref ------------------------------------------------------------
def test_pyref_passes_every_check(tmp_path):
    proc, data = run_dlconform(tmp_path, "--target", "pyref")
    assert data is not None, proc.stderr
    results = [r for r in data["results"] if r["target"] == "pyref"]
    assert len(results) > 200, f"only {len(results)} results for pyref"
    assert not [r for r in results if "device" in r]  # the host's CPU: no record names a device
    # interop records with another library as producer (`peer`) judge that pair, not pyref alone
    own = [r for r in results if r.get("peer") in (None, "pyref")]
    wrong = [(r["clause"], r["verdict"], r["test"], r["message"][:300]) for r in own
             if r["verdict"] != "pass" and not _right_without_pass(r)]
    assert not wrong, "pyref must pass everything:\n" + "\n".join(map(str, wrong))
    assert proc.returncode == 0, proc.stderr
    unsupported = sorted({(r["clause"], r["verdict"]) for r in own if r["verdict"] != "pass"})
    print("\nright without a pass:", ", ".join("%s %s" % c for c in unsupported))


#: the simulated CUDA runtime, on which pyref's CUDA faults run (pyref@cuda)
SIM = Path(__file__).resolve().parents[2] / "build" / "cuda" / "sim" / "libcudart.so"


def test_every_pyref_fault_is_caught_on_its_clause(fault_findings):
    """Each fault on its clause, on plain pyref; a CUDA fault (pyref.CUDA_FAULTS) on pyref@cuda
    over the simulated runtime (test_cuda_checks.py runs them on test_cuda_stream.py alone).
    The runs are fault_findings' (conftest.py), which test_repro_faults.py and
    test_bugreport.py share."""
    assert len(pyref.FAULTS) >= 10
    unchecked = sorted(name for name in pyref.CUDA_FAULTS if not SIM.exists())
    caught = {name: set() for name in pyref.FAULTS if name not in unchecked}
    for r in fault_findings:
        if r["library"] == "pyref" and r["clause"] == pyref.FAULTS[r["fault"]].clause:
            caught[r["fault"]].add("%s:%s" % (r["verdict"], r["test"].split("::")[-1]))
    print("\nfault -> clause -> caught by")
    for name, f in sorted(pyref.FAULTS.items()):
        print("  %-24s %-8s %s" % (name, f.clause, ", ".join(sorted(caught.get(name, ()))) or
                                   ("not run: no simulated CUDA runtime (make build)" if name in unchecked
                                    else "NOT CAUGHT")))
    missed = sorted(name for name, tests in caught.items() if not tests)
    assert not missed, "pyref faults no check catches on their clause: %s" % missed


# ---- the library --------------------------------------------------------------------------
@pytest.fixture
def fault():
    def set_it(name):
        pyref.set_fault(name)

    yield set_it
    pyref.set_fault(None)


def _settled():
    gc.collect()
    return pyref.live_exports()


def _values(n, itemsize=4):
    return bytes((i * 7 + 3) & 0x3F for i in range(n * itemsize))


def test_arrays_views_and_bytes():
    x = pyref.frombuffer(_values(6), "int32", (2, 3))
    assert (x.shape, x.strides, x.itemsize, x.dl_dtype) == ((2, 3), (3, 1), 4, (0, 32, 1))
    assert x.address % 256 == 0  # LAY-01
    rows = [x.tobytes()[i * 12:(i + 1) * 12] for i in range(2)]
    assert x[1].tobytes() == rows[1]
    assert x.T.shape == (3, 2) and x.T.strides == (1, 3)
    assert x.flip(0).tobytes() == rows[1] + rows[0] and x.flip(0).strides == (-3, 1)
    assert x[:, ::2].tobytes() == b"".join(r[0:4] + r[8:12] for r in rows)
    assert x[:, 3:].size == 0 and x[:, 3:].address == 0
    assert x.as_readonly().readonly and not x.readonly
    assert pyref.zeros((0, 4)).tobytes() == b""
    with pytest.raises(ValueError):
        pyref.frombuffer(b"abc", "int32")
    with pytest.raises(ValueError):
        pyref.zeros((2,), "float4_e2m1fn")


def test_capsules_names_versions_and_flags():
    x = pyref.frombuffer(_values(6), "float32", (2, 3))
    legacy = _probe.inspect(x.__dlpack__())
    assert legacy["name"] == "dltensor" and legacy["strides"] == (3, 1)
    for max_version in ((1, 0), (1, 3), (2, 0)):
        info = _probe.inspect(x.__dlpack__(max_version=max_version))
        assert (info["name"], tuple(info["version"]), info["flags"]) == ("dltensor_versioned", (1, 3), 0)
    assert _probe.inspect(x.__dlpack__(max_version=(0, 8)))["name"] == "dltensor"  # VER-04
    ro = x.as_readonly()
    with pytest.raises(BufferError):
        ro.__dlpack__()  # a legacy capsule cannot say READ_ONLY
    assert _probe.inspect(ro.__dlpack__(max_version=(1, 3)))["flags"] == 1
    copied = _probe.inspect(ro.__dlpack__(max_version=(1, 3), copy=True))
    assert copied["flags"] == 2 and copied["data"] != x.address
    empty = _probe.inspect(pyref.zeros((3, 0)).__dlpack__(max_version=(1, 3)))
    assert empty["data"] == 0 and empty["strides"] == (1, 1)  # LAY-04, LAY-06
    assert _settled() == 0


@pytest.mark.parametrize("kwargs, error", [
    ({"stream": 1}, BufferError), ({"stream": -1}, BufferError), ({"stream": "1"}, TypeError),
    ({"dl_device": (2, 0)}, BufferError), ({"dl_device": "cpu"}, TypeError),
    ({"max_version": "1.0"}, TypeError), ({"copy": 1}, TypeError)])
def test_export_refusals(kwargs, error):
    x = pyref.zeros((2,))
    with pytest.raises(error):
        x.__dlpack__(**kwargs)
    with pytest.raises(TypeError):
        x.__dlpack__(None)  # API-01: keyword-only
    assert _settled() == 0


def test_capsule_destructor_and_deleter():
    x = pyref.frombuffer(_values(4), "float32", (4,))
    cap = x.__dlpack__(max_version=(1, 3))
    assert _settled() == 1
    del cap
    assert _settled() == 0  # CAP-05: an unconsumed capsule gives its tensor back
    handle = _probe.consume(x.__dlpack__())
    assert _settled() == 1  # CAP-06: the used capsule died, the consumer still holds it
    refs = sys.getrefcount(x)
    handle.release()
    assert _settled() == 0 and sys.getrefcount(x) == refs - 1  # OWN-02


def test_capsule_dropped_while_an_exception_is_raised():
    """The capsule dies with the exception pending: the tensor is given back and the exception,
    which a ctypes callback cannot restore, is reported as unraisable (the raiser gets a
    SystemError)."""
    x = pyref.zeros((3,))

    def unwinds():
        return (lambda *args: None)(x.__dlpack__(), 1 / 0)

    seen = []
    old, sys.unraisablehook = sys.unraisablehook, lambda u: seen.append(str(u.exc_value))
    try:
        with pytest.raises(SystemError):
            unwinds()
    finally:
        sys.unraisablehook = old
    assert _settled() == 0
    assert len(seen) == 1 and "division by zero" in seen[0]


def test_export_outlives_the_array():
    x = pyref.frombuffer(_values(6, 2), "int16", (2, 3), readonly=True)
    expected = x.T.tobytes()
    handle = _probe.consume(x.T.__dlpack__(max_version=(1, 3)))
    del x
    gc.collect()
    [bytearray(b"\xee" * 4096) for _ in range(64)]
    assert handle.read_elements() == expected  # OWN-05
    handle.release()
    assert _settled() == 0


def test_consumer_owns_and_gives_back():
    forge = _ref.Forge(shape=(2, 3), strides=(3, 1))
    y = pyref.from_dlpack(forge.capsule())
    assert y.tobytes() == forge.expected_elements() and y.address == forge.buffer_address  # SEM-01
    assert forge.deleter_calls == 0
    view = y.T
    del y
    gc.collect()
    assert forge.deleter_calls == 0  # the view still holds the memory
    del view
    gc.collect()
    assert forge.deleter_calls == 1  # OWN-03
    copy = _ref.Forge(shape=(4,))
    z = pyref.from_dlpack(copy.capsule(), copy=True)
    assert copy.deleter_calls == 1 and z.address != copy.buffer_address  # CPY-06


@pytest.mark.parametrize("forge_kwargs", [
    {"version": (2, 0)}, {"dtype": (99, 32, 1)}, {"dtype": (17, 4, 1)}, {"shape": (2, -3)},
    {"shape": (2, 3), "shape_null": True}, {"shape": (4,), "data": "null"}, {"device": (2, 0)},
    {"shape": (1 << 62, 4)}, {"flags": 1 << 7}])
def test_consumer_refusals_give_the_tensor_back(forge_kwargs):
    forge = _ref.Forge(**{"versioned": True, "shape": (4,), "buffer_size": 64, **forge_kwargs})
    cap = forge.capsule()
    with pytest.raises(BufferError):
        pyref.from_dlpack(cap)
    assert forge.deleter_calls == 1  # given back once, at the refusal
    del cap
    gc.collect()
    assert forge.deleter_calls == 1
    assert _probe.inspect(forge.capsule())["name"] == "dltensor_versioned"


def test_read_only_import_exports_read_only():
    forge = _ref.Forge(shape=(2, 3), strides=(3, 1), flags=1)
    y = pyref.from_dlpack(forge.capsule())
    assert y.readonly  # FLG-03
    with pytest.raises(BufferError):
        y.T.__dlpack__()
    info = _probe.inspect(y.T.__dlpack__(max_version=(1, 3)))
    assert info["flags"] == 1 and info["strides"] == (1, 3) and info["data"] == forge.buffer_address
    del y, info
    assert _settled() == 0 and forge.deleter_calls == 1


def test_consumer_refuses_a_used_capsule():
    forge = _ref.Forge(shape=(2,), versioned=False)
    cap = forge.capsule()
    y = pyref.from_dlpack(cap)
    assert _probe.inspect(cap)["name"] == "used_dltensor"  # CAP-03
    with pytest.raises(BufferError):
        pyref.from_dlpack(cap)  # CAP-04, and the tensor is not given back twice
    del y
    gc.collect()
    assert forge.deleter_calls == 1


def test_numpy_round_trips():
    np = pytest.importorskip("numpy")
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    for view in (a, a.T, a[::-1, ::2], a[1:, 2:]):
        y = pyref.from_dlpack(view)
        assert y.tobytes() == view.tobytes() and y.address == view.__array_interface__["data"][0]
        back = np.from_dlpack(y)
        assert back.tobytes() == view.tobytes()
        assert back.__array_interface__["data"][0] == view.__array_interface__["data"][0]
        assert np.from_dlpack(y.flip(0)).tobytes() == np.flip(view, 0).tobytes()  # below data when flipped back
        del y, back
    assert _settled() == 0


def test_torch_round_trips():
    torch = pytest.importorskip("torch")
    t = torch.arange(12, dtype=torch.int64).reshape(3, 4)
    for view in (t, t.t(), t[:, 1::2]):
        y = pyref.from_dlpack(view)
        assert y.address == view.data_ptr() and y.strides == tuple(view.stride())
        back = torch.utils.dlpack.from_dlpack(y)
        assert back.data_ptr() == view.data_ptr() and torch.equal(back, view)
        del y, back
    assert _settled() == 0


def test_ref_round_trip():
    x = pyref.frombuffer(_values(6, 8), "complex64", (2, 3))
    r = _ref.from_dlpack(x.T)
    assert r.tobytes() == x.T.tobytes()
    back = pyref.from_dlpack(r)
    assert back.tobytes() == x.T.tobytes() and back.address == x.address
    del r, back
    assert _settled() == 0


# ---- faults and standing alone -----------------------------------------------------------
def test_fault_table(fault):
    from dlconform import catalogue

    clauses = {c.id: c for c in catalogue.load().clauses}
    for name, f in pyref.FAULTS.items():
        assert f.clause in clauses and f.side in ("producer", "consumer") and f.description, name
        assert f.side == clauses[f.clause].binds or clauses[f.clause].binds == "both", name
    with pytest.raises(ValueError):
        pyref.set_fault("no_such_fault")
    fault("byte_strides")
    assert _probe.inspect(pyref.zeros((2, 3)).__dlpack__())["strides"] == (12, 4)
    fault(None)
    assert _probe.inspect(pyref.zeros((2, 3)).__dlpack__())["strides"] == (3, 1)


def test_fault_from_environment():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "DLCONFORM_PYREF_FAULT": "consumer_no_rename"}
    out = subprocess.run([sys.executable, "-c", "from dlconform import pyref; print(pyref.current_fault())"],
                         capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "consumer_no_rename", out.stderr


_AT_EXIT = """
import atexit
from dlconform import _probe
atexit.register(lambda: print("at exit", _probe.inspect(cap)["deleter"]))  # runs after pyref's own
from dlconform import pyref
cap = pyref.zeros((2,)).__dlpack__()
print("before", _probe.inspect(cap)["deleter"] != 0)
"""


def test_exports_alive_at_exit_get_a_null_deleter():
    """OWN-04: after finalisation no Python may run, so pyref's exit handler sets the deleter of
    every struct still out to NULL (they leak) before the interpreter goes away."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", _AT_EXIT], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stdout.split(), out.stderr) == (0, ["before", "True", "at", "exit", "0"], "")


_STANDALONE = """
import gc, sys
from dlconform import pyref
x = pyref.frombuffer(bytes(range(24)), "uint8", (4, 6))
y = pyref.from_dlpack(x[::2, 1::3].__dlpack__(max_version=(1, 3)))
assert y.tobytes() == bytes([1, 4, 13, 16]), y.tobytes()
keep = pyref.from_dlpack(x.T)  # alive at exit: its struct leaks, nothing runs after teardown
assert not [m for m in sys.modules if m.split(".")[0] in ("numpy", "torch")]
assert {m.split(".")[1] for m in sys.modules if m.startswith("dlconform.")} == {"kit", "pyref"}, sys.modules
print("ok")
"""


def test_pyref_stands_alone(tmp_path):
    """A copy of pyref and the kit it takes dlpack.h's declarations from (kit.abi), nothing else
    of dlconform, imports and works with only the standard library, and exits cleanly with exports
    still alive."""
    package = os.path.dirname(PYREF_DIR)
    for part in ("pyref", "kit"):
        shutil.copytree(os.path.join(package, part), tmp_path / "dlconform" / part,
                        ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(os.path.join(package, "__init__.py"), tmp_path / "dlconform")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", _STANDALONE], capture_output=True, text=True,
                         cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path)})
    assert (out.returncode, out.stdout.strip(), out.stderr) == (0, "ok", "")


def test_pyref_leaves_the_process_s_pythonapi_prototypes_alone():
    """A library in the same process as dlconform may declare ctypes.pythonapi's prototypes its
    own way (they are one object per process): pyref, a peer in interop checks, must neither
    change them nor depend on them. Before, importing pyref reset PyCapsule_GetPointer and four
    more to take addresses, and a library that had declared them to take objects failed its own
    imports (an auditor's gpulib: ArgumentError, filed as its fails on LAY-08, CPY-06, ...)."""
    code = """if True:
        import ctypes
        api = ctypes.pythonapi
        names = ("PyCapsule_New", "PyCapsule_GetPointer", "PyCapsule_GetName", "PyCapsule_SetName",
                 "PyCapsule_IsValid", "Py_IncRef")
        for n in names:  # as a library under test might declare them
            getattr(api, n).argtypes = (ctypes.py_object,) * 3
            getattr(api, n).restype = ctypes.c_long
        before = {n: (getattr(api, n).argtypes, getattr(api, n).restype) for n in names}
        from dlconform import pyref
        x = pyref.frombuffer(bytes(range(24)), "float32", (2, 3))
        y = pyref.from_dlpack(x)
        assert y.tobytes() == x.tobytes() and pyref.from_dlpack(x.__dlpack__(max_version=(1, 3))).size == 6
        after = {n: (getattr(api, n).argtypes, getattr(api, n).restype) for n in names}
        assert after == before, (before, after)
        print("ok")
    """
    p = subprocess.run([sys.executable, "-c", code], env=child_env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stdout + p.stderr
