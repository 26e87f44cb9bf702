"""The reproducer hooks of the generic target (targets/generic.py: any module with
`from_dlpack`, e.g. a pure-Python ctypes library): their lines need only the module, Python
and ctypes (dlconform/producers.py, which the standalone script inlines), so its findings get
standalone bug reports (dlconform report, issue 13 item 5). The tensors the lines make hand
the consumer the capsules the adapter's own ref tensors hand it: same dtype, shape, strides,
byte_offset, data relative to the base tensor's, flags, and the legacy refusal of read-only
data (FLG-02)."""
import re
import sys
import types

import pytest

from dlconform import repro as _repro
from dlconform.bugreport import standalone
from dlconform.targets.base import Target
from dlconform.targets.generic import GenericTarget

try:
    from dlconform import _probe, _ref
except ImportError:  # not built: these checks skip
    _probe = _ref = None
pytestmark = pytest.mark.skipif(_ref is None, reason="dlconform._ref/_probe not built (make build)")

#: the one dlconform line the generic hooks write: producers.py imports nothing from dlconform,
#: and a standalone script inlines it (bugreport/standalone.py INLINED)
PRODUCERS_IMPORT = "from dlconform.producers import RecordingProducer, forges"
VALUES = bytes(range(24))
#: (op, arguments of the adapter method): views of views too, as the LAY checks take them
VIEWS = [(("transpose", (1, 0)),), (("slice", 1, 0, None, 2),), (("slice", 0, 1, 2, 1),), (("flip", 0),),
         (("transpose", (1, 0)), ("slice", 0, 1, 3, 1)), (("flip", 1), ("slice", 1, 0, 3, 2))]


class _Seen:
    """What a consumer was handed: the fields of the capsule it asked for (max_version as given),
    the capsule kept so the producer's memory stays exported; or the refusal."""

    def __init__(self, fields=None, capsule=None, refusal=None):
        self.fields, self.capsule, self.refusal = fields, capsule, refusal


def _recording_module(name, max_version):
    """A consumer module that records what it is handed, registered as `name`."""
    def from_dlpack(x, **kw):
        try:
            cap = x.__dlpack__(max_version=max_version)
        except BufferError as e:
            return _Seen(refusal=str(e))
        return _Seen(_probe.inspect(cap), cap)

    mod = types.ModuleType(name)
    mod.from_dlpack = from_dlpack
    sys.modules[name] = mod
    return mod


def _apply(t, x, op):
    return t.transpose(x, op[1]) if op[0] == "transpose" else t.slice(x, *op[1:]) if op[0] == "slice" else t.flip(x, op[1])


def _comparable(seen, base):
    """The fields a check can tell apart, data made relative to the base tensor's."""
    if seen is None or seen.fields is None:
        return None if seen is None else ("refused", seen.refusal)
    f = seen.fields
    keep = {k: f.get(k) for k in ("kind", "version", "flags", "ndim", "dtype", "shape", "strides", "byte_offset")}
    keep["data"] = None if not f["data"] else f["data"] - base.fields["data"] if base is not None else "set"
    return keep


def test_generic_hooks_need_no_dlconform():
    """Every hook is the adapter's own (none is Target's `T = load(...)`), no line names
    dlconform but the producers import a standalone script inlines, and a snippet built of the
    lines the way the suites build theirs has a standalone form."""
    own = [n for n in vars(Target) if n.startswith("repro_") and getattr(GenericTarget, n) is getattr(Target, n)]
    assert not own, own
    t = GenericTarget("_gen_rec_a", module=_recording_module("_gen_rec_a", (1, 3)))
    x = t.make("float32", (2, 3), VALUES)
    setup = t.repro_setup()
    lines = list(setup) + t.repro_make("float32", (2, 3), VALUES) + t.repro_make("int16", (0, 2), b"")
    for (op,) in VIEWS[:4]:
        lines.append(t.repro_view(op, x, _apply(t, x, op), "x", "v0"))
    lines += [t.repro_readonly("x", "ro"), "y = " + t.repro_from_dlpack("p"), "d = " + t.repro_describe("y")]
    lines += t.repro_unexportable("u") + t.repro_sparse("s") + t.repro_byteswapped("x", "z")
    named = [line for line in lines if re.search(r"\bdlconform\b|\bT\.|load\(", line) and line != PRODUCERS_IMPORT]
    assert not named, named
    compile("\n".join(lines), "generic", "exec")
    snippet = _repro.snippet([], [_repro.run_header(), *setup, "import gc", "from dlconform import _probe, _ref",
                                  "from dlconform.snippet import expect", *lines[len(setup):]])
    script, why = standalone.script(snippet, "_gen_rec_a")
    assert why is None and script is not None, why
    assert not re.search(r"^\s*(from|import) dlconform", script, re.M)


def _run_lines(t, lines):
    """Runs the hooks' lines in dlconform mode (the suites' imports) and gives the namespace."""
    ns = {}
    exec("\n".join(["from dlconform import _probe, _ref", *t.repro_setup(), *lines]), ns)
    return ns


@pytest.mark.parametrize("max_version", [(1, 3), None], ids=["versioned", "legacy"])
@pytest.mark.parametrize("dtype,shape", [("int32", (2, 3)), ("float64", (3, 4)), ("uint8", (0, 3)), ("int16", ())])
def test_generic_make_and_views_hand_over_what_the_adapter_does(max_version, dtype, shape):
    """make(), the views (LAY-*) and readonly() (FLG-02) of the lines give the consumer the
    capsule fields the adapter's own imports give it, and read-only data is refused to a
    legacy request with the adapter's BufferError."""
    name = "_gen_rec_%s" % ("v" if max_version else "l")
    t = GenericTarget(name, module=_recording_module(name, max_version))
    size = 1
    for n in shape:
        size *= n
    values = bytes(i & 0xFF for i in range(size * {"int32": 4, "float64": 8, "uint8": 1, "int16": 2}[dtype]))
    x = t.make(dtype, shape, values)
    lines = t.repro_make(dtype, shape, values, "x")
    want = [("x", _comparable(x, x))]
    views = VIEWS if len(shape) == 2 and size else []
    for i, ops in enumerate(views):
        v, src = x, "x"
        for j, op in enumerate(ops):
            w = _apply(t, v, op)
            lines.append(t.repro_view(op, v, w, src, "v%d_%d" % (i, j)))
            v, src = w, "v%d_%d" % (i, j)
        want.append((src, _comparable(v, x)))
        ro = t.readonly(v)
        lines.append(t.repro_readonly(src, "ro%d" % i))
        want.append(("ro%d" % i, _comparable(ro, None)))
    ns = _run_lines(t, lines)
    got = [(var, _comparable(ns[var], ns["x"] if not var.startswith("ro") else None)) for var, _ in want]
    assert got == want
    assert want[0][1]["data"] is None if size == 0 else want[0][1]["data"] == 0
    if views:
        ro = [w for var, w in want if var.startswith("ro")]
        assert ro and all(w == ("refused", "a read-only tensor needs the READ_ONLY flag: ask for max_version >= (1, 0)")
                          if max_version is None else w["flags"] == 1 for w in ro), ro


def test_generic_views_read_the_elements_of_the_adapters_views():
    """The elements a view's lines export are the adapter's expected() bytes (the value oracle
    the checks compare against)."""
    t = GenericTarget("_gen_rec_e", module=_recording_module("_gen_rec_e", (1, 3)))
    x = t.make("int32", (2, 3), VALUES)
    lines = t.repro_make("int32", (2, 3), VALUES, "x")
    want = []
    for i, (op,) in enumerate(VIEWS[:4]):
        v = _apply(t, x, op)
        lines.append(t.repro_view(op, x, v, "x", "v%d" % i))
        want.append(t.expected(v))
    ns = _run_lines(t, lines)
    assert [_probe.read_elements(ns["v%d" % i].capsule) for i in range(len(want))] == want
    assert len(set(want)) == len(want)  # the views differ, so the comparison tells them apart


@pytest.mark.parametrize("max_version", [(1, 3), None], ids=["versioned", "legacy"])
def test_generic_copy_requests_get_the_adapters_copies(max_version):
    """A consumer asking the lines' tensors for copy=True gets what ref's tensors give it: a
    compact row-major copy (same elements, memory of its own), flagged IS_COPIED (2) when
    versioned and never READ_ONLY (CPY-01..03), read-only sources included."""
    def from_dlpack(x, **kw):
        cap = x.__dlpack__(max_version=max_version, copy=True)
        return _Seen(_probe.inspect(cap), cap)

    mod = types.ModuleType("_gen_rec_c")
    mod.from_dlpack = from_dlpack
    sys.modules["_gen_rec_c"] = mod
    plain = GenericTarget("_gen_rec_v", module=_recording_module("_gen_rec_v", (1, 3)))
    t = GenericTarget("_gen_rec_c", module=mod)
    x = plain.make("int32", (2, 3), VALUES)
    v = plain.transpose(x, (1, 0))
    ro = plain.readonly(v)
    lines = plain.repro_make("int32", (2, 3), VALUES, "x") + [plain.repro_view(("transpose", (1, 0)), x, v, "x", "v"),
                                                              plain.repro_readonly("v", "ro")]
    lines += ["c%d = _gen_mod_c.from_dlpack(_gen_made[id(%s)][1])" % (i, n) for i, n in enumerate(("x", "v", "ro"))]
    ns = _run_lines(plain, ["import importlib", "_gen_mod_c = importlib.import_module('_gen_rec_c')"] + lines)

    def fields(seen, src):
        f = seen.fields
        return ({k: f.get(k) for k in ("kind", "flags", "shape", "strides", "byte_offset")},
                _probe.read_elements(seen.capsule), f["data"] != src.fields["data"] + src.fields["byte_offset"])

    want = [fields(t.from_dlpack(plain._ref_of(o)), o) for o in (x, v, ro)]
    got = [fields(ns["c%d" % i], ns[n]) for i, n in enumerate(("x", "v", "ro"))]
    assert got == want
    assert all(w[0]["flags"] == (2 if max_version else None) and w[2] for w in want), want
