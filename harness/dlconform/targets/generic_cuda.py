"""`MODULE@cuda`: any importable library's `from_dlpack` judged as a CUDA consumer, and its
imports' `__dlpack__` as a CUDA producer, with no adapter (the generic target's device spec).

Its consumer checks (suites/test_cuda_stream.py, test_cuda_exchange.py) import producers over
real device memory, their data still pending on their own stream, and need to read what the
library imported as a user of the import would: `read_import`.

Its producer, where its imports export themselves (`__dlpack__`), is judged as the generic
CPU target judges one: on its imports of ready device memory (pyref's device arrays), each
verified to hold what it was given before a check uses it (read once the device is idle, by
the readers below; an import that does not is the consumer checks' finding, and the producer
check says `unsupported`). Those tensors are compact; the library's own views are beyond what
dlconform can ask for. The producer checks of the host files run on them (`device_tensors`).
The stream checks' producer side needs the stream the library's own work is pending on, which
only an adapter can name: those are `unsupported`, but for the stream values a CUDA export must
refuse (STR-02, STR-08), which need no pending work.

How an import is read (GenericCudaDevice.read_import), on the stream a user of it must read on:
- its `__cuda_array_interface__` (a reader the library's DLPack side cannot taint), on the
  stream the interface names (v3's `stream`: where its data is pending), else on the stream
  the consumer named to the producer;
- host memory (`__array_interface__` or a buffer: a consumer that copied to the host), as is;
- its own `__dlpack__(stream=S)`, S the stream the consumer named, then read on S: a DLPack
  consumer of the import. This reader is used only once a ready import reads back through it
  as given; where one does not, from_dlpack or __dlpack__ is wrong, dlconform cannot tell
  which, and the checks that read say `unsupported`.
A strided import (by any reader's strides) is read as the bytes it spans, then gathered in
row-major order on the host. The read is made twice: on that stream right after the import, and
again once the device is idle. Stale data on the stream but the final data once idle means the read was not ordered
after the import's work: the consumer's fault, or its reader's (an interface naming the wrong
stream, an export that does not make S wait), which dlconform cannot separate; unless the
consumer passed -1 and so left nothing a reader could be ordered after: then it is the
consumer's, which did not synchronise itself. Stale data even once idle means the import itself
holds the old data: the consumer copied before the producer's stream was done
(suites/support/cuda.py: `judge_import`).
"""
import collections
import ctypes
import struct
import weakref

from ..kit import Unsupported, abi, gather, inspect, layout_extent, read_elements
from ._util import keywords_of
from .base import Target, TargetError, import_library
from .dtypes import row_major_strides
from .generic import GenericTarget, independent
from .pyref_target import CudaStreamDevice, UnnamedStreams

#: the devices `MODULE@DEVICE` may name
DEVICES = ("cuda",)


def split(spec):
    """(module name, device) of `MODULE@DEVICE`; TargetError for a device it cannot be."""
    name, _, device = spec.partition("@")
    if not name or device not in DEVICES:
        raise TargetError("bad target spec %r: a module's device variant is MODULE@DEVICE, DEVICE one of %s"
                          % (spec, ", ".join(DEVICES)))
    return name, device


class GenericCudaTarget(Target):
    """`MODULE@cuda`: MODULE's from_dlpack as a consumer of CUDA tensors, and its imports'
    __dlpack__ as a producer of them."""

    device = (2, 0)
    roles = frozenset({"consumer"})

    def __init__(self, spec, module=None):
        name, _ = split(spec)
        super().__init__(spec)
        module = module if module is not None else import_library(name)
        if not callable(getattr(module, "from_dlpack", None)):
            raise TargetError("module %r has no from_dlpack: %s judges a library's from_dlpack as a CUDA consumer "
                              "(a producer alone is judged through an adapter, harness/README.md)" % (name, spec))
        self.module, self.library = module, module.__name__
        self._device = None
        self._made, self._dtypes = {}, None
        # the device's probe import runs here, once per process, before any check imports
        # anything: its device-wide synchronisation would complete the pending work a check
        # observes, and a library that dies on a plain ready import fails to load rather than on a
        # check's role. Whether that import exports itself makes the library a producer too.
        device = self.stream_device()
        if device is not None and device.imports_export:
            self.roles = frozenset({"consumer", "producer"})
            self.device_tensors = True  # its imports: the host files' producer checks run on them

    @staticmethod
    def _pyref():
        from .. import pyref

        return pyref

    def _ready(self, dtype, shape, values):
        """pyref's device array of the values, its copy to the device done."""
        pyref = self._pyref()
        x = pyref.to_device(pyref.frombuffer(bytes(values), dtype, tuple(shape)))
        self._runtime()[0].synchronize(x.stream)
        return x

    # ---- producer: the library's imports of ready device memory
    def make(self, dtype, shape, values):
        """The library's import of device memory holding `values`, verified to hold them."""
        what = "a %s %s tensor" % (dtype, tuple(shape))
        x = self._ready(dtype, shape, values)
        try:
            y = self.module.from_dlpack(x)
        except Exception as e:  # the import is the consumer checks' to judge
            raise Unsupported("cannot judge the producer on %s: %s's from_dlpack refused it (%s: %s; the consumer "
                              "checks judge the refusal)" % (what, self.library, type(e).__name__, e))
        seen, loc = self.stream_device().read_ready(y)
        problem = _import_problem(loc, seen, dtype, tuple(shape), bytes(values)) or self._dtype_doubt(y, loc, dtype)
        if problem:
            raise Unsupported("cannot judge the producer on %s: %s's from_dlpack imported it as %s (%s; the consumer "
                              "checks judge the import)" % (what, self.library, problem, loc.how))
        try:  # the table keeps no import alive: each holds device memory
            self._made[id(y)] = (weakref.ref(y), bytes(values))
        except TypeError:  # an object without weak references
            self._made[id(y)] = ((lambda y=y: y), bytes(values))
        return y

    def _dtype_doubt(self, y, loc, dtype):
        """Where the reader cannot tell the dtype (a buffer; an array interface, whose typestr has
        no bfloat16 or float8): the dtype the import's own export gives, when it is not `dtype`.
        from_dlpack or __dlpack__ changed it, and dlconform cannot tell which; "" otherwise."""
        want = tuple(abi.DTYPES[dtype])
        if isinstance(loc.dtype, tuple) or isinstance(loc.dtype, str) and want[0] in _KINDS:
            return ""
        try:
            _, info = _export(y, self.LEGACY)
        except Unsupported:  # an export that fails: the producer checks judge it
            return ""
        got = tuple(info["dtype"])
        return "" if got == want else (
            "dtype %s by its own export, not %s %s, which its %s cannot tell apart: one of from_dlpack and __dlpack__ "
            "changed it, and dlconform cannot tell which" % (got, dtype, want, "buffer" if loc.dtype is None else
                                                            "__cuda_array_interface__"))

    def expected(self, x):
        entry = self._made.get(id(x))
        if entry is None or entry[0]() is not x:
            raise TargetError("%s: this object was not made by the target" % self.name)
        return entry[1]

    def dtypes(self):
        """The DLPack dtypes (standard and float8) pyref's device arrays have whose import holds
        what it was given."""
        if self._dtypes is None:
            from .dtypes import EXTENDED_FLOATS, STANDARD_DTYPES, itemsize

            ok = []
            for name in STANDARD_DTYPES + EXTENDED_FLOATS:
                if name not in self._pyref().DTYPES:
                    continue
                try:
                    self.make(name, (2,), bytes(range(1, 1 + 2 * itemsize(name))))
                except Exception:  # a dtype the library does not import, or imports as another
                    continue
                ok.append(name)
            self._dtypes = ok
        return list(self._dtypes)

    def _runtime(self):
        from ..kit import cuda

        return cuda.runtime(), cuda.why_not

    def available(self):
        rt, why = self._runtime()
        if rt is None:
            return False, "%s: the CUDA consumer checks observe through a CUDA runtime, which did not load: %s" \
                % (self.name, why())
        return True, ""

    def versions(self):
        out = GenericTarget.versions(self)
        rt, _ = self._runtime()
        out["cuda runtime"] = "%s%s" % (rt.path, " (simulated)" if rt.simulated else "") if rt else "none"
        return out

    def from_dlpack(self, obj, **kw):
        return self.module.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        return keywords_of(self.module.from_dlpack) or frozenset()

    def stream_device(self):
        rt, _ = self._runtime()
        if rt is None:
            return None
        if self._device is None or self._device.runtime is not rt:
            self._device = GenericCudaDevice(self, rt)
            self._device.export_reader_problem()  # before any check's import (see __init__)
        return self._device


class GenericCudaDevice(UnnamedStreams, CudaStreamDevice):
    """The device of a generic CUDA library: no stream of its own that dlconform knows (no
    current stream, no stream context, no producer stream); its tensors are the target's
    imports (make), read by read_import and read_ready."""

    #: the ready import the export reader is tried on first: float32, this shape
    PROBE_SHAPE = (16, 16)

    def __init__(self, target, runtime):
        from .. import pyref

        self._target, self._pyref, self.runtime = target, pyref, runtime
        self.name = "%s's imports of CUDA memory" % target.library
        self._export_problem = None  # why the export reader cannot be trusted ("" once it is), once asked
        #: whether the library's import of ready device memory exports itself (__dlpack__), as the
        #: probe of export_reader_problem() found
        self.imports_export = False

    def make(self, dtype, shape, values):
        if "producer" not in self._target.roles:
            raise Unsupported("%s's imports do not export themselves: no producer to judge" % self._target.name)
        return self._target.make(dtype, shape, values)

    def slow_pattern(self, runtime, dtype, shape, values, pattern, cycles):
        raise Unsupported("%s: the stream the library's own work is pending on is unknown to dlconform, so no work "
                          "can be left pending there; an adapter names it (harness/README.md)" % self._target.name)

    def to_host(self, y):
        raise Unsupported("%s: an import is read on the stream the consumer named (read_import)" % self._target.name)

    # ---- reading an import
    def read_import(self, y, stream):
        """(what a reader on the import's stream sees right after from_dlpack, what it holds once
        the device is idle, how it was read). `stream`: the stream the consumer named to the
        producer (DLPack's int; None or -1 when it named none it reads on: the legacy default
        stream is read then). A failed read is a description of the error instead of bytes."""
        loc = self._locate(y, stream)
        first = self._elements(loc.on, loc)
        return first, self._read_idle(loc), loc.how

    def import_dtype(self, y):
        """The dtype the import y holds by its reader: an export's (code, bits, lanes); "bytes"
        for an array interface's untyped typestr (V); None for another typestr's kind (a typed
        result that cannot be the capsule's code); Unsupported from host memory (no dtype)."""
        loc = self._locate(y, self.LEGACY)
        if isinstance(loc.dtype, tuple):
            return loc.dtype
        if isinstance(loc.dtype, str):
            return "bytes" if loc.dtype == "V" else None
        raise Unsupported("%s: its import is read from host memory, which names no dtype" % self._target.name)

    def memory(self, y):
        """(address of the first element, byte count) of the import y, where its reader finds
        it: device memory, or host memory for a consumer that copied to the host."""
        loc = self._locate(y, self.LEGACY)
        return loc.ptr, loc.nbytes

    def import_readonly(self, y):
        """True where the import y says it is read-only (its __cuda_array_interface__'s data
        flag, or READ_ONLY on its own export); None otherwise: whether the library has
        read-only arrays at all is beyond what dlconform can ask."""
        try:
            data = getattr(y, "__cuda_array_interface__", {}).get("data")
            if isinstance(data, (tuple, list)) and len(data) > 1 and data[1]:
                return True
        except Exception:  # noqa: BLE001 - a property that raises says nothing of read-only
            pass
        loc = self._locate(y, self.LEGACY)
        if loc.keep is not None and (inspect(loc.keep).get("flags") or 0) & abi.FLAG_READ_ONLY:
            return True
        return None

    def read_ready(self, y):
        """(the bytes the import y holds once the device is idle, where and how they were read:
        a Located)."""
        loc = self._locate(y, self.LEGACY)
        return self._read_idle(loc), loc

    def _read_idle(self, loc):
        """What loc holds once everything enqueued on the device has run."""
        from ..kit.cuda import CudaError

        try:
            self.runtime.synchronize()
        except CudaError as e:  # a fault of work enqueued earlier, reported by the synchronisation
            raise Unsupported("%s: the device reports an error once its work has run (%s)" % (self._target.name, e))
        return self._elements("host" if loc.on == "host" else None, loc)

    def _elements(self, stream, loc):
        """loc's elements in row-major order, read on `stream` as _read reads: at once where
        they are compact, else the bytes they span at once, gathered on the host by loc.strides
        (LAY-11: a consumer may keep a strided view)."""
        if loc.strides is None:
            return self._read(stream, loc.ptr, loc.nbytes)
        shape = tuple(loc.shape)
        e = layout_extent(len(shape), shape, loc.strides, (1, 8 * loc.itemsize, 1))  # bytes from the first element
        if e["status"] != "ok":
            return "no read: shape %s and strides %s have no extent (%s)" % (shape, loc.strides, e["status"])
        raw = self._read(stream, loc.ptr + e["lo"], e["hi"] - e["lo"])
        if isinstance(raw, str):
            return raw
        host = ctypes.create_string_buffer(raw, len(raw))
        return gather(ctypes.addressof(host) - e["lo"], shape, loc.strides, loc.itemsize)

    def _read(self, stream, ptr, nbytes):
        """nbytes at ptr: device memory read on `stream` (None: at once, the device being idle),
        host memory (stream "host") as it is."""
        from ..kit.cuda import CudaError

        if stream == "host":
            return ctypes.string_at(ptr, nbytes) if nbytes else b""
        try:
            if stream is None:
                return self.runtime.copy_to_host(ptr, nbytes)
            return self.runtime.read_on(stream, ptr, nbytes)
        except CudaError as e:
            return "no read%s: %s" % ("" if stream is None else " on stream %s" % _stream(stream), e)

    def _locate(self, y, stream):
        """Where and how the import y's elements are read (a Located), `stream` being the stream
        the consumer named (DLPack's int; None or -1: it named none it reads on, and the legacy
        default stream is read); Unsupported when no reader can read them."""
        lib = self._target.library
        named = stream if isinstance(stream, int) and stream > 0 else self.LEGACY
        whose = ("the stream the consumer named" if named == stream else
                 "the legacy default stream: the consumer named %s" % ("none" if stream is None else stream))
        cai = _cuda_array_interface(y)
        if cai is not None:
            ptr, shape, itemsize, strides, on, kind = cai
            if strides is not None and any(s % max(itemsize, 1) for s in strides):
                raise Unsupported("%s's __cuda_array_interface__ has strides %s, not whole elements of %d bytes"
                                  % (lib, strides, itemsize))
            how = "read through %s's __cuda_array_interface__ on stream %s (%s)" % (
                lib, _stream(on if on is not None else named), "the stream it names" if on is not None else whose)
            return Located(how, ptr, _count(shape) * itemsize, on if on is not None else named, None, shape,
                           itemsize, kind, _strided(shape, None if strides is None else tuple(
                               s // max(itemsize, 1) for s in strides)))
        d = independent(y)
        if d is not None:
            return Located("read from the host memory %s's import holds (its __array_interface__ or buffer)" % lib,
                           d["ptr"], _count(d["shape"]) * d["itemsize"], "host", None, tuple(d["shape"]),
                           d["itemsize"], None, _strided(d["shape"], d["strides"]))
        problem = self.export_reader_problem()
        if problem:
            raise Unsupported("cannot read %s's import: it has no __cuda_array_interface__ or host memory, and its "
                              "own __dlpack__ does not give back a ready import as given (%s): one of from_dlpack and "
                              "__dlpack__ is wrong, dlconform cannot tell which" % (lib, problem))
        cap, info = _export(y, named)
        shape, dtype = tuple(info["shape"] or ()), tuple(info["dtype"])
        item = abi.itemsize(dtype)
        ptr = (info["data"] or 0) + info["byte_offset"]
        device = tuple(info["device"])
        if device[0] not in (1, 2):
            raise Unsupported("%s's import exports itself on device %s: no reader here" % (lib, device))
        return Located("read through %s's own __dlpack__(stream=%s) %s (%s)" % (
            lib, _stream(named), "in host memory" if device[0] == 1 else "on that stream", whose),
            ptr, _count(shape) * item, "host" if device[0] == 1 else named, cap, shape, item, dtype,
            _strided(shape, info.get("strides")))

    def export_reader_problem(self):
        """Why the import's own export cannot be trusted to read it ("" when it can): a ready
        float32 import of known elements, read back through __dlpack__(stream=1) once the
        device is idle, must hold them (where it reads, not when: judge_import judges the
        ordering). Asked once."""
        if self._export_problem is None:
            available, why = self._pyref.cuda_available()
            if not available:
                self._export_problem = "pyref's device arrays are unavailable: %s" % why
                return self._export_problem
            values = b"".join(struct.pack("<f", float(i % 97)) for i in range(_count(self.PROBE_SHAPE)))
            try:
                y = self._target.from_dlpack(self._target._ready("float32", self.PROBE_SHAPE, values))
                self.imports_export = hasattr(y, "__dlpack__")
                self.runtime.synchronize()
                cap, info = _export(y, self.LEGACY)
                self.runtime.synchronize()
                got = self._read(None, (info["data"] or 0) + info["byte_offset"], len(values)) \
                    if tuple(info["device"])[0] == 2 else read_elements(cap)
                self._export_problem = "" if got == values else (
                    "a ready float32 %s import read back as %s" % (self.PROBE_SHAPE, _differs(got, values)))
            except Unsupported as e:
                self._export_problem = str(e)
            except Exception as e:  # the import or its export failed: this reader cannot read
                self._export_problem = "a ready float32 import or its export raised %s: %s" % (type(e).__name__, e)
        return self._export_problem


class Located(collections.namedtuple("Located", "how ptr nbytes on keep shape itemsize dtype strides",
                                     defaults=(None,))):
    """Where an import's elements are: `how` they are read, the first at `ptr`, `nbytes` of
    them, read on stream `on` (DLPack's int) or "host", `keep` alive meanwhile (an export's
    capsule), and what the reader says they are: `shape`, `itemsize`, `dtype` (DLPack's (code,
    bits, lanes) from an export, the typestr's kind letter from an array interface, None from a
    buffer), `strides` in elements (None: compact row-major)."""


def _cuda_array_interface(y):
    """(address, shape, itemsize, byte strides or None, its stream or None, its kind letter) of
    y's __cuda_array_interface__; None when it has none that can be read."""
    try:
        cai = getattr(y, "__cuda_array_interface__", None)
    except Exception:  # a property that raises: this reader cannot read y
        return None
    if not isinstance(cai, dict) or not isinstance(cai.get("data"), (tuple, list)):
        return None
    try:
        stream, typestr = cai.get("stream"), str(cai["typestr"])
        return (int(cai["data"][0] or 0), tuple(int(n) for n in cai["shape"]), int(typestr[2:]),
                None if cai.get("strides") is None else tuple(int(s) for s in cai["strides"]),
                stream if isinstance(stream, int) and stream > 0 else None, typestr[1:2])
    except (KeyError, TypeError, ValueError):
        return None


def _export(y, stream):
    """(capsule, its fields) of y.__dlpack__(stream=stream) (with max_version where y takes it);
    Unsupported when the export fails."""
    try:
        try:
            cap = y.__dlpack__(stream=stream, max_version=abi.DLPACK_VERSION)
        except TypeError:
            cap = y.__dlpack__(stream=stream)
        info = inspect(cap)
    except Exception as e:  # an export that fails: this reader cannot read y
        raise Unsupported("the import's own __dlpack__(stream=%d) failed (%s: %s)" % (stream, type(e).__name__, e))
    if "data" not in info:
        raise Unsupported("the import's own __dlpack__ gave a capsule that is not a DLPack tensor (%s)"
                          % info["kind"])
    return cap, info


def _strided(shape, strides):
    """`strides` (in elements; None: row-major) as Located keeps them: None where the layout
    is compact row-major (a read copies the bytes at once), else a tuple."""
    shape = tuple(int(n) for n in shape)
    if strides is None or _count(shape) <= 1:
        return None
    strides = tuple(int(s) for s in strides)
    same = all(n <= 1 or s == r for n, s, r in zip(shape, strides, row_major_strides(shape)))
    return None if same else strides


def _stream(s):
    """DLPack's int for a CUDA stream as a message shows it: 1 and 2 as they are, a handle in hex."""
    return str(s) if s in (1, 2) else "%#x" % s


def _count(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


#: DLPack's type codes and the kind letter an array interface's typestr gives them
_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}


def _import_problem(loc, seen, dtype, shape, values):
    """How an import read as `seen` through `loc` differs from the `dtype` `shape` tensor of
    `values` it was made of; "" when it holds what it was given."""
    want = abi.DTYPES[dtype]
    if tuple(loc.shape) != shape:
        return "shape %s, not %s" % (tuple(loc.shape), shape)
    if loc.itemsize != abi.itemsize(want):
        return "elements of %d bytes, not the %d of %s" % (loc.itemsize, abi.itemsize(want), dtype)
    if isinstance(loc.dtype, tuple) and loc.dtype != tuple(want):
        return "dtype %s, not %s %s" % (loc.dtype, dtype, tuple(want))
    if isinstance(loc.dtype, str) and want[0] in _KINDS and loc.dtype != _KINDS[want[0]]:
        return "typestr kind %r, not the %r of %s" % (loc.dtype, _KINDS[want[0]], dtype)
    return "" if seen == values else _differs(seen, values)


def _differs(got, want):
    if isinstance(got, str):
        return got
    return "%s..., not %s..." % (got.hex()[:32], want.hex()[:32])
