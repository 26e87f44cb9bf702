"""STR on CUDA, observed: the producer side of the stream rules on a real (or simulated) CUDA
device.

The target's `stream_device()` gives tensors on a CUDA device (`kind == "cuda"`); kit.cuda's
runtime is the one the checks observe with: `slow_fill` enqueues work of known length and then
a distinctive pattern on the producer's stream, `read_on(S)` is what a consumer reading on S
sees, `host_syncs()` (the simulated runtime's count) says whether anything blocked the host.
On a GPU the same checks run against the real runtime; the simulated one
(DLCONFORM_CUDART=build/cuda/sim/libcudart.so) runs everything it enqueues only when something
waits for it, so a missing wait is always seen.
"""
import pytest

from dlconform import kit
from dlconform.kit import cuda
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")

#: the shape of every tensor here, and the clock cycles of a slow fill (about 0.1 s on a GPU)
SHAPE, SLOW = (64, 64), 200_000_000


def _cuda_device(target):
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


def _filled(dev, rt, pattern):
    """(a float32 tensor on the device, its byte count): its bytes will all be `pattern` once
    the slow work before them is done, which is still pending on the producer's stream."""
    x = dev.slow_pattern(rt, "float32", SHAPE, dty.safe_values("float32", SHAPE), pattern, SLOW)
    return x, 4 * SHAPE[0] * SHAPE[1]  # not dev.memory(x): asking jax for the address waits


def _read(rt, stream, ptr, nbytes):
    """What a reader on `stream` sees of the nbytes at ptr; a description of the runtime's error
    when the read fails (a stream destroyed under the consumer, say)."""
    try:
        return rt.read_on(stream, ptr, nbytes)
    except cuda.CudaError as e:
        return "no read on stream %d: %s" % (stream, e)


def _address(cap):
    """The device address of a capsule's first element."""
    info = pycap.fields(cap)
    return (info["data"] or 0) + info["byte_offset"]


# ---------------------------------------------------------------------------- producer
@pytest.mark.clause("STR-01", "STR-04", "STR-05", "STR-06", "STR-07")
@pytest.mark.role("producer")
def test_consumer_stream_sees_the_producers_data(target, check):
    """For each stream a consumer may name (its own non-blocking stream, 1, 2, None), what that
    stream reads after __dlpack__ returns is the data the producer's stream made: the slow fill's
    pattern. A producer that blocks the host until its stream is done instead of making the
    consumer's stream wait is safe but costly: a warn (seen on the simulated runtime's count)."""
    dev, rt = _cuda_device(target)
    own = dev.new_stream()
    cases = ((own, own, "STR-07"), (1, dev.LEGACY, "STR-05"), (2, dev.PER_THREAD, "STR-06"),
             (None, dev.LEGACY, "STR-04"))
    try:
        for i, (stream, reader, clause) in enumerate(cases):
            pattern = 0xA1 + i
            x, nbytes = _filled(dev, rt, pattern)
            before = rt.host_syncs()
            cap = x.__dlpack__(stream=stream, max_version=pycap.SUITE_VERSION)
            blocked = before is not None and rt.host_syncs() != before
            seen = _read(rt, reader, _address(cap), nbytes)
            what = "stream=%r: what stream %d reads after __dlpack__" % (stream, reader)
            ok = check.equal(seen, bytes([pattern]) * nbytes, clause, what)
            if not ok:
                check.equal(seen, bytes([pattern]) * nbytes, "STR-01", what)
            elif blocked:
                check.warn("STR-01", "stream=%r: the export blocked the host until the producer's stream was done "
                           "instead of making the consumer's stream wait on it (safe, but the host stalls)"
                           % (stream,))
            else:
                check.record("STR-01", "pass")
            del cap, x
    finally:
        if dev.alive(own):
            dev.destroy_stream(own)


@pytest.mark.clause("STR-03")
@pytest.mark.role("producer")
def test_stream_minus_one_neither_waits_nor_blocks(target, check):
    """stream=-1 asks for no synchronisation: __dlpack__ returns with the producer's slow fill
    still pending, and (on the simulated runtime) without blocking the host."""
    dev, rt = _cuda_device(target)
    x, _ = _filled(dev, rt, 0xB7)
    before = rt.host_syncs()
    cap = x.__dlpack__(stream=-1, max_version=pycap.SUITE_VERSION)
    after = rt.host_syncs()
    check.that(dev.pending(rt, x), "STR-03",
               "stream=-1: the producer's stream was done when __dlpack__ returned (it synchronised)")
    if before is not None:
        check.equal(after - before, 0, "STR-03", "stream=-1: host-blocking calls during __dlpack__")
    del cap, x


@pytest.mark.clause("STR-08")
@pytest.mark.feeds("argument")
@pytest.mark.role("producer")
def test_cuda_stream_zero_refused(target, check):
    """stream=0 is ambiguous on CUDA: consumers must not pass it and producers should refuse it
    (BufferError)."""
    dev, rt = _cuda_device(target)
    x, _ = _filled(dev, rt, 0xC3)
    cap, e = kit.attempt(lambda: x.__dlpack__(stream=0, max_version=pycap.SUITE_VERSION))
    if e is not None:  # any clean refusal is what the clause asks
        check.refusal("STR-08", e, "stream=0", verdict="fail")
        return
    del cap
    check.accepted("STR-08", "stream=0 was accepted by a CUDA producer; the array API says producers should reject it")


@pytest.mark.clause("STR-11")
@pytest.mark.role("producer")
def test_cuda_consumer_stream_survives(target, check):
    """The consumer keeps its stream: it is alive after __dlpack__ and after the capsule and the
    tensor die."""
    dev, rt = _cuda_device(target)
    handle = dev.new_stream()
    x, _ = _filled(dev, rt, 0xD2)
    cap = x.__dlpack__(stream=handle, max_version=pycap.SUITE_VERSION)
    alive = check.that(dev.alive(handle), "STR-11", "the consumer's stream %d died in __dlpack__" % handle)
    del cap, x
    tries.settle()
    if alive and check.that(dev.alive(handle), "STR-11", "the consumer's stream died with the capsule or the tensor"):
        dev.destroy_stream(handle)


@pytest.mark.clause("STR-12", "FLG-04", "CPY-05")
@pytest.mark.role("producer")
def test_cuda_to_host_synchronises_and_flags_the_copy(target, check):
    """dl_device=(kDLCPU, 0) of a CUDA tensor: the producer synchronises its stream before the
    copy, so the host memory holds the slow fill's pattern (STR-12), flagged IS_COPIED (FLG-04);
    with copy=False the copy it would need is BufferError (CPY-05)."""
    dev, rt = _cuda_device(target)
    x, nbytes = _filled(dev, rt, 0xE5)
    cap = x.__dlpack__(max_version=pycap.SUITE_VERSION, dl_device=(1, 0))
    info = pycap.fields(cap)
    check.equal(tuple(info["device"]), (1, 0), "STR-12", "device of the dl_device=(1, 0) export")
    check.equal(kit.read_elements(cap), bytes([0xE5]) * nbytes, "STR-12",
                "the host copy (the producer's stream must be synchronised first)")
    check.that((info.get("flags") or 0) & pycap.FLAG_IS_COPIED, "FLG-04", "the host copy lacks IS_COPIED")
    del cap
    cap2, e = kit.attempt(lambda: x.__dlpack__(max_version=pycap.SUITE_VERSION, dl_device=(1, 0), copy=False))
    if e is None:
        check.record("CPY-05", "fail", "dl_device=(1, 0) with copy=False was exported (device %r)"
                     % (tuple(kit.inspect(cap2)["device"]),))
    else:
        check.that(isinstance(e, BufferError), "CPY-05", "dl_device=(1, 0), copy=False raised %s, not BufferError"
                   % tries.describe_exc(e))


@pytest.mark.clause("CPY-04")
@pytest.mark.role("producer")
def test_cuda_copy_is_ordered_on_the_consumer_stream(target, check):
    """copy=True with a consumer stream: the copy is the consumer's on that stream, so what the
    stream reads of it right after __dlpack__ is the producer's data (the slow fill's pattern),
    in new memory flagged IS_COPIED."""
    dev, rt = _cuda_device(target)
    handle = dev.new_stream()
    try:
        x, nbytes = _filled(dev, rt, 0xF4)
        cap = x.__dlpack__(stream=handle, max_version=pycap.SUITE_VERSION, copy=True)
        info = pycap.fields(cap)
        check.that(_address(cap) != dev.memory(x)[0], "CPY-04", "copy=True exported the tensor's own memory")
        check.that((info.get("flags") or 0) & pycap.FLAG_IS_COPIED, "CPY-04", "the copy lacks IS_COPIED")
        check.equal(_read(rt, handle, _address(cap), nbytes), bytes([0xF4]) * nbytes, "CPY-04",
                    "what the consumer's stream reads of the copy")
        del cap, x
    finally:
        tries.settle()
        if dev.alive(handle):
            dev.destroy_stream(handle)


# ---------------------------------------------------------------------------- consumer
class _Recorded:
    """A producer over real device memory (pyref's device array on kit.cuda's runtime) that
    records the keywords of each __dlpack__ call and passes them on."""

    def __init__(self, x):
        self.x, self.calls = x, []

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()

    def __dlpack__(self, *args, **kw):
        self.calls.append(dict(kw, positional=args) if args else dict(kw))
        return self.x.__dlpack__(*args, **kw)


def _pending_pyref_array(rt, pattern):
    """A pyref device array whose bytes will all be `pattern`, behind slow work still pending
    on pyref's own (non-blocking) stream; None when pyref's device arrays are unavailable."""
    from dlconform import pyref

    ok, _ = pyref.cuda_available()
    if not ok:
        return None
    x = pyref.to_device(pyref.frombuffer(dty.safe_values("float32", SHAPE), "float32", SHAPE))
    rt.slow_fill(x.stream, x.ptr, x.nbytes, pattern, SLOW)
    return x


@pytest.mark.clause("STR-01", "STR-05", "STR-07", "STR-08")
@pytest.mark.role("consumer")
def test_cuda_consumer_names_the_stream_it_reads_on(target, check):
    """from_dlpack of a CUDA producer whose data is still pending on its own stream: the
    consumer names a stream (never 0, STR-08), the one it will read on, its current stream (1
    for the legacy default stream, STR-05; a side stream's handle inside a stream context,
    STR-07), and what it then reads of the import is the producer's final data (STR-01).
    pyref's device arrays are the producer: they make the named stream wait on their own."""
    dev, rt = _cuda_device(target)
    contexts = [(None, dev.current_stream())]
    side = dev.side_stream()
    if side is not None:
        contexts.append(side)
    for i, (context, expected) in enumerate(contexts):
        x = _pending_pyref_array(rt, 0x3C + i)
        if x is None:
            raise kit.Unsupported("pyref's device arrays are unavailable on this runtime")
        p = _Recorded(x)
        where = "from_dlpack %s" % ("on the current stream" if context is None
                                    else "inside a side-stream context (stream %d)" % expected)
        if context is None:
            y, e = kit.attempt(lambda: target.from_dlpack(p))
        else:
            with context:
                y, e = kit.attempt(lambda: target.from_dlpack(p))
        if e is not None:  # a consumer may refuse device memory it cannot use (API-04)
            raise kit.Unsupported("%s: the consumer does not import CUDA tensors (%s)" % (where, tries.describe_exc(e)))
        streams = [c.get("stream") for c in p.calls]
        check.that(bool(streams), "STR-01", "%s: the consumer never called __dlpack__" % where)
        for stream in streams:
            check.that(stream != 0, "STR-08", "%s: the consumer passed stream=0" % where)
            if expected is not None and stream is not None:
                clause = "STR-05" if expected == dev.LEGACY else "STR-07"
                check.equal(stream, expected, clause, "%s: the stream passed (the consumer's current stream is %d)"
                            % (where, expected))
        seen = dev.to_host(y) if context is None else _in(context, lambda: dev.to_host(y))
        if check.equal(seen, bytes([0x3C + i]) * (4 * SHAPE[0] * SHAPE[1]), "STR-01",
                       "%s (streams passed: %s): what the consumer reads of the import" % (where, streams)):
            check.record("STR-01", "pass", "%s: the consumer passed stream %s and read the final data"
                         % (where, " then ".join(map(repr, streams))))
        y = p = x = None  # released before the next round
        tries.settle()


def _in(context, fn):
    with context:
        return fn()
