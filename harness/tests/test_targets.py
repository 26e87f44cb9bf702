"""Target adapters, the spec loader, and the recording producer."""
import importlib.util
import os
import subprocess
import sys

import pytest

import fakes

from dlconform.targets import loader
from dlconform.targets.base import TargetError

HAVE_NUMPY = importlib.util.find_spec("numpy") is not None
HAVE_TORCH = importlib.util.find_spec("torch") is not None


HAVE_REF = fakes.have_ref()
needs_ref = pytest.mark.skipif(not HAVE_REF, reason="dlconform._ref/_probe not built (make build)")

VALUES = bytes(range(24))  # int32 (2, 3): elements 0x03020100, ...


def int32_elements(raw):
    return [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]


# ---------------------------------------------------------------------------- loader
def test_unknown_module_reason_is_one_line():
    with pytest.raises(TargetError) as e:
        loader.load("no_such_module_xyz")
    assert str(e.value) == "cannot import module 'no_such_module_xyz' (ModuleNotFoundError)"


def test_module_without_from_dlpack():
    with pytest.raises(TargetError, match="has no from_dlpack"):
        loader.load("json")


def test_module_attr_and_file_adapters(tmp_path):
    t = loader.load("fakes:ProducerOnly")  # module:attr (this folder is on the path)
    assert t.roles == {"producer"}
    assert loader.load(fakes.PRODUCER_ONLY).roles == {"producer"}  # path/file.py:attr
    f = tmp_path / "my_adapter.py"
    f.write_text("import sys\nsys.path.insert(0, %r)\nfrom fakes import FakeTarget\nADAPTER = FakeTarget()\n"
                 % os.path.dirname(fakes.HERE))
    assert loader.load("%s:ADAPTER" % f).roles == {"producer", "consumer"}
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('nope')\n")
    with pytest.raises(TargetError, match="RuntimeError: nope"):
        loader.load("%s:X" % bad)
    with pytest.raises(TargetError, match="has no attribute 'Missing'"):
        loader.load(fakes.HERE + ":Missing")


def test_bad_ref_specs():
    with pytest.raises(TargetError, match="bad ref spec"):
        loader.load("ref:oops")
    if HAVE_REF:
        with pytest.raises(TargetError, match="unknown ref fault 'no_such_fault'"):
            loader.load("ref:fault=no_such_fault")


def test_a_bad_builtin_spec_is_one_line_not_an_internal_error(tmp_path):
    """A built-in name with a bad option or a device it lacks is the spec's fault, said in one
    line before anything imports (it was `dlconform: internal error: TargetError` with a
    traceback file, or a module named 'torch@gpu' that cannot be imported)."""
    assert loader.quick_check("ref:bogus=1").startswith("bad ref spec 'ref:bogus=1'")
    assert loader.quick_check("torch@gpu") == "torch has no device 'gpu' (its devices: cuda)"
    assert loader.quick_check("numpy@cuda").startswith("numpy has no device 'cuda' (built-in targets with a device: ")
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "-q", "--target", "ref:bogus=1", "--target",
                        "ref@gpu", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
    assert p.returncode == 2 and "internal error" not in p.stderr, p.stderr
    assert p.stderr.splitlines() == ["dlconform: target 'ref:bogus=1': bad ref spec 'ref:bogus=1' (expected ref, "
                                     "ref:fault=NAME or ref:fault=NAME,role=producer|consumer)",
                                     "dlconform: target 'ref@gpu': ref has no device 'gpu' (its devices: cuda)",
                                     "dlconform: error: no target can be run"]


def test_probe_runs_in_a_subprocess():
    info = loader.probe(fakes.FAKE, python=sys.executable)
    assert info == {"ok": True, "reason": "", "roles": ["consumer", "producer"], "versions": {"fake": "1.0"}}
    bad = loader.probe("no_such_module_xyz")
    assert not bad["ok"] and "ModuleNotFoundError" in bad["reason"]


def test_probe_reports_a_crashing_import(tmp_path):
    f = tmp_path / "crashy.py"
    f.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    info = loader.probe("%s:X" % f)
    assert not info["ok"]
    assert "SIGSEGV" in info["reason"]


def test_a_probe_in_the_warm_parent_answers_as_a_fresh_one(tmp_path):
    """`dlconform run` has each laned target's zygote run its probe once the library is
    imported (no second import); its answers, a target that loads, one that refuses and one
    that kills the process, are those of the probe in a fresh interpreter."""
    from dlconform import SUITES_DIR
    from dlconform.runner import Runner, SharedZygote

    crashy = tmp_path / "crashy_load.py"
    crashy.write_text("import os, signal\nfrom dlconform.targets.base import Target\n\n\nclass X(Target):\n"
                      "    def __init__(self):\n        os.kill(os.getpid(), signal.SIGSEGV)\n")
    runner = Runner(SUITES_DIR, str(tmp_path / "out"), python=sys.executable)
    for spec in (fakes.FAKE, "ref:fault=no_such_fault" if HAVE_REF else fakes.FAKE, "%s:X" % crashy):
        shared = SharedZygote(1)
        shared.prefetch(runner.zygote_maker(spec, on_probe=shared.took_probe))
        try:
            warm = loader.probe(spec, warm=shared.probe)
            assert shared.probe_result is not None, "the zygote ran no probe for %s" % spec
        finally:
            shared.close()
        assert warm == loader.probe(spec), spec
        assert warm["ok"] == (spec == fakes.FAKE) and ("SIGSEGV" in warm["reason"]) == spec.endswith(":X")


def test_describe_status():
    assert loader.describe_status(-11) == "killed by SIGSEGV"
    assert loader.describe_status(-6) == "killed by SIGABRT"
    assert loader.describe_status(3) == "exit status 3"


# ---------------------------------------------------------------------------- numpy
@pytest.mark.skipif(not HAVE_NUMPY, reason="numpy not installed")
def test_numpy_target_views_and_oracle():
    t = loader.load("numpy")
    assert t.roles == {"producer", "consumer"}
    assert {"bool", "int8", "uint64", "float16", "complex128"} <= set(t.dtypes())
    x = t.make("int32", (2, 3), VALUES)
    assert t.expected(x) == VALUES
    e = int32_elements(VALUES)
    assert int32_elements(t.expected(t.transpose(x, (1, 0)))) == [e[0], e[3], e[1], e[4], e[2], e[5]]
    assert int32_elements(t.expected(t.slice(x, 1, None, None, -2))) == [e[2], e[0], e[5], e[3]]
    f = t.flip(x, 0)
    assert int32_elements(t.expected(f)) == e[3:] + e[:3]
    d = t.describe(f)
    assert d["strides"] == (-3, 1) and d["itemsize"] == 4 and d["shape"] == (2, 3)
    assert t.describe(t.readonly(x))["readonly"] is True
    assert t.describe(x)["ptr"] == x.__array_interface__["data"][0]
    assert t.make("float32", (0, 3), b"").shape == (0, 3)
    assert t.expected(t.make("float64", (), bytes(8))) == bytes(8)


# ---------------------------------------------------------------------------- torch
@pytest.fixture(scope="module")
def torch_target():
    if not HAVE_TORCH:
        pytest.skip("torch not installed")
    return loader.load("torch")


def test_torch_dtypes(torch_target):
    import torch

    names = torch_target.dtypes()
    assert {"bool", "bfloat16", "float16", "complex64", "uint8"} <= set(names)
    for name in ("uint16", "uint32", "uint64"):
        assert (name in names) == isinstance(getattr(torch, name, None), torch.dtype)


def test_torch_make_views_oracle(torch_target):
    t = torch_target
    x = t.make("int32", (2, 3), VALUES)
    assert t.expected(x) == VALUES
    e = int32_elements(VALUES)
    assert int32_elements(t.expected(t.transpose(x, (1, 0)))) == [e[0], e[3], e[1], e[4], e[2], e[5]]
    assert int32_elements(t.expected(t.slice(x, 1, 0, 3, 2))) == [e[0], e[2], e[3], e[5]]
    assert t.flip(x, 0) is None and t.readonly(x) is None and t.slice(x, 1, None, None, -1) is None
    for dtype, raw in (("bfloat16", bytes(range(12))), ("bool", bytes([0, 1, 1, 0, 1, 0]))):
        assert t.expected(t.make(dtype, (2, 3), raw)) == raw
    assert t.expected(t.make("float32", (), bytes(4))) == bytes(4)
    assert t.expected(t.make("float32", (2, 0), b"")) == b""
    # one element left by a stepped slice keeps its stride through contiguous() (torch ignores the
    # strides of size-1 dimensions): its bytes are still read (a deep --examples run met it)
    one = t.slice(t.slice(x, 0, 1, 2), 1, 1, 2, 2)
    assert one.numel() == 1 and one.stride()[-1] != 1 and int32_elements(t.expected(one)) == [e[4]]
    d = t.describe(t.transpose(x, (1, 0)))
    assert d["strides"] == (1, 3) and d["itemsize"] == 4 and d["readonly"] is False


# ---------------------------------------------------------------------------- ref and generic
@needs_ref
def test_ref_target_views_roundtrip():
    t = loader.load("ref")
    x = t.make("int32", (2, 3), VALUES)
    e = int32_elements(VALUES)
    f = t.flip(x, 0)
    assert int32_elements(t.expected(f)) == e[3:] + e[:3]
    s = t.slice(x, 1, 2, None, -2)
    assert int32_elements(t.expected(s)) == [e[2], e[0], e[5], e[3]]
    y = t.from_dlpack(f)
    assert t.expected(y) == t.expected(f)
    assert t.describe(y)["strides"] == (-3, 1)
    assert t.readonly(x).readonly
    assert {"bool", "bfloat16", "float8_e4m3fn"} <= set(t.dtypes())


@needs_ref
@pytest.mark.skipif(not HAVE_NUMPY, reason="numpy not installed")
def test_generic_target_over_numpy(monkeypatch):
    """The generic target's tensors and views over numpy's from_dlpack; where numpy makes its
    imports read-only (numpy 1.x: it cannot then export them on the legacy path), the producer
    checks cannot use them, and the views are checked over npbox (numpy memory, writable)."""
    import numpy

    from dlconform.kit import HostTensor, Unsupported
    from dlconform.targets.generic import GenericTarget

    t = GenericTarget("numpy")
    assert t.roles == {"producer", "consumer"}
    if not numpy.from_dlpack(HostTensor("int32", (2, 3), VALUES)).flags.writeable:
        with pytest.raises(Unsupported, match="read-only arrays of writable data"):
            t.make("int32", (2, 3), VALUES)
        monkeypatch.syspath_prepend(os.path.join(os.path.dirname(__file__), "libs"))
        t = GenericTarget("npbox")
    x = t.make("int32", (2, 3), VALUES)
    v = t.flip(t.transpose(x, (1, 0)), 1)
    e = int32_elements(VALUES)
    assert int32_elements(t.expected(v)) == [e[3], e[0], e[4], e[1], e[5], e[2]]
    assert bytes(numpy.asarray(v).tobytes()) == t.expected(v)   # the oracle agrees with the library
    assert t.describe(v)["strides"] == (1, -3)
    with pytest.raises(TargetError):
        t.expected(object())


# ---------------------------------------------------------------------------- recording producer
class FakeForge:
    def __init__(self, versioned):
        self.versioned = versioned
        self.made = 0

    def capsule(self):
        self.made += 1
        return ("versioned" if self.versioned else "legacy", self.made)


def test_recording_producer_negotiates():
    from dlconform.kit import RecordingProducer

    p = RecordingProducer(FakeForge)
    assert p.__dlpack_device__() == (1, 0)
    assert p.__dlpack__()[0] == "legacy"
    assert p.__dlpack__(max_version=(0, 8))[0] == "legacy"
    assert p.__dlpack__(max_version=(1, 3), dl_device=(1, 0), copy=False)[0] == "versioned"
    assert p.__dlpack__(max_version=(2, 0))[0] == "versioned"
    assert p.events == ["__dlpack_device__", "__dlpack__", "__dlpack__", "__dlpack__", "__dlpack__"]
    assert p.calls[2] == {"max_version": (1, 3), "dl_device": (1, 0), "copy": False}
    with pytest.raises(BufferError):
        p.__dlpack__(stream=1)
    with pytest.raises(TypeError):
        p.__dlpack__(None)
    with pytest.raises(TypeError):
        p.__dlpack__(bogus=1)
    assert p.calls[-1] == {"bogus": 1}


def test_legacy_only_and_versioned_only_producers():
    from dlconform.kit import RecordingProducer

    old = RecordingProducer(FakeForge, legacy_only=True)
    assert old.__dlpack__(stream=None)[0] == "legacy"
    with pytest.raises(TypeError):
        old.__dlpack__(max_version=(1, 3))
    assert old.calls == [{"stream": None}, {"max_version": (1, 3)}]
    new = RecordingProducer({"legacy": FakeForge(False), "versioned": FakeForge(True)}, versioned_only=True)
    with pytest.raises(BufferError):
        new.__dlpack__()
    assert new.__dlpack__(max_version=(1, 0))[0] == "versioned"


@needs_ref
def test_recording_producer_with_ref_consumer():
    from dlconform import _probe, _ref
    from dlconform.kit import RecordingProducer, forges

    factory = forges(shape=(4,))
    p = RecordingProducer(factory)
    y = _ref.from_dlpack(p)
    assert p.events[-1] == "__dlpack__" and "__dlpack_device__" in p.events
    assert p.calls[-1]["max_version"][0] >= 1
    assert p.last_kind == "versioned"
    del y
    assert _probe.inspect(RecordingProducer(factory).__dlpack__())["kind"] == "legacy"


# ---------------------------------------------------------------------------- reproducer lines
def _adapters():
    specs = (["ref"] if HAVE_REF else []) + (["numpy"] if HAVE_NUMPY else []) + (["torch"] if HAVE_TORCH else [])
    return [loader.load(s) for s in specs]


def test_builtin_targets_are_built_as_scripts_build_them():
    """One table registers the built-in targets: load() and a reproducer's construction line
    build the same adapter."""
    from dlconform.targets.loader import BUILTIN, construction

    for name in ["ref", "pyref", "ref:fault=copy_ignored,role=producer"] + (["numpy"] if HAVE_NUMPY else []):
        if name.startswith("ref") and not HAVE_REF:
            continue
        imports, expr = construction(name)
        ns = {}
        exec("\n".join(imports), ns)
        made, loaded = eval(expr, ns), loader.load(name)
        assert (type(made), made.name, made.roles) == (type(loaded), loaded.name, loaded.roles), name
    assert set(BUILTIN) >= {"ref", "pyref", "numpy", "torch", "tvm_ffi", "pyarrow", "mpi4py", "nanobind",
                            "onnxruntime"}
    assert not any(n.startswith("repro_") for cls in (type(loader.load("pyref")),) for n in dir(cls))
    if HAVE_REF:  # ref's fault is process-wide: the tests after this one meet a clean ref
        from dlconform import _ref

        _ref.set_fault(None)


@needs_ref
def test_native_layout_and_kind_hooks():
    for t in _adapters():
        x = t.transpose(t.make("float32", (2, 3), VALUES), (1, 0))
        shape, strides, first = t.native_layout(x)
        assert (shape, strides, first) == ((3, 2), (1, 3), t.describe(x)["ptr"]), t.name
        assert t.dtype_kind(t.from_dlpack(t.make("int32", (2,), VALUES[:8]))) == "i", t.name
    what, u = loader.load("ref").unexportable()
    with pytest.raises(BufferError):
        u.__dlpack__()
    assert what == "ref tensor with exportable=False"


def test_library_targets_import_and_report_their_roles(monkeypatch):
    from dlconform.targets.base import LibraryTarget

    class NoRoles(LibraryTarget):
        library = "json"

        def offers(self, module):
            return False, False

    t = NoRoles()
    assert t.name == "json" and t.roles == frozenset() and t.versions() == {"json": t.module.__version__}
    assert t.available() == (False, "json %s has no DLPack support" % t.module.__version__)

    class Missing(NoRoles):
        library = "no_such_module_xyz"

    with pytest.raises(TargetError, match=r"cannot import module 'no_such_module_xyz' \(ModuleNotFoundError\)"):
        Missing()


def test_every_builtin_adapter_module_imports():
    """Each built-in adapter module imports wherever dlconform does: a library that is missing
    may stop it (ModuleNotFoundError naming that library), a name dlconform no longer has must
    not (the tiers would report the target skipped, and its verdicts silently vanish)."""
    import importlib
    import pkgutil

    import dlconform.targets as pkg
    from dlconform.targets.loader import BUILTIN

    libraries = {lib.split(".")[0] for _, _, lib in BUILTIN.values() if lib} | {"mpi4py"}
    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if m.name.endswith("_target")]
    assert "nanobind_target" in names and "onnxruntime_target" in names, names
    for name in names:
        try:
            importlib.import_module("dlconform.targets." + name)
        except ModuleNotFoundError as e:
            assert e.name and e.name.split(".")[0] in libraries and e.name != "dlconform", (name, e)


def test_adapter_hooks_keep_the_base_signatures():
    """A hook an adapter overrides takes what Target's takes, with the same defaults: the
    suites call hooks with the base's arguments only, and a drifted signature turns every
    check that calls it into a harness error in the tier where that library lives."""
    import importlib
    import inspect
    import pkgutil

    import dlconform.targets as pkg
    from dlconform.targets.base import Target

    checked = 0
    for m in pkgutil.iter_modules(pkg.__path__):
        if not m.name.endswith("_target") and m.name != "ref":
            continue
        try:
            module = importlib.import_module("dlconform.targets." + m.name)
        except ModuleNotFoundError:
            continue  # the library is not here; test_every_builtin_adapter_module_imports judges it
        for cls in vars(module).values():
            if not (isinstance(cls, type) and issubclass(cls, Target) and cls is not Target):
                continue
            for name, fn in vars(cls).items():
                base = getattr(Target, name, None)
                if not callable(fn) or base is None or name.startswith("__"):
                    continue
                want = [(p.name, p.default) for p in inspect.signature(base).parameters.values()]
                got = [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]
                assert got[:len(want)] == want, (cls.__name__, name, got, want)
                assert all(p.default is not inspect.Parameter.empty for p in
                           list(inspect.signature(fn).parameters.values())[len(want):]), (cls.__name__, name)
                checked += 1
    assert checked > 20, checked


@pytest.mark.parametrize("interface", [
    {"data": None, "shape": (2,), "typestr": "<f4", "version": 3},  # data in a buffer instead: allowed
    {"data": (0, False), "shape": None, "typestr": "<f4"},
    {"data": (0, False), "shape": (2,), "typestr": "f"},
])
def test_an_array_interface_the_reader_cannot_parse_is_no_reader(interface):
    """generic.independent() reads an __array_interface__ it can parse; one it cannot is no
    reader of the result (the next reader is tried), never an exception inside a check."""
    from dlconform.targets.generic import independent

    obj = type("Odd", (), {"__array_interface__": interface})()
    assert independent(obj) is None


def test_consumer_keywords_of_a_function_without_a_signature_are_probed():
    """A compiled from_dlpack whose signature inspect cannot read (Cython without binding, a C
    builtin such as numpy 1.24's) is asked by calling it with a non-producer and each keyword at
    its default: an unknown keyword is a TypeError saying "keyword" (CPython's and Cython's
    argument binding), a known one fails on the object. Without this every keyword check of such
    a library was unsupported ("takes no copy keyword")."""
    from dlconform.targets._util import keywords_of

    class Compiled:
        """Calls like a compiled from_dlpack(x, /, *, copy=None): no signature to read."""

        @property
        def __signature__(self):
            raise ValueError("no signature found for builtin")

        def __call__(self, x, **kw):
            if set(kw) - {"copy"}:
                raise TypeError("from_dlpack() got an unexpected keyword argument %r" % sorted(kw)[0])
            return x.__dlpack__()

    class NoKeywords(Compiled):
        def __call__(self, x, **kw):
            if kw:
                raise TypeError("from_dlpack() takes no keyword arguments")
            return x.__dlpack__()

    class Answers(Compiled):
        def __call__(self, x, **kw):
            return x

    assert keywords_of(Compiled()) == frozenset({"copy"})
    assert keywords_of(NoKeywords()) == frozenset()
    assert keywords_of(Answers()) is None  # a call that returns tells nothing
    assert keywords_of(lambda x, *, device=None, copy=None: x) == frozenset({"device", "copy"})
