"""STR on CUDA, observed: both sides of the stream rules on a real (or simulated) CUDA device.

The target's `stream_device()` gives tensors on a CUDA device (`kind == "cuda"`); kit.cuda's
runtime is the one the checks observe with: `slow_fill` enqueues work of known length and then
a distinctive pattern on the producer's stream, `read_on(S)` is what a consumer reading on S
sees, `host_syncs()` (the simulated runtime's count) says whether anything blocked the host.
On a GPU the same checks run against the real runtime; the simulated one
(DLCONFORM_CUDART=build/cuda/sim/libcudart.so) runs everything it enqueues only when something
waits for it, so a missing wait is always seen. The consumer side imports a producer over real
device memory (pyref's device arrays, their data still pending on their own stream) and sees
which stream the consumer names and what it reads.
"""
import contextlib

import pytest

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import cuda as cu
from support import dtypes as dty
from support import readings as rd
from support.marks import consumer, producer

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")


# ---------------------------------------------------------------------------- producer
#: a stream left out of the call: the array API's default, None (STR-04)
OMITTED = type("Omitted", (), {"__repr__": lambda self: "omitted (the default, None)"})()


def _export(check, x, stream, clause, **kw):
    """x.__dlpack__(stream=stream, ...) (no stream keyword for OMITTED), or None when the
    producer refused the stream: cleanly, as STR-13 lets it refuse any stream but None (the case
    is `unsupported` on `clause`), or not (the clause's fail)."""
    if stream is not OMITTED:
        kw["stream"] = stream
    cap, e = kit.attempt(lambda: x.__dlpack__(max_version=pycap.SUITE_VERSION, **kw))
    if e is None:
        return cap
    why = check.unclean(e)
    if stream in (None, OMITTED) or why is not None:
        check.record(clause, "fail", "stream=%r raised %s" % (stream, why or tries.describe_exc(e)))
    else:
        check.record(clause, "unsupported", "stream=%r was refused (%s); STR-13: a producer need not accept any "
                     "stream but None" % (stream, tries.describe_exc(e)))
    return None


@producer("STR-01", "STR-04", "STR-05", "STR-06", "STR-07")
def test_consumer_stream_sees_the_producers_data(target, check):
    """For each stream a consumer may name (its own non-blocking stream, 1, 2, None, and none at
    all: the array API's default is None), what that stream reads after __dlpack__ returns is the
    data the producer's stream made: the slow fill's pattern. A producer that blocks the host
    until its stream is done instead of making the consumer's stream wait is safe but costly: a
    warn (the simulated runtime counts host blocks; on a GPU, the slow work was pending before
    the call and is done after it)."""
    dev, rt = cu.device(target)
    own = dev.new_stream()
    cases = ((own, own, "STR-07"), (1, dev.LEGACY, "STR-05"), (2, dev.PER_THREAD, "STR-06"),
             (None, dev.LEGACY, "STR-04"), (OMITTED, dev.LEGACY, "STR-04"))
    try:
        for i, (stream, reader, clause) in enumerate(cases):
            pattern = 0xA1 + i
            with cu.producing(dev):
                x = cu.filled(dev, rt, pattern)
                before, pending = rt.host_syncs(), dev.pending(rt, x)
                cap = _export(check, x, stream, clause)
                if before is not None:
                    blocked = rt.host_syncs() != before
                else:
                    blocked = pending and not dev.pending(rt, x)
            if cap is None:
                continue
            seen = cu.read(rt, reader, cu.address(cap), cu.NBYTES)
            what = "stream=%r: what stream %d reads after __dlpack__" % (stream, reader)
            ok = check.equal(seen, bytes([pattern]) * cu.NBYTES, clause, what)
            if not ok:
                check.equal(seen, bytes([pattern]) * cu.NBYTES, "STR-01", what)
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


@producer("STR-03")
def test_stream_minus_one_neither_waits_nor_blocks(target, check):
    """stream=-1 asks for no synchronisation: __dlpack__ returns with the producer's slow fill
    still pending, and (on the simulated runtime) without blocking the host."""
    dev, rt = cu.device(target)
    with cu.producing(dev):
        x = cu.filled(dev, rt, 0xB7)
        before = rt.host_syncs()
        cap = _export(check, x, -1, "STR-03")
        after = rt.host_syncs()
        if cap is None:
            return
        check.that(dev.pending(rt, x), "STR-03",
                   "stream=-1: the producer's stream was done when __dlpack__ returned (it synchronised)")
    if before is not None:
        check.equal(after - before, 0, "STR-03", "stream=-1: host-blocking calls during __dlpack__")
    del cap, x


@producer("STR-08", feeds="argument")
def test_cuda_stream_zero_refused(target, check):
    """stream=0 is ambiguous on CUDA: consumers must not pass it and producers should refuse it
    (BufferError)."""
    dev, rt = cu.device(target)
    with cu.producing(dev):  # a refusal needs no pending work
        x = dev.make("float32", cu.SHAPE, dty.safe_values("float32", cu.SHAPE))
        cap, e = kit.attempt(lambda: x.__dlpack__(stream=0, max_version=pycap.SUITE_VERSION))
    if e is not None:  # any clean refusal is what the clause asks
        check.refusal("STR-08", e, "stream=0", verdict="fail")
        return
    del cap
    check.accepted("STR-08", "stream=0 was accepted by a CUDA producer; the array API says producers should reject it")


#: stream values STR-02 rules out on CUDA: not ints (an error by its words), and ints that name
#: no stream (below -1, past a 64-bit handle); one case each, so a crash names its value
BAD_CUDA_STREAMS = ("1", 1.5, -2, 1 << 64)


@producer("STR-02", feeds="argument")
@pytest.mark.parametrize("stream", BAD_CUDA_STREAMS, ids=("str", "float", "minus-2", "2**64"))
def test_cuda_stream_of_wrong_type_or_range(target, check, stream):
    """On a CUDA tensor, where the stream becomes a cudaStream_t the consumer's stream is made
    to wait on: a value that is not an int is an error by STR-02's words (a clean refusal
    passes, acceptance fails); an int below -1 or past 64 bits names no stream (acceptance is
    a warn: unspecified); dying on it is a crash."""
    dev, rt = cu.device(target)
    with cu.producing(dev):
        x = dev.make("float32", cu.SHAPE, dty.safe_values("float32", cu.SHAPE))
        cap, err = kit.attempt(lambda: x.__dlpack__(stream=stream, max_version=pycap.SUITE_VERSION))
    if cap is None:
        check.refusal("STR-02", err, "stream=%r" % (stream,))
    elif isinstance(stream, int):
        check.accepted("STR-02", "stream=%r was accepted by a CUDA producer: it names no CUDA stream" % stream)
    else:
        check.must_refuse("STR-02", "stream=%r (%s) was accepted" % (stream, type(stream).__name__),
                          rd.REFUSAL_RULES["STR-02"])


@producer("STR-11")
def test_cuda_consumer_stream_survives(target, check):
    """The consumer keeps its stream: it is alive after __dlpack__ and after the capsule and the
    tensor die."""
    dev, rt = cu.device(target)
    handle = dev.new_stream()
    with cu.producing(dev):
        x = cu.filled(dev, rt, 0xD2)
        cap = _export(check, x, handle, "STR-11")
    if cap is None:
        dev.destroy_stream(handle)
        return
    alive = check.that(dev.alive(handle), "STR-11", "the consumer's stream %d died in __dlpack__" % handle)
    del cap, x
    tries.settle()
    if alive and check.that(dev.alive(handle), "STR-11", "the consumer's stream died with the capsule or the tensor"):
        dev.destroy_stream(handle)


@producer("STR-12", "FLG-04", "CPY-05")
def test_cuda_to_host_synchronises_and_flags_the_copy(target, check):
    """dl_device=(kDLCPU, 0) of a CUDA tensor: the producer synchronises its stream before the
    copy, so the host memory holds the slow fill's pattern (STR-12), flagged IS_COPIED (FLG-04);
    with copy=False the copy it would need is BufferError (CPY-05)."""
    dev, rt = cu.device(target)
    with cu.producing(dev):
        x = cu.filled(dev, rt, 0xE5)
        cap = x.__dlpack__(max_version=pycap.SUITE_VERSION, dl_device=(1, 0))
        info = pycap.fields(cap)
        check.equal(tuple(info["device"]), (1, 0), "STR-12", "device of the dl_device=(1, 0) export")
        # the copy's layout is the layout checks' (LAY-05, LAY-10): one that spans more than the
        # copy's NBYTES would be read past its memory, and one the plain export shares is not STR-12's
        span = kit.extent(cap)
        if span["status"] != "ok" or span["hi"] - span["lo"] > cu.NBYTES:
            check.record("STR-12", "unsupported", "the host copy's layout (extent %s, %s bytes) does not fit the %d "
                         "bytes of its elements: the layout checks judge it, its values are not read"
                         % (span["status"], span["hi"] - span["lo"], cu.NBYTES))
        else:
            rd.copy_values(check, "STR-12", cap, bytes([0xE5]) * cu.NBYTES,
                           "the host copy (the producer's stream must be synchronised first)",
                           plain=lambda: x.__dlpack__(max_version=pycap.SUITE_VERSION))
        check.that((info.get("flags") or 0) & pycap.FLAG_IS_COPIED, "FLG-04", "the host copy lacks IS_COPIED")
        del cap
        cap2, e = kit.attempt(lambda: x.__dlpack__(max_version=pycap.SUITE_VERSION, dl_device=(1, 0), copy=False))
    if e is None:
        check.record("CPY-05", "fail", "dl_device=(1, 0) with copy=False was exported (device %r)"
                     % (tuple(kit.inspect(cap2)["device"]),))
    else:
        check.that(isinstance(e, BufferError), "CPY-05", "dl_device=(1, 0), copy=False raised %s, not BufferError"
                   % tries.describe_exc(e))


@producer("CPY-04", "CPY-01", "FLG-04")
def test_cuda_copy_is_ordered_on_the_consumer_stream(target, check):
    """copy=True with a consumer stream: a copy (new memory, CPY-01) flagged IS_COPIED (FLG-04),
    made on the consumer's stream, so what that stream reads of it right after __dlpack__ is the
    producer's data, the slow fill's pattern (CPY-04). A producer that cannot copy on the device
    and refuses with BufferError sits between CPY-01 and ERR-01 (warn, as on the CPU)."""
    dev, rt = cu.device(target)
    handle = dev.new_stream()
    try:
        with cu.producing(dev):
            x = cu.filled(dev, rt, 0xF4)
            cap, e = kit.attempt(lambda: x.__dlpack__(stream=handle, max_version=pycap.SUITE_VERSION, copy=True))
        if e is not None:
            check.record("CPY-01", *rd.copy_refused(e))
            check.record("CPY-04", "unsupported", "no copy to order: copy=True raised %s" % tries.describe_exc(e))
            return
        info = pycap.fields(cap)
        check.that(cu.address(cap) != dev.memory(x)[0], "CPY-01", "copy=True exported the tensor's own memory")
        check.that((info.get("flags") or 0) & pycap.FLAG_IS_COPIED, "FLG-04", "the copy=True export lacks IS_COPIED")
        check.equal(cu.read(rt, handle, cu.address(cap), cu.NBYTES), bytes([0xF4]) * cu.NBYTES, "CPY-04",
                    "what the consumer's stream reads of the copy")
        cap = x = None
    finally:
        tries.settle()
        if dev.alive(handle):
            dev.destroy_stream(handle)


# ---------------------------------------------------------------------------- consumer


#: the clause of the stream a consumer passes, by its current stream (DLPack's int): 1 the legacy
#: default stream, 2 the per-thread default stream, a handle above
_STREAM_CLAUSE = {1: "STR-05", 2: "STR-06"}


@consumer("STR-01", "STR-05", "STR-06", "STR-07", "STR-08")
def test_cuda_consumer_names_the_stream_it_reads_on(target, check):
    """from_dlpack of a CUDA producer whose data is still pending on its own stream: the
    consumer names a stream (never 0, STR-08), the one it will read on, its current stream (1
    for the legacy default stream, STR-05; 2 inside a per-thread default stream context,
    STR-06; a side stream's handle inside a stream context, STR-07), and what it then reads of
    the import is the producer's final data (STR-01). pyref's device arrays are the producer:
    they make the named stream wait on their own."""
    dev, rt = cu.device(target)
    contexts = [(None, dev.current_stream(), "on the current stream")]
    side, per_thread = dev.side_stream(), dev.per_thread_stream()
    if side is not None:
        contexts.append(side + ("inside a side-stream context (stream %d)" % side[1],))
    if per_thread is not None:
        contexts.append(per_thread + ("inside a per-thread default stream context (stream %d)" % per_thread[1],))
    compared = set()  # the clauses of the stream passed that a context compared
    for i, (context, expected, where) in enumerate(contexts):
        x = cu.pending_pyref_array(rt, 0x3C + i)
        if x is None:
            raise kit.Unsupported("pyref's device arrays are unavailable on this runtime")
        p = cu.Recorded(x)
        where = "from_dlpack " + where
        with context or contextlib.nullcontext():  # the import and the read, on one stream
            y, e = kit.attempt(lambda: target.from_dlpack(p))
            streams = [c.get("stream") for c in p.calls]
            got, unreadable = None, None
            if e is None:
                try:
                    got = dev.read_import(y, streams[-1] if streams else None)
                except kit.Unsupported as why:  # STR-01's alone: the streams passed are judged below
                    unreadable = str(why)
        for stream in streams:
            check.that(stream != 0, "STR-08", "%s: the consumer passed stream=0" % where)
            if stream is None:  # a CUDA producer reads it as the legacy default stream (STR-04)
                check.warn("STR-14", "%s: the consumer passed stream=None; STR-14 (SHOULD): for the legacy default "
                           "stream it sends 1 on CUDA, not None" % where)
            if expected is not None and stream not in (-1, 0) and (stream is not None or expected != 1):
                # 0: STR-08; -1: the read decides; None names the legacy stream, not a context's
                clause = _STREAM_CLAUSE.get(expected, "STR-07")
                compared.add(clause)
                check.equal(1 if stream is None else stream, expected, clause, "%s: the stream passed%s (the "
                            "consumer's current stream is %d)" % (
                                where, " (None: the legacy default stream, 1, to a CUDA producer: STR-04)"
                                if stream is None else "", expected))
        if e is not None:
            if check.found:  # the producer refused a stream it was wrongly given
                check.record("STR-01", "unsupported", "%s: nothing was imported to read (%s)"
                             % (where, tries.describe_exc(e)))
                continue
            # a consumer may refuse device memory it cannot use (API-04)
            raise kit.Unsupported("%s: the consumer does not import CUDA tensors (%s)" % (where, tries.describe_exc(e)))
        check.that(bool(streams), "STR-01", "%s: the consumer never called __dlpack__" % where)
        minus_one = "it passed stream=-1 (no synchronisation), which leaves synchronising to the consumer"
        if unreadable is not None:
            check.record("STR-01", "unsupported", "%s: %s" % (where, unreadable))
        elif cu.judge_import(check, got, 0x3C + i, "STR-01",
                             "%s (streams passed: %s): what the consumer reads of the import" % (where, streams),
                             unordered=minus_one if streams and streams[-1] == -1 else None):
            check.record("STR-01", "pass", "%s: the consumer passed stream %s and read the final data"
                         % (where, " then ".join(map(repr, streams))))
        y = p = x = got = None  # released before the next round
        tries.settle()
    unknown = dev.current_stream() is None
    for clause, case, context in (("STR-05", "its current stream, the legacy default stream", True),
                                  ("STR-06", "the per-thread default stream made current", per_thread),
                                  ("STR-07", "a side stream made current", side)):
        if clause not in compared and (unknown or context is None):
            check.record(clause, "unsupported", "the stream passed was not compared with %s: the target knows %s" % (
                case, "no current stream of its library" if unknown else "no such context of its library"))


@consumer("CAP-03", "OWN-03")
def test_cuda_consumer_owns_the_import_once(target, check):
    """from_dlpack of a CUDA capsule (ready device memory, a counted deleter) renames the
    capsule used_* (CAP-03) and calls the deleter exactly once, by the time its result died
    (OWN-03): the host files' ownership rules on the device, where a consumer that imports CUDA
    memory alone is judged by the device checks only. (A consumer may give the tensor back at
    once after copying it, so calls while the result lives are not judged here.)"""
    dev, rt = cu.device(target)
    values = dty.safe_values("float32", cu.SHAPE)
    p = kit.RecordingProducer(cu.device_forges(rt, values, dtype="float32", shape=cu.SHAPE,
                                               strides=kit.row_major(cu.SHAPE)), device=(2, 0), keep=True)
    att = tries.Attempt(target, p)
    if att.exc is not None:  # a consumer may refuse device memory it cannot use (API-04)
        raise kit.Unsupported("from_dlpack refused a float32 %s CUDA capsule: %s" % (cu.SHAPE,
                                                                                    tries.describe_exc(att.exc)))
    kind = p.last_kind
    life = att.lifetime()  # the result dies in there
    names, used = life["names"], "used_" + pycap.NAMES[kind]
    check.that(len(names) == 1, "CAP-03", "the consumer asked for %d capsules" % len(names))
    check.that(bool(names) and names[-1] == used, "CAP-03", "%s CUDA capsule after the import: %s" % (
        kind, pycap.name_problem(names[-1] if names else None, used)))
    check.equal(life["after"], 1, "OWN-03", "%s CUDA capsule: deleter calls once the result died" % kind)
    tries.settle()
    check.equal(p.forges[kind].deleter_calls, 1, "OWN-03", "%s CUDA capsule: deleter calls once the capsule died "
                "too" % kind)


@consumer("LAY-03")
def test_cuda_consumer_honours_byte_offset(target, check):
    """A CUDA capsule whose byte_offset is not 0 (ready device memory, other bytes before the
    first element): the import holds the elements from data + byte_offset on (LAY-03), as on the
    CPU (test_layout.py); a clean refusal of the valid capsule is a warn, as there."""
    dev, rt = cu.device(target)
    offset, values = 256, dty.safe_values("float32", cu.SHAPE)  # 256: the first element stays aligned
    p = kit.RecordingProducer(cu.device_forges(rt, b"\xee" * offset + values, dtype="float32", shape=cu.SHAPE,
                                               strides=kit.row_major(cu.SHAPE), byte_offset=offset),
                              device=(2, 0), keep=True)
    att = tries.Attempt(target, p)
    what = "a float32 %s CUDA capsule with byte_offset=%d" % (cu.SHAPE, offset)
    if att.refused:
        tries.record_refused(check, "LAY-03", att, what)
        return
    got, how = cu.read_back(check, dev, att, p, "LAY-03", what)
    if got is not None:
        check.equal(got, values, "LAY-03", "%s: the import's elements%s" % (what, " (%s)" % how if how else ""))
    att.settle()
