"""The reproducer hooks of the library adapters whose libraries live in the Debian tiers
(tvm_ffi, mpi4py, pyarrow, onnxruntime, nanobind): their lines need only the library, Python
and ctypes (nanobind: the glue extension, which the report carries), so their findings get
standalone bug reports (dlconform report, issue 13 item 5), and the ctypes helpers they inline
(targets/_inline.py and each adapter's *_HELPERS) do what the adapter methods do.

None of these libraries is on the host: the hooks are called on instances made without
__init__, and the helpers run against dlconform's reference library in the library's place
(the tier runs reproduce the findings with the library itself)."""
import re
import types

import pytest

from dlconform import repro as _repro
from dlconform.bugreport import standalone
from dlconform.targets import _inline
from dlconform.targets.base import Target
from dlconform.targets.mpi4py_target import MPI_HELPERS, Mpi4pyTarget
from dlconform.targets.nanobind_target import NB_HELPERS, NanobindTarget
from dlconform.targets.onnxruntime_target import ORT_HELPERS, OnnxruntimeTarget
from dlconform.targets.pyarrow_target import PyarrowTarget
from dlconform.targets.tvm_ffi_target import TVM_HELPERS, TvmFfiTarget

try:
    from dlconform import _probe, _ref
except ImportError:  # not built: the helper checks skip
    _probe = _ref = None
needs_ref = pytest.mark.skipif(_ref is None, reason="dlconform._ref/_probe not built (make build)")

ADAPTERS = {"tvm_ffi": TvmFfiTarget, "mpi4py": Mpi4pyTarget, "pyarrow": PyarrowTarget, "onnxruntime": OnnxruntimeTarget,
            "nanobind": NanobindTarget}
#: the one dlconform line an adapter's reproducers may have: nanobind's glue, which the
#: standalone script imports as the top-level module the report builds (bugreport/standalone.py)
GLUE_IMPORT = {"nanobind": "from dlconform import _nanobind"}
VALUES = bytes(range(24))
VIEWS = (("transpose", (1, 0)), ("slice", 1, 0, None, 2), ("slice", 0, 1, 2, 1), ("flip", 0))


def _bare(cls):
    """An adapter made without __init__ (its library is not imported)."""
    t = object.__new__(cls)
    t.name, t._codes = t.library, {}
    return t


def _hook_lines(t):
    """Every repro_* hook of Target, called on t. repro_view gets stand-ins for the library's
    tensors: tvm_ffi's reads the layout of their exports (ref tensors), pyarrow's the length of
    the array (a list)."""
    out = list(t.repro_setup())
    out += t.repro_make("float32", (2, 3), VALUES) + t.repro_make("int16", (0, 2), b"")
    x = v = None
    if isinstance(t, (TvmFfiTarget, NanobindTarget)) and _ref is not None:
        x = _ref.Tensor("int32", (2, 3), data=VALUES)
        v = x.view((3, 2), (1, 3))
    elif isinstance(t, PyarrowTarget):
        x, v = [0, 0, 0], [0]
    for op in VIEWS:
        out.append(t.repro_view(op, x, v, "x", "v0"))
    out += [t.repro_readonly("x", "ro"), "y = " + t.repro_from_dlpack("p"), "d = " + t.repro_describe("y")]
    out += t.repro_unexportable("u") + t.repro_sparse("s") + t.repro_byteswapped("x", "z")
    hooks = {n for n in vars(Target) if n.startswith("repro_")}
    assert hooks == {"repro_setup", "repro_make", "repro_view", "repro_readonly", "repro_from_dlpack", "repro_describe",
                     "repro_unexportable", "repro_sparse", "repro_byteswapped"}, hooks  # all called above
    return out


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_hooks_of_library_adapters_need_no_dlconform(name):
    """Every hook is the adapter's own (none is Target's `T = load(...)` default), no line names
    dlconform (but nanobind's glue import), the lines compile, and a snippet built of them the
    way the suites build theirs has a standalone form."""
    cls = ADAPTERS[name]
    if name == "nanobind" and _ref is None:
        pytest.skip("nanobind's repro_make reads dtype codes from _ref")
    own = [n for n in vars(Target) if n.startswith("repro_") and getattr(cls, n) is getattr(Target, n)]
    assert not own, (name, own)
    lines = _hook_lines(_bare(cls))
    named = [line for line in lines if re.search(r"\bdlconform\b|\bT\.|load\(", line) and line != GLUE_IMPORT.get(name)]
    assert not named, (name, named)
    compile("\n".join(lines), name, "exec")
    snippet = _repro.snippet([], [_repro.run_header(), *lines[:len(_bare(cls).repro_setup())], "import gc",
                                  "from dlconform import _probe, _ref", "from dlconform.snippet import expect",
                                  *lines[len(_bare(cls).repro_setup()):]])
    script, why = standalone.script(snippet, name)
    assert why is None and script is not None, (name, why)


# ---------------------------------------------------------------------------- the helpers
def _helpers(*texts, **names):
    ns = dict(names)
    exec("\n".join([_inline.READER, *texts]), ns)
    return ns


READS = [dict(shape=(2, 3)), dict(shape=(3, 2), strides=(1, 3), dtype=(1, 16, 1)),
         dict(shape=(4,), byte_offset=8, versioned=False), dict(shape=(2, 2), strides=(-2, 1), byte_offset=8),
         dict(shape=(), dtype=(0, 64, 1)), dict(shape=(0, 3), data="null"), dict(shape=(3,), flags=1),
         dict(shape=(3,), version=(2, 0)), dict(shape=(3,), ndim=-1), dict(shape=(3,), ndim=2000),
         dict(shape=(3,), shape_null=True), dict(shape=(2,), capsule_name="tensor")]


@needs_ref
@pytest.mark.parametrize("kw", READS)
def test_capsule_reader_reads_what_the_probe_reads(kw):
    """_dlp_fields agrees with _probe.inspect on the keys the adapters read, for valid and
    malformed capsules alike (another major: no layout, None where the probe leaves the key
    out, VER-10; an ndim out of range: no shape read, LAY-09); a capsule of another name has
    no fields."""
    ns = _helpers()
    forge = _ref.Forge(**kw)
    mine, theirs = ns["_dlp_fields"](forge.capsule()), _probe.inspect(forge.capsule())
    if theirs["kind"] not in ("legacy", "versioned"):
        assert mine == {}
        return
    keys = ("dtype", "ndim", "shape", "strides") + (("data", "byte_offset") if theirs.get("readable") else ())
    assert {k: mine.get(k) for k in keys} == {k: theirs.get(k) for k in keys}
    assert mine["flags"] == theirs["flags"]


def _fake_tvm():
    """tvm_ffi's from_dlpack as the helpers call it (on a versioned capsule), played by ref's."""
    return types.SimpleNamespace(from_dlpack=_ref.from_dlpack)


@needs_ref
@pytest.mark.parametrize("dtype, shape", [("float32", (2, 3)), ("bool", (4,)), ("int16", (0, 2)), ("uint8", ())])
def test_tvm_make_exports_what_the_adapter_imports(dtype, shape):
    """_tvm_make hands the consumer what make() hands it: _ref's export of the values (the same
    dtype, shape, strides never NULL, NULL data when zero-size, 256-byte aligned, version 1.3,
    flags 0), and the consumer's tensor holds the values."""
    from dlconform.targets.dtypes import DTYPES, itemsize, numel

    values = bytes(range(numel(shape) * itemsize(dtype)))
    if dtype == "bool":
        values = bytes(v & 1 for v in values)
    seen = []

    def import_noting(cap):
        seen.append(_probe.inspect(cap))
        return _ref.from_dlpack(cap)

    t, ns = _bare(TvmFfiTarget), _helpers(TVM_HELPERS, tvm_ffi=types.SimpleNamespace(from_dlpack=import_noting))
    exec("\n".join(t.repro_make(dtype, shape, values, "x")), ns)
    mine, theirs = seen[0], _probe.inspect(t._source(dtype, shape, values).__dlpack__(max_version=(1, 3)))
    keys = ("kind", "version", "flags", "device", "ndim", "dtype", "shape", "strides", "byte_offset")
    assert {k: mine[k] for k in keys} == {k: theirs[k] for k in keys}
    assert mine["dtype"] == DTYPES[dtype] and (mine["data"] is None) == (theirs["data"] is None)
    assert mine["data"] is None or mine["data"] % 256 == 0
    assert ns["x"].tobytes() == values


@needs_ref
@pytest.mark.parametrize("op", VIEWS[:3])
def test_tvm_view_lines_make_the_adapters_view(op):
    """A repro_view line of tvm_ffi gives the view the adapter's method made: the same layout
    over the same memory and the same elements, however the source tensor was offset; and
    _tvm_describe is describe()."""
    t = _bare(TvmFfiTarget)
    t.module = _fake_tvm()
    ns = _helpers(TVM_HELPERS, tvm_ffi=t.module)
    exec("\n".join(t.repro_make("int32", (2, 3), VALUES, "x")), ns)
    x = ns["x"]
    v = getattr(t, op[0])(x, *op[1:])
    exec(t.repro_view(op, x, v, "x", "v0"), ns)
    assert ns["_tvm_describe"](ns["v0"]) == t.describe(v)
    assert ns["v0"].tobytes() == v.tobytes()
    del ns["x"], x
    assert ns["v0"].tobytes() == v.tobytes()  # the view keeps its memory


@needs_ref
def test_tvm_tensors_give_their_memory_back():
    """The deleter of a _tvm_from tensor releases what it held, once the consumer lets go."""
    ns = _helpers(TVM_HELPERS, tvm_ffi=_fake_tvm())
    exec("x = _tvm_make((2, 32, 1), (2, 3), bytes(24))", ns)
    assert len(ns["_tvm_live"]) == 1
    del ns["x"]
    assert ns["_tvm_live"] == {}


@needs_ref
@pytest.mark.parametrize("kw", [dict(shape=(2, 3)), dict(shape=(3, 2), strides=(1, 3)), dict(shape=()),
                                dict(shape=(0, 4)), dict(shape=(4,), byte_offset=8, dtype=(0, 16, 1))])
def test_ort_describe_is_the_adapters(kw):
    """_ort_describe reads an export as OnnxruntimeTarget.describe does (a legacy capsule from
    __dlpack__(); NULL strides are row-major)."""
    forge = _ref.Forge(versioned=False, **kw)
    y = types.SimpleNamespace(__dlpack__=forge.capsule)
    ns = _helpers(ORT_HELPERS)
    assert ns["_ort_describe"](y) == _bare(OnnxruntimeTarget).describe(y)


class _FakeMpiBuffer:
    """What MPI.buffer gives: the tensor's memory as flat untyped bytes."""

    def __init__(self, obj):
        self.tensor = _ref.from_dlpack(obj)
        self.address, self.nbytes = self.tensor.data_ptr + self.tensor.byte_offset, self.tensor.nbytes
        self.readonly, self.format, self.itemsize = False, "B", 1


@needs_ref
@pytest.mark.parametrize("kw", [dict(shape=(2, 3)), dict(shape=(3, 2), strides=(1, 3)), dict(shape=()),
                                dict(shape=(4,), dtype=(0, 16, 1)), dict(shape=(0, 4))])
def test_mpi_import_and_describe_are_the_adapters(kw):
    """_mpi_buffer and _mpi_describe note and read what the capsule announced as the adapter's
    from_dlpack and describe do: the same dict for the same import."""
    from dlconform.producers import RecordingProducer

    mpi = types.SimpleNamespace(buffer=_FakeMpiBuffer)
    t = _bare(Mpi4pyTarget)
    t.MPI, t._announced = mpi, {}
    ns = _helpers(MPI_HELPERS, MPI=mpi)
    y = t.from_dlpack(RecordingProducer(_ref.Forge(**kw)))
    z = eval(_bare(Mpi4pyTarget).repro_from_dlpack("p"), ns, {"p": RecordingProducer(_ref.Forge(**kw))})
    want, got = t.describe(y), ns["_mpi_describe"](z)
    assert {k: v for k, v in got.items() if k != "ptr"} == {k: v for k, v in want.items() if k != "ptr"}
    assert got["ptr"] == z.address
    with pytest.raises(TypeError, match="takes no keywords"):
        ns["_mpi_buffer"](RecordingProducer(_ref.Forge(**kw)), copy=True)


class _FakeGlue:
    """The glue's view and view_ro as the helpers call them: each call noted, the view made as a
    ref view of the owner (a ref tensor) at the address given."""

    def __init__(self):
        self.calls = []

    def _view(self, kind, owner, address, shape, strides, code, bits, lanes):
        self.calls.append((kind, address - owner.data_ptr, list(shape), list(strides), code, bits, lanes))
        return owner.view(tuple(shape), tuple(strides), address - owner.data_ptr)

    def view(self, *args):
        return self._view("view", *args)

    def view_ro(self, *args):
        return self._view("view_ro", *args)


@needs_ref
@pytest.mark.parametrize("op", VIEWS)
def test_nanobind_view_and_readonly_lines_call_the_glue_as_the_adapter(op):
    """A nanobind repro_view line, and _nb_readonly, call the glue with what the adapter's
    methods pass it: the owner, the address relative to the owner's first element, the shape,
    strides and dtype."""
    t, glue = _bare(NanobindTarget), _FakeGlue()
    t.nb = glue
    ns = _helpers(NB_HELPERS, _nanobind=glue)
    x = ns["x"] = _ref.Tensor("int32", (8,), data=bytes(range(32))).view((2, 3), (3, 1), 4)
    v = getattr(t, op[0])(x, *op[1:])
    exec(t.repro_view(op, x, v, "x", "v0"), ns)
    assert glue.calls[1] == glue.calls[0] and ns["v0"].tobytes() == v.tobytes()
    ro = t.readonly(x)
    exec(t.repro_readonly("x", "ro"), ns)
    assert glue.calls[3] == glue.calls[2] and glue.calls[3][0] == "view_ro" and ns["ro"].tobytes() == ro.tobytes()


@needs_ref
def test_nanobind_report_carries_the_glue_and_how_to_build_it():
    """A nanobind finding's report carries module.cpp and its build lines, and its script imports
    the extension they build as the top-level module `_nanobind`, never dlconform's."""
    from dlconform.bugreport import markdown

    t = _bare(NanobindTarget)
    lines = [_repro.run_header(), *t.repro_setup(), "import gc", "from dlconform import _probe, _ref",
             "from dlconform.snippet import expect", *t.repro_make("int32", (2, 3), VALUES),
             "y = " + t.repro_from_dlpack("x"), "d = " + t.repro_describe("y"),
             "expect(d['shape'] == (2, 3), 'LAY-11', 'shape')"]
    record = {"target": "nanobind", "clause": "LAY-11", "test": "suites/test_layout.py::test_x", "verdict": "fail",
              "message": "shape", "repro": _repro.snippet([], lines)}
    text = markdown.render(markdown.Finding([record]), {"results": [record]})
    script = markdown.standalone_script(text)
    source, build = markdown.glue_files(text)
    assert script is not None and "\nimport _nanobind  #" in script
    assert not re.search(r"^\s*(from|import) dlconform\b", script, re.M)
    assert source == open(standalone.GLUE_SOURCE, encoding="utf-8").read()
    assert "module.cpp" in build and "_nanobind$EXT" in build


def test_torch_make_lines_make_what_the_adapter_makes():
    """torch's repro_make lines, run, give the tensor make() gives: dtype, shape, strides and
    bytes, for every dtype torch has (quantized ones included)."""
    torch = pytest.importorskip("torch")
    from dlconform.targets.loader import load

    target = load("torch")
    for dtype, (_, n) in target.discover_dtypes().items():
        values = bytes((7 * i + 1) & 0x7F for i in range(6 * n))
        try:
            want = target.make(dtype, (2, 3), values)
        except Exception:  # noqa: BLE001 - a dtype torch cannot make tensors of at all
            continue
        ns = {}
        exec("\n".join(target.repro_setup() + target.repro_make(dtype, (2, 3), values, var="got")), ns)
        got = ns["got"]
        assert (got.dtype, tuple(got.shape), got.stride()) == (want.dtype, tuple(want.shape), want.stride()), dtype
        if not dtype.startswith(("qint", "quint")):
            assert bytes(got.reshape(-1).view(torch.uint8).tolist()) == values, dtype
