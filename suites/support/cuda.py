"""CUDA observed from the suites (test_cuda_stream.py): a target's CUDA stream device and the
runtime the checks observe with (kit.cuda's: the real one, or the simulated one that
DLCONFORM_CUDART names), tensors whose data is still pending behind slow work, reads on a
stream, the library's side-stream context, and a producer over real device memory that
records what a consumer asks of it."""
import contextlib
import ctypes

from dlconform import kit
from dlconform.kit import abi, cuda

from .attempts import Attempt, asks_versioned, copy_breach
from .capsules import fields
from .dtypes import safe_values
from .imports import views_original

#: the shape of every tensor of the CUDA checks, and the clock cycles of a slow fill (about
#: 0.1 s on a GPU)
SHAPE, SLOW = (64, 64), 200_000_000
#: the bytes of a float32 SHAPE tensor
NBYTES = 4 * SHAPE[0] * SHAPE[1]


def device(target):
    """(the target's CUDA stream device, kit.cuda's runtime); Unsupported when the target has
    no CUDA device or no runtime loads."""
    dev = target.stream_device()
    if dev is None or getattr(dev, "kind", None) != "cuda":
        raise kit.Unsupported("the target has no CUDA device (its stream_device() is %s)"
                              % ("none" if dev is None else getattr(dev, "name", type(dev).__name__)))
    rt = cuda.runtime()
    if rt is None:
        raise kit.Unsupported("no CUDA runtime: %s" % cuda.why_not())
    return dev, rt


def filled(dev, rt, pattern):
    """A float32 SHAPE tensor on the device whose NBYTES will all be `pattern` once the slow
    work before them, still pending on the producer's stream, is done."""
    # NBYTES, not dev.memory(x): asking jax for the address waits
    return dev.slow_pattern(rt, "float32", SHAPE, safe_values("float32", SHAPE), pattern, SLOW)


def read(rt, stream, ptr, nbytes):
    """What a reader on `stream` sees of the nbytes at ptr; a description of the runtime's error
    when the read fails (a stream destroyed under the consumer, say)."""
    try:
        return rt.read_on(stream, ptr, nbytes)
    except cuda.CudaError as e:
        return "no read on stream %d: %s" % (stream, e)


def judge_import(check, got, pattern, clause, what, unordered=None):
    """Judges `got`, a device's read_import of a consumer's import, on `clause`: it must hold the
    producer's final data, NBYTES of `pattern`. Where the device also read it once the device was
    idle (a generic consumer's): stale on the import's stream but final once idle means the read
    was not ordered after the import's work, by the consumer or by the reader the library gave,
    which dlconform cannot separate (the clause's unsupported), unless the consumer left nothing
    a reader could be ordered after (`unordered`, saying how: it asked for no synchronisation
    and did not synchronise itself), which is its breach; stale even once idle, that the import
    holds the old data (the clause's breach). True when it holds the final data."""
    seen, idle, how = got
    final = bytes([pattern]) * NBYTES
    what = "%s (%s)" % (what, how) if how else what
    if seen != final and idle == final and unordered:
        return check.equal(seen, final, clause, "%s; %s, and returned while the producer's data was still pending"
                           % (what, unordered))
    if seen != final and idle == final:
        check.record(clause, "unsupported", "%s: the read on the import's stream saw %s, not the producer's final "
                     "data, which the import held once the device was idle; the read was not ordered after the "
                     "import's work: either from_dlpack did not order it after the stream it named, or the reader "
                     "the library offers names the wrong stream, and dlconform cannot tell which"
                     % (what, _bytes(seen)))
        return False
    if idle is not None and seen != final:
        what += "; once the device was idle it held %s, still not the final data: the consumer took the data " \
                "before the producer's stream was done" % _bytes(idle)
    return check.equal(seen, final, clause, what)


def _bytes(b):
    return b if isinstance(b, str) else "%s..." % b.hex()[:24]


def address(cap):
    """The device address of a capsule's first element (data + byte_offset; NULL data as 0)."""
    info = fields(cap)
    return (info["data"] or 0) + info["byte_offset"]


@contextlib.contextmanager
def producing(dev):
    """The producer's side of a check, inside a side-stream context where the library has one
    (torch, cupy, pyref): its current stream, where the slow work goes and which its export
    must order the consumer after, is then a non-blocking stream of its own. On the legacy
    default stream a read on stream 1 would wait for it implicitly and hide a missing wait."""
    side = dev.side_stream()
    if side is None:
        yield
    else:
        with side[0]:
            yield


class Recorded:
    """A producer over real device memory (pyref's device array on kit.cuda's runtime, or any
    library's device tensor) that records the keywords of each __dlpack__ call and passes them
    on; `exc`, what its __dlpack__ raised last (None when it did not)."""

    def __init__(self, x):
        self.x, self.calls, self.exc = x, [], None

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, *args, **kw):
        self.calls.append(dict(kw, positional=args) if args else dict(kw))
        try:
            return self.x.__dlpack__(*args, **kw)
        except Exception as e:
            self.exc = e
            raise


class DeviceBuffer:
    """`data` copied to device memory of its own (synchronously: ready), freed when this dies;
    the owner a forge keeps alive with its structs (kit.Forge(data=buf.ptr, owner=buf))."""

    def __init__(self, rt, data):
        self._rt, self.nbytes = rt, len(data)
        self.ptr = rt.malloc(max(self.nbytes, 1))
        rt.copy_to_device(self.ptr, data)

    def __del__(self):
        if self.ptr:
            self._rt.free(self.ptr)
            self.ptr = 0


class DeviceForge(kit.Forge):
    """A kit.Forge on (kDLCUDA, 0) over a DeviceBuffer of `values`, the compact elements of its
    layout: expected_elements() gives them, never reading device memory from the host."""

    def __init__(self, rt, values, **forge_kwargs):
        self._values = bytes(values)
        buf = DeviceBuffer(rt, self._values)
        super().__init__(data=buf.ptr, device=(2, 0), owner=buf, **forge_kwargs)

    def expected_elements(self):
        return self._values


def device_forges(rt, values, at=0, **forge_kwargs):
    """kit.forges(...) of capsules on (kDLCUDA, 0) over a DeviceBuffer of `values` (data `at`
    bytes into it), with counted deleters: what a CUDA producer with ready data hands out."""
    buf = DeviceBuffer(rt, values)
    return kit.forges(data=buf.ptr + at, device=(2, 0), owner=buf, **forge_kwargs)


class DeviceProducer(kit.RecordingProducer):
    """A CUDA producer over ready device memory of its own, serving what a correct producer
    serves (the consumer side of test_cuda_keywords.py): its export views a DeviceBuffer of
    `values` (`original`); copy=True gives a copy in a second one, IS_COPIED (CPY-01, FLG-04);
    dl_device=(kDLCPU, 0) a copy in host memory, IS_COPIED (DEV-06), refused with BufferError
    when copy=False (CPY-05) or without `host_copies` (CPY-08's case); any other device is
    BufferError (DEV-05). The copies are made before any request, so they are ready too.
    `legacy_only`: an old producer whose __dlpack__ takes the stream alone (VER-06), and
    copies nothing."""

    def __init__(self, rt, values, *, host_copies=True, flags=0, legacy_only=False, **forge_kwargs):
        self.values, self.host_copies = bytes(values), host_copies
        # explicit row-major strides: a versioned capsule of ndim > 0 must not have NULL ones (LAY-06)
        forge_kwargs.setdefault("strides", kit.row_major(forge_kwargs.get("shape", (4,))) or None)
        copied = dict(forge_kwargs, flags=flags | kit.FLAG_IS_COPIED)
        self.original = device_forges(rt, self.values, flags=flags, **forge_kwargs)
        self.copies = device_forges(rt, self.values, **copied)
        host = ctypes.create_string_buffer(self.values, max(len(self.values), 1))
        self.host = kit.forges(data=ctypes.addressof(host), owner=host, **copied)
        super().__init__(self.original, device=(2, 0), keep=True, legacy_only=legacy_only)

    def expected_elements(self):
        return self.values

    def __dlpack__(self, *args, **kw):
        dl_device = kw.get("dl_device")
        to_host = dl_device is not None and tuple(dl_device) == (1, 0)
        if self.legacy_only or (not to_host and kw.get("copy") is not True):
            return super().__dlpack__(*args, **kw)
        self._record(args, kw)
        if to_host and not self.host_copies:
            raise BufferError("this producer's memory cannot reach the host (dl_device=(1, 0) refused)")
        if to_host and kw.get("copy") is False:
            raise BufferError("dl_device=(1, 0) needs a copy but copy=False (CPY-05)")
        mv = kw.get("max_version")
        versioned = isinstance(mv, tuple) and len(mv) == 2 and mv[0] >= 1
        return self._hand_out((self.host if to_host else self.copies)(versioned=versioned).capsule())


class DeviceResults:
    """A consumer's imports of device memory as support/imports.py's judges read them: their
    elements the library's way (read_ready), their address (the device's memory()), whether
    they are read-only (the device's import_readonly()); and whether the consumer's plain
    import of ready device memory copies (copies_always, copy_breach: attempts.py's readings
    of the host's, for device memory)."""

    memory = "CUDA"

    def __init__(self, target, dev, rt):
        self.target, self.dev, self.rt = target, dev, rt
        self._plain = self._lifetime = None

    def elements(self, att):
        return read_ready(self.dev, att.result, att.producer)[0]

    def address(self, att):
        try:
            return int(self.dev.memory(att.result)[0])
        except kit.Unsupported:
            raise
        except Exception as e:  # noqa: BLE001 - the adapter's reading of the library's result
            raise kit.Unsupported("%s gives no address for it (%s: %s)" % (self.dev.name, type(e).__name__, e)) from e

    def readonly(self, att):
        return self.dev.import_readonly(att.result)

    def _plain_import(self):
        """(the Attempt of the consumer's plain import of a DeviceProducer of float32 (2, 3)
        elements, that producer)."""
        p = DeviceProducer(self.rt, safe_values("float32", (2, 3)), dtype="float32", shape=(2, 3))
        return Attempt(self.target, p), p

    def copies_always(self):
        """Whether the consumer's plain import of ready device memory lies outside it."""
        if self._plain is None:
            att, p = self._plain_import()
            try:
                self._plain = att.exc is None and not views_original(p, self.address(att))
            except kit.Unsupported:
                self._plain = False
            att.settle()
        return self._plain

    def copy_breach(self):
        return copy_breach(self.target, copies=self.copies_always())

    def plain_lifetime(self):
        """lifetime() of the consumer's plain import of ready device memory (None when it
        refuses it): what it does with every CUDA capsule, which the checks of other clauses
        compare with (attempts.departures)."""
        if self._lifetime is None:
            att, _ = self._plain_import()
            self._lifetime = (att.lifetime() if att.exc is None else None,)
            if att.exc is not None:
                att.drop_capsules()
        return self._lifetime[0]

    def require_versioned(self):
        """Unsupported unless the consumer asks a producer of device memory for versioned
        capsules (max_version (1, 0) or above) on a plain import."""
        att, p = self._plain_import()
        att.settle()
        asked = [c.get("max_version") for c in p.calls]
        if not asks_versioned(asked):
            raise kit.Unsupported("the consumer does not ask a producer of CUDA memory for versioned capsules "
                                  "(max_version %r): it imports legacy DLManagedTensor only" % (asked,))


def host_elements(data, first, shape, strides, itemsize):
    """The elements of the layout whose first element is `first` bytes into `data`, in
    row-major order (strides in elements): what an import of it holds."""
    if 0 in shape:
        return b""
    host = ctypes.create_string_buffer(bytes(data), len(data))
    return kit.gather(ctypes.addressof(host) + first, shape, strides, itemsize)


def read_ready(dev, y, p):
    """(the bytes the import y holds, how they were read): read the library's way
    (dev.read_import) on the stream the consumer named to `p` (a recording producer), once the
    device is idle where the device reads that way too (the data was ready: the order of the
    reads is not what the checks that call this judge). kit.Unsupported, saying why, when the
    device has no reader for it or its reader raised."""
    streams = [c.get("stream") for c in p.calls]
    try:
        seen, idle, how = dev.read_import(y, streams[-1] if streams else None)
    except kit.Unsupported as e:
        raise kit.Unsupported("it cannot be read here: %s" % e) from e
    except Exception as e:  # noqa: BLE001 - the library's own reading of its import, or the adapter's
        raise kit.Unsupported("reading it back the library's way raised %s: %s; this check judges what the import "
                              "holds, not that reader" % (type(e).__name__, e)) from e
    return (seen if idle is None else idle), how


def read_back(check, dev, att, p, clause, what):
    """read_ready() of the import att.result; (None, None), with `clause` unsupported and why,
    when it cannot be read."""
    try:
        return read_ready(dev, att.result, p)
    except kit.Unsupported as e:
        check.record(clause, "unsupported", "%s was imported, but %s" % (what, e))
        return None, None


def pending_pyref_array(rt, pattern):
    """A pyref device array whose bytes will all be `pattern`, behind slow work still pending
    on pyref's own (non-blocking) stream; None when pyref's device arrays are unavailable."""
    from dlconform import pyref

    ok, _ = pyref.cuda_available()
    if not ok:
        return None
    x = pyref.to_device(pyref.frombuffer(safe_values("float32", SHAPE), "float32", SHAPE))
    rt.slow_fill(x.stream, x.ptr, x.nbytes, pattern, SLOW)
    return x


def table(x):
    """The exchange table of x's type, as a consumer finds it (kit.exchange_api: on the type,
    XAPI-04; a capsule of the right name or the v1.2 int; major 1); Unsupported when the
    library offers none or one no consumer may use (test_exchange_api.py judges why)."""
    info = kit.exchange_api(x)
    if info is None:
        raise kit.Unsupported("%s has no __dlpack_c_exchange_api__: the C exchange API is optional (XAPI-01)"
                              % type(x).__name__)
    if not info["functions"]:
        raise kit.Unsupported("the exchange table of %s is unusable (form %s, version %r): test_exchange_api.py "
                              "judges it" % (type(x).__name__, info["form"], info["version"]))
    return info


def as_dlpack_stream(raw):
    """A cudaStream_t (what current_work_stream writes) as DLPack's int: NULL, the runtime
    API's default stream, is the legacy default stream, 1; cudaStreamLegacy (1) and
    cudaStreamPerThread (2) are themselves."""
    return raw or 1


_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
_WORK_STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p))
_SET_ERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
_ALLOCATOR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                              _SET_ERROR)


class TableProducer:
    """A producer over real device memory that offers an exchange table on CUDA, for the
    consumer's side of XAPI-19: `x` is a pyref device array whose data is pending on its own
    stream. The table (on a type of this producer's own, XAPI-01, static for the process,
    XAPI-05) hands out x's export without synchronising (managed_tensor_from_py_object_no_sync:
    x.__dlpack__(stream=-1)), and current_work_stream names x's stream, where the data is
    pending: a consumer that reads there (XAPI-19) reads the final data. The allocator fails
    through SetError; to_py and dltensor_from are NULL (XAPI-11 allows the latter; the import
    needs neither). __dlpack__ passes on to x: the route of a consumer that does not use the
    table. Every call is recorded (`handed_out`, `asked`, `dlpack_calls`); close() lets x go."""

    def __init__(self, x):
        self.x, self.handed_out, self.asked, self.dlpack_calls = x, 0, [], []
        holder = self._holder = [self]

        def from_py(obj, out):
            me = holder[0]
            handle = kit.consume(me.x.__dlpack__(stream=-1, max_version=abi.DLPACK_VERSION))
            handle.steal()  # the consumer owns it now, and calls its deleter
            out[0] = handle.pointer
            me.handed_out += 1
            return 0

        def work_stream(device_type, device_id, out):
            me = holder[0]
            me.asked.append((device_type, device_id))
            out[0] = me.x.stream if (device_type, device_id) == (2, 0) else None
            return 0

        def allocator(prototype, out, ctx, set_error):
            out[0] = None
            if set_error:
                set_error(ctx, b"BufferError", b"this producer allocates nothing")
            return -1

        functions = {"managed_tensor_allocator": _ALLOCATOR(allocator),
                     "managed_tensor_from_py_object_no_sync": _FROM_PY(from_py),
                     "current_work_stream": _WORK_STREAM(work_stream)}
        table = abi.DLPackExchangeAPI(header=abi.DLPackExchangeAPIHeader(version=abi.DLPackVersion(1, 3)),
                                      **{n: ctypes.cast(f, ctypes.c_void_p).value for n, f in functions.items()})
        name = ctypes.create_string_buffer(b"dlpack_exchange_api")
        kit.keep_forever((table, name, functions))  # a consumer may cache the table per type
        capsule = abi.capsule_new(ctypes.addressof(table), ctypes.cast(name, ctypes.c_char_p),
                                  ctypes.cast(None, abi.CapsuleDestructor))
        self.__class__ = type("TableProducer", (TableProducer,), {"__dlpack_c_exchange_api__": capsule})

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, *args, **kw):
        self.dlpack_calls.append(dict(kw, positional=args) if args else dict(kw))
        return self.x.__dlpack__(*args, **kw)

    def close(self):
        """Lets go of x (the table's functions, kept for the process, hold only this)."""
        self._holder[0] = None
        self.x = None
