"""A generic target: any importable module with `from_dlpack`.

Its tensors are the kit's host tensors (dlconform.kit.HostTensor, a correct producer written in
Python) imported through `module.from_dlpack`; views are taken on the host tensor before
importing. Nothing here needs dlconform's C extensions, so a finding's script stands alone with
the library beside it.

Each role is judged with the other role's part done by something trusted (issue 20):
- the producer's tensors come through the library's own consumer, so each import is verified
  before a producer check uses it: read back, it must hold the dtype, the shape and the elements
  it was given (and be read-only where it was). An import that does not is the consumer's
  finding, judged by the consumer checks; the producer check that needed it says `unsupported`
  and names it. The value oracle (`expected`) is what the import was verified to hold;
- a consumer result is read by a reader the consumer's own export cannot taint: its
  `__array_interface__` or its buffer (PEP 3118). Only where the library has neither is the
  result read through its own `__dlpack__`, and then only once every round trip (round_trips:
  plain, strided, offset, 0-d, zero-size and read-only imports read back through it) holds:
  where one does not, one of from_dlpack and __dlpack__ is wrong, dlconform cannot tell which,
  and the checks that need to read a result say `unsupported` and why (test_interop.py's round
  trip reports the disagreement itself);
- a reader that cannot observe (a dtype the buffer protocol has no format for, say) is not a
  finding: the next reader is tried, and where none can read the result, `unsupported`.
"""
import ctypes
import gc
import importlib

from . import _views
from ._util import keywords_of
from .base import Target, TargetError
from ..kit import Unsupported, abi, inspect, read_elements
from . import dtypes as _dtypes
from .dtypes import EXTENDED_FLOATS, STANDARD_DTYPES, row_major_strides
from ..kit import HostTensor, RecordingProducer, forges


class _Py_buffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)), ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_RECORDS_RO = 0x0010 | 0x0008 | 0x0004  # STRIDES | ND | FORMAT

# Private prototypes: the function objects of ctypes.pythonapi are shared by the whole process.
_get_buffer = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_Py_buffer), ctypes.c_int)(
    ("PyObject_GetBuffer", ctypes.pythonapi))
_release_buffer = ctypes.PYFUNCTYPE(None, ctypes.POINTER(_Py_buffer))(("PyBuffer_Release", ctypes.pythonapi))


def buffer_info(obj):
    """Address, shape, byte strides, itemsize and readonly of an object's buffer (PEP 3118)."""
    view = _Py_buffer()
    if _get_buffer(obj, ctypes.byref(view), _PyBUF_RECORDS_RO) != 0:
        raise TypeError("no buffer")
    try:
        nd = view.ndim
        shape = (tuple(view.shape[i] for i in range(nd)) if view.shape
                 else ((view.len // max(view.itemsize, 1),) if nd else ()))
        strides = tuple(view.strides[i] for i in range(nd)) if view.strides else None
        return {"ptr": view.buf or 0, "shape": shape, "byte_strides": strides,
                "itemsize": view.itemsize, "readonly": bool(view.readonly)}
    finally:
        _release_buffer(ctypes.byref(view))


def independent(y):
    """describe() of y through its __array_interface__ or its buffer, or None when neither can
    read it (absent, or unable: a format the buffer protocol lacks)."""
    try:
        ai = getattr(y, "__array_interface__", None)
    except Exception:  # a property that raises: this reader cannot read y
        ai = None
    if isinstance(ai, dict) and "data" in ai:
        try:
            ptr, ro = ai["data"]
            shape = tuple(int(n) for n in ai["shape"])
            itemsize = int(ai["typestr"][2:]) if ai.get("typestr") else 1
            st = ai.get("strides")
            strides = row_major_strides(shape) if st is None else tuple(int(s) // itemsize for s in st)
            return {"ptr": int(ptr), "shape": shape, "strides": strides, "itemsize": itemsize, "readonly": bool(ro)}
        except (TypeError, ValueError, KeyError, ZeroDivisionError):
            pass  # an interface this reader cannot read (data None: an object exposing a buffer instead)
    try:
        info = buffer_info(y)
    except Exception:  # no buffer, or one it cannot describe (BufferError for a format it lacks)
        return None
    itemsize = info["itemsize"]
    st = info["byte_strides"]
    strides = row_major_strides(info["shape"]) if st is None else tuple(s // itemsize for s in st)
    return {"ptr": info["ptr"], "shape": info["shape"], "strides": strides, "itemsize": itemsize,
            "readonly": info["readonly"]}


class GenericTarget(Target):
    def __init__(self, name, module=None):
        super().__init__(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except Exception as e:
                raise TargetError("cannot import module %r (%s)" % (name, type(e).__name__))
        if not callable(getattr(module, "from_dlpack", None)):
            # the generic target makes its tensors through from_dlpack: a producer-only library
            # says how it makes its own in an adapter
            raise TargetError("module %r has no from_dlpack; for a library without one, write an adapter (a Target "
                              "whose make() builds the library's own tensors) and run --target "
                              "path/to/adapter.py:Class (harness/README.md, 'An adapter for a library with native "
                              "constructors')" % name)
        self.module = module
        self.library = module.__name__
        self._table = {}
        self._dtypes = None
        self._round_trips = None  # _round_trip_findings(), once asked
        self._died = None  # _deaths(), once asked
        self._deletes = None  # _deleter_calls(), once asked
        roles = {"consumer"}
        try:
            probe = module.from_dlpack(HostTensor("float32", (2,)))
            if hasattr(probe, "__dlpack__"):
                roles.add("producer")
        except Exception:
            pass
        self.roles = frozenset(roles)

    def versions(self):
        top = self.library.split(".")[0]
        try:
            from importlib import metadata

            return {top: metadata.version(top)}
        except Exception:
            return {top: str(getattr(self.module, "__version__", "unknown"))}

    def dtypes(self):
        """The DLPack dtypes (standard, float8, float6 and float4) the library makes: those whose
        import holds what it was given, read back (an import of another dtype, jax's int32 for an
        int64 without its 64-bit types, is the consumer checks' finding)."""
        if self._dtypes is None:
            ok = []
            for name in STANDARD_DTYPES + EXTENDED_FLOATS:
                host = HostTensor(name, (2,), bytes(range(1, 1 + 2 * abi.itemsize(abi.DTYPES[name]))))
                try:
                    y = self.module.from_dlpack(host)
                except Exception:  # the library takes no tensor of this dtype
                    continue
                if not self._differs(y, host):
                    ok.append(name)
            self._dtypes = ok
        return list(self._dtypes)

    # ---- import host tensors and remember them
    def _import(self, host):
        y = self.module.from_dlpack(host)
        self._table[id(y)] = (y, host)
        return y

    def _ref_of(self, x):
        entry = self._table.get(id(x))
        if entry is None or entry[0] is not x:
            raise TargetError("%s: this object was not made by the target" % self.name)
        return entry[1]

    def _made(self, host, what):
        """The import of `host`, verified to hold what it was given (the producer checks judge
        what the library made only where it is what they asked for). A library whose imports of
        writable data are read-only (numpy 1.x) has no writable tensor to judge the producer on:
        a read-only one may be refused on the legacy path (FLG-02), which is no producer's fault
        here."""
        extra = self._deleter_calls()
        if extra:
            raise Unsupported("cannot judge the producer on %s: %s's from_dlpack calls an import's deleter %d times "
                              "(OWN-03, the consumer checks' finding), and every tensor of the generic target is such "
                              "an import, whose memory it would free twice" % (what, self.library, extra))
        if any(s < 0 for s in host.strides) and _FLIPPED in self._deaths():
            raise Unsupported("cannot judge the producer on %s: %s's from_dlpack kills the process on negative "
                              "strides (the consumer checks' crash)" % (what, self.library))
        y = self._import(host)
        problem = self._differs(y, host)
        if problem:
            raise Unsupported("cannot judge the producer on %s: %s's from_dlpack imported it as %s (the consumer "
                              "checks judge the import)" % (what, self.library, problem))
        d = self._independent(y)
        if not host.readonly and d is not None and d["readonly"]:
            raise Unsupported("cannot judge the producer on %s: %s's from_dlpack makes read-only arrays of writable "
                              "data, and the generic target has no other way to make the library's tensors (an "
                              "adapter with its own constructors judges the producer)" % (what, self.library))
        return y

    def _deleter_calls(self):
        """The deleter calls of a plain import once it died, when more than one (else 0): a
        library that frees what it imports twice cannot hold the generic target's tensors."""
        if self._deletes is None:
            p = RecordingProducer(forges(shape=(2, 3)))
            try:
                self.module.from_dlpack(p)  # the result dies at once
            except Exception:  # refused: the consumer checks judge that
                pass
            gc.collect()
            calls = sum(f.deleter_calls for f in p.forges.values())
            self._deletes = calls if calls > 1 else 0
        return self._deletes

    def make(self, dtype, shape, values):
        return self._made(HostTensor(dtype, tuple(shape), bytes(values)), "a %s %s tensor" % (dtype, tuple(shape)))

    def _view(self, x, geometry):
        r = self._ref_of(x)
        shape, strides, offset = geometry
        return self._made(r.view(shape, strides, r.byte_offset + offset * r.itemsize),
                          "a %s view of shape %s and strides %s" % (r.dtype, tuple(shape), tuple(strides)))

    def transpose(self, x, perm):
        r = self._ref_of(x)
        return self._view(x, _views.transpose(r.shape, r.strides, perm))

    def slice(self, x, dim, start, stop, step=1):
        r = self._ref_of(x)
        return self._view(x, _views.slice_(r.shape, r.strides, dim, start, stop, step))

    def flip(self, x, dim):
        r = self._ref_of(x)
        return self._view(x, _views.flip(r.shape, r.strides, dim))

    def readonly(self, x):
        r = self._ref_of(x)
        try:
            y = self._import(HostTensor(r.dtype, r.shape, r.tobytes(), readonly=True))
        except Exception:  # a library that does not import read-only data has no read-only tensors
            return None
        problem = self._differs(y, self._ref_of(y))
        if problem:
            raise Unsupported("cannot judge the producer on read-only data: %s's from_dlpack imported a READ_ONLY "
                              "tensor as %s (the consumer checks judge the import)" % (self.library, problem))
        return y

    def expected(self, x):
        return self._ref_of(x).tobytes()

    def native_layout(self, x):
        """(shape, element strides, first-element address) of a tensor of the library as its own
        reader sees it (its __array_interface__ or buffer: the reader its import was verified
        with), so that the producer checks hold the export's strides and byte_offset to it (LAY-05,
        LAY-03); None without one. Never read through __dlpack__: that is what is judged."""
        d = self._independent(x)
        return None if d is None else (tuple(d["shape"]), tuple(d["strides"]), int(d["ptr"]))

    def from_dlpack(self, obj, **kw):
        return self.module.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        kws = keywords_of(self.module.from_dlpack)
        return kws if kws is not None else frozenset()

    # ---- reading results
    _independent = staticmethod(independent)

    def _through_export(self, y, elements=False):
        """describe() of y through its own __dlpack__ (with "dtype", and "elements" when asked), or
        None. Elements are read only for the kit's own tensors (`elements`): a consumer result may
        describe more memory than exists (test_layout's shape beyond memory), and dlconform must
        not be the one to read it."""
        if not hasattr(y, "__dlpack__"):
            return None
        try:
            try:
                cap = y.__dlpack__(max_version=abi.DLPACK_VERSION)
            except TypeError:
                cap = y.__dlpack__()
            d = inspect(cap)
            shape = tuple(d["shape"] or ())
            return {"ptr": (d["data"] or 0) + d["byte_offset"], "shape": shape,
                    "strides": tuple(d["strides"]) if d.get("strides") is not None else row_major_strides(shape),
                    "itemsize": _dtypes.itemsize(tuple(d["dtype"])), "readonly": bool((d.get("flags") or 0) & 1),
                    "dtype": tuple(d["dtype"]), "device": tuple(d["device"]),
                    "elements": read_elements(cap) if elements else None}
        except Exception:  # an export that fails or cannot be read: this reader cannot read y
            return None

    def _differs(self, y, host):
        """How the import y of `host` differs from it (dtype, shape, elements, read-only), as the
        readers see it; "" when it holds what it was given."""
        d = self._independent(y)
        if d is None:
            d = self._through_export(y, elements=True)
        if d is None:
            return "nothing dlconform can read (no __array_interface__, buffer or readable __dlpack__)"
        if tuple(d["shape"]) != host.shape:
            return "shape %s, not %s" % (tuple(d["shape"]), host.shape)
        if d.get("dtype") is not None and tuple(d["dtype"]) != host.code:
            return "dtype %s, not %s %s" % (tuple(d["dtype"]), host.dtype, host.code)
        if d["itemsize"] != host.itemsize:
            return "elements of %d bytes, not the %d of %s" % (d["itemsize"], host.itemsize, host.dtype)
        got = d["elements"] if "elements" in d else _elements(d)
        if got != host.tobytes():
            return "other elements (%s, not %s)" % (got.hex()[:48], host.tobytes().hex()[:48])
        if host.readonly and not d["readonly"]:
            return "writable data"
        return ""

    def round_trips(self):
        """[(case, how it differs, clause)] of the cases whose import, read back through the library's own
        __dlpack__, does not hold what it was given (see _round_trip_findings); None where the
        library's results have a reader of their own (__array_interface__ or a buffer): then each
        role is judged on its own, the import by that reader and the export by the producer
        checks, and a round trip that fails says nothing they do not."""
        try:
            y = self.module.from_dlpack(HostTensor("float32", (2, 3), bytes(range(24))))
        except Exception:  # not imported: no reader of the library's own to speak of
            y = None
        if y is not None and self._independent(y) is not None:
            return None
        return self._round_trip_findings()

    def _round_trip_findings(self):
        """[(case, how it differs, clause)] of the cases whose import, read back through the library's own
        __dlpack__, does not hold what it was given: a plain tensor, its transpose, a stepped
        slice, a flipped view, a view at a byte offset, a 0-d and a zero-size tensor, read-only
        data (cached). Where the library has no other reader, a case here means from_dlpack or
        __dlpack__ is wrong and dlconform cannot tell which."""
        if self._round_trips is None:
            cases = self._round_trip_cases()
            deaths = self._deaths()
            found = []
            for what, host, clause in cases:
                if what in deaths:  # an import that kills the process is the consumer checks' crash
                    stage, how = deaths[what]
                    if stage == "export":
                        found.append((what, "reading it back through its own __dlpack__ %s" % how, clause))
                    continue
                try:
                    y = self.module.from_dlpack(host)
                except Exception:  # not imported: the consumer checks judge the refusal
                    continue
                d = self._through_export(y, elements=True)
                if d is None:
                    found.append((what, "its __dlpack__ export fails or cannot be read", clause))
                    continue
                problem = self._export_differs(d, host)
                if problem:
                    found.append((what, problem, clause))
            # one bug, one clause: where the view at a byte offset fails (LAY-03), the other
            # cases that carry a byte offset (the flipped view) fail for the same reason
            if any(clause == "LAY-03" for _, _, clause in found):
                offset = {what for what, host, _ in cases if host.byte_offset}
                found = [(what, problem, "LAY-03" if what in offset else clause) for what, problem, clause in found]
            self._round_trips = found
        return list(self._round_trips)

    @staticmethod
    def _round_trip_cases():
        """[(case, the kit's host tensor, clause)] of the round trip."""
        base = HostTensor("float32", (2, 3), bytes(range(24)))
        return [("a contiguous float32 (2, 3) tensor", base, "LAY-11"),
                ("its transpose", base.view((3, 2), (1, 3), 0), "LAY-11"),
                ("a stepped slice of it", base.view((2, 2), (3, 2), 0), "LAY-11"),
                (_FLIPPED, base.view((2, 3), (-3, 1), 12), "LAY-11"),
                ("a view of it at byte offset 8", base.view((2,), (1,), 8), "LAY-03"),
                ("a 0-d float32 tensor", HostTensor("float32", (), bytes(range(4))), "LAY-08"),
                ("a zero-size float32 (0, 3) tensor", HostTensor("float32", (0, 3)), "LAY-04"),
                ("read-only float32 (2, 3) data", base.view((2, 3), (3, 1), 0, readonly=True), "FLG-02")]

    def _deaths(self):
        """{case: (stage, how)} of the round-trip cases that kill the process, stage "import" or
        "export". The cases run first in a child interpreter, again without those that killed
        it, so a library that dies on one (torch 1.13 aborts on negative strides) costs that
        case, not every check that reads a result. A child that cannot run them (no dlconform
        there: a standalone script) finds none, and the cases run here as they are."""
        if self._died is not None:
            return self._died
        import os
        import subprocess
        import sys

        self._died = deaths = {}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        for _ in range(len(self._round_trip_cases())):
            cmd = [sys.executable, "-c", _DEATHS_CHILD, self.name, self.module.__name__, *deaths]
            try:
                p = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, text=True, timeout=120)
                how = "killed the process (signal %d)" % -p.returncode if p.returncode < 0 else None
                out = p.stdout
            except subprocess.TimeoutExpired as e:
                how = "did not return in 120 s"
                out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            last = out.splitlines()[-1].split("\t", 1) if out.strip() else None
            if how is None or last is None or last[0] not in ("import", "export"):
                return deaths
            deaths[last[1]] = (last[0], how)
        return deaths

    @staticmethod
    def _export_differs(d, host):
        if tuple(d["shape"]) != host.shape:
            return "shape %s, not %s" % (tuple(d["shape"]), host.shape)
        if d.get("dtype") is not None and tuple(d["dtype"]) != host.code:
            return "dtype %s, not %s" % (tuple(d["dtype"]), host.code)
        if d["elements"] != host.tobytes():
            return "elements %s, not %s" % (d["elements"].hex()[:48], host.tobytes().hex()[:48])
        if host.readonly and not d["readonly"]:
            return "writable, not read-only"
        return ""

    def describe(self, y):
        """Of a consumer result: its independent reader's description; where it has none, its own
        export's, once a plain import reads back through it; else Unsupported, saying why."""
        d = self._independent(y)
        if d is not None:
            return d
        if not hasattr(y, "__dlpack__"):  # no reader at all: nothing is wrong, nothing can be read
            raise Unsupported("cannot read %s's result: it has no __array_interface__, buffer or __dlpack__; an "
                              "adapter whose describe() reads it lets the consumer checks judge it (harness/README.md, "
                              "'A consumer-only library')" % self.library)
        wrong = self._round_trip_findings()
        if wrong:
            raise Unsupported("cannot read %s's results: it has no __array_interface__ or buffer, and its own "
                              "__dlpack__ does not give back what from_dlpack imported (%s): one of the two is wrong, "
                              "dlconform cannot tell which; test_interop.py::test_library_round_trip reports it"
                              % (self.library, "; ".join("%s: %s" % w[:2] for w in wrong[:3])))
        d = self._through_export(y)
        if d is None:
            raise Unsupported("cannot read %s's result: no __array_interface__ or buffer, and its __dlpack__ export "
                              "fails or cannot be read" % self.library)
        d.pop("elements")
        return d


#: the round trip's case with negative strides: where its import kills the process, so would a
#: producer tensor with negative strides made through from_dlpack (GenericTarget._made)
_FLIPPED = "a flipped view of it (negative strides)"
#: GenericTarget._deaths' child: runs the round-trip cases, saying which case and stage it is in
_DEATHS_CHILD = """import importlib, sys
from dlconform.targets.generic import GenericTarget
t = GenericTarget(sys.argv[1], importlib.import_module(sys.argv[2]))
for what, host, _ in t._round_trip_cases():
    if what in sys.argv[3:]:
        continue
    print("import\\t" + what, flush=True)
    try:
        y = t.module.from_dlpack(host)
    except Exception:
        continue
    print("export\\t" + what, flush=True)
    t._through_export(y, elements=True)
print("done", flush=True)
"""


def _elements(d):
    from ..kit import elements

    return elements(d)
