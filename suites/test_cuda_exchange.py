"""XAPI on CUDA, observed: the C exchange table (`__dlpack_c_exchange_api__`) of a library's
CUDA tensors, on a real (or simulated) CUDA device.

Producer: `current_work_stream(kDLCUDA, id)` names the library's current stream, by default and
inside a side-stream context of the library's own (XAPI-16). The `*_no_sync` functions do not
synchronise (XAPI-14, XAPI-15, XAPI-17: "No stream sync"; the first half of XAPI-19): called on
a tensor whose data is still pending behind slow work on its producer's stream, each returns
with that work still pending, without a host-blocking call (the simulated runtime counts them)
and with nothing enqueued on the current stream, a fresh non-blocking one.

Consumer (XAPI-19's second half): a consumer that imports through a producer's table asks
current_work_stream and reads there; the producer (support.cuda.TableProducer) has its data
pending on the stream it names, so what the consumer reads says whether it did.

The table's other clauses are judged on the CPU (test_exchange_api.py).
"""
import contextlib

import pytest

from dlconform import kit
from support import cuda as cu
from support import dtypes as dty
from support import attempts as tries
from support.marks import consumer, producer

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")

KDLCUDA = 2


@producer("XAPI-16")
def test_cuda_current_work_stream_is_the_librarys(target, check):
    """current_work_stream(kDLCUDA, id) writes the library's current stream: the legacy default
    stream (NULL or cudaStreamLegacy) by default, the side stream inside its context."""
    dev, rt = cu.device(target)
    x = dev.make("float32", cu.SHAPE, dty.safe_values("float32", cu.SHAPE))
    api, device_id = cu.table(x)["pointer"], dev.device[1]
    cases = [(None, dev.current_stream())]
    side = dev.side_stream()
    if side is not None:
        cases.append(side)
    cases = [(context, expected) for context, expected in cases if expected is not None]
    if not cases:
        raise kit.Unsupported("the library names no current stream to compare with (%s)" % dev.name)
    for context, expected in cases:
        where = "by default" if context is None else "inside a side-stream context (stream %d)" % expected
        with context or contextlib.nullcontext():
            rc, got = kit.xapi_current_stream(api, KDLCUDA, device_id)
        if rc != 0:
            check.record("XAPI-16", "fail", "current_work_stream(kDLCUDA, %d) %s failed (rc %d): %s"
                         % (device_id, where, rc, kit.describe(got)))
            continue
        check.equal(cu.as_dlpack_stream(got), expected, "XAPI-16",
                    "current_work_stream(kDLCUDA, %d) %s, as DLPack's int (the library's current stream is %d)"
                    % (device_id, where, expected))


#: the functions that must not synchronise, each with the clause that says so of it
NO_SYNC = [pytest.param(function, clause, id=short, marks=pytest.mark.clause(clause)) for function, clause, short in (
    ("managed_tensor_from_py_object_no_sync", "XAPI-14", "managed_from"),
    ("dltensor_from_py_object_no_sync", "XAPI-15", "dltensor_from"),
    ("managed_tensor_to_py_object_no_sync", "XAPI-17", "to_py"))]


def _call(api, function, x):
    """(rc, what it gave or the exception) of one table function on x (to_py: on x's managed
    export, made first)."""
    if function == "managed_tensor_from_py_object_no_sync":
        rc, handle, exc = kit.xapi_managed_from(api, x)
        return rc, handle if rc == 0 else exc
    if function == "dltensor_from_py_object_no_sync":  # the fields alone: reading CUDA memory would wait
        return kit.xapi_dltensor_from(api, x, read=False)
    return kit.xapi_to_py(api, x)


@producer()  # each case's clause is its parameter's (NO_SYNC)
@pytest.mark.parametrize("function,clause", NO_SYNC)
def test_cuda_no_sync_functions_leave_the_streams_alone(target, check, function, clause):
    """With the tensor's data pending behind slow work on its producer's stream, the function
    returns that work still pending, without blocking the host, and with nothing enqueued on the
    current stream (a new non-blocking one, made current in the library's side-stream context)."""
    dev, rt = cu.device(target)
    with cu.producing(dev):
        x = cu.filled(dev, rt, 0x5A)
    info = cu.table(x)
    if not info["functions"][function]:
        raise kit.Unsupported("%s is NULL (XAPI-11 allows it for dltensor_from; XAPI-09, XAPI-10 judge the others)"
                              % function)
    api, side = info["pointer"], dev.side_stream()
    with side[0] if side is not None else contextlib.nullcontext():
        current = side[1] if side is not None else None
        arg = x
        if function == "managed_tensor_to_py_object_no_sync":  # its input: x's managed export
            rc, arg, exc = kit.xapi_managed_from(api, x)
            if rc != 0:
                raise kit.Unsupported("no managed export to give back: managed_tensor_from_py_object_no_sync "
                                      "failed (%s)" % kit.describe(exc))
        if not dev.pending(rt, x):
            raise kit.Unsupported("the producer's slow work was done before the call: nothing to observe")
        idle = current is None or rt.idle(current)
        before = rt.host_syncs()
        rc, out = _call(api, function, arg)
        after, pending = rt.host_syncs(), dev.pending(rt, x)
        enqueued = idle and current is not None and not rt.idle(current)
    if rc != 0:
        check.record(clause, "fail", "%s failed on a CUDA tensor (rc %d): %s" % (function, rc, kit.describe(out)))
        return
    check.that(before is None or after == before, clause, "%s blocked the host (%s host-blocking calls)"
               % (function, None if before is None else after - before))
    check.that(pending, clause, "%s returned with the producer's slow work done: it synchronised" % function)
    check.that(not enqueued, clause, "%s enqueued work on the current stream %s (a wait on the producer's stream?)"
               % (function, current))
    del out, arg, x


# ---------------------------------------------------------------------------- consumer
@consumer("XAPI-19")
def test_cuda_consumer_reads_on_the_work_stream(target, check):
    """from_dlpack of a producer whose exchange table hands out CUDA memory still pending on the
    stream its current_work_stream names: a consumer that takes the table's no-sync route must
    read there (ask current_work_stream, launch on it), so it reads the final data. A consumer
    that takes __dlpack__ instead is judged by test_cuda_stream.py (unsupported here)."""
    dev, rt = cu.device(target)
    x = cu.pending_pyref_array(rt, 0x6B)
    if x is None:
        raise kit.Unsupported("pyref's device arrays are unavailable on this runtime")
    p = cu.TableProducer(x)
    try:
        y, e = kit.attempt(lambda: target.from_dlpack(p))
        if not p.handed_out:
            raise kit.Unsupported("from_dlpack did not import through the exchange table (%s)"
                                  % ("it called __dlpack__" if p.dlpack_calls else tries.describe_exc(e)
                                     if e is not None else "it asked neither"))
        if e is not None:  # a consumer may refuse device memory it cannot use (API-04)
            raise kit.Unsupported("from_dlpack took the table's tensor, then raised %s" % tries.describe_exc(e))
        asked = "it asked current_work_stream %s" % p.asked if p.asked else "it never asked current_work_stream"
        got = dev.read_import(y, x.stream if p.asked else None)  # a user of the import reads on the work stream
        if cu.judge_import(check, got, 0x6B, "XAPI-19",
                           "what the consumer read of the table's tensor, its data pending on the producer's work "
                           "stream (%s)" % asked,
                           unordered=None if p.asked else "it took the table's no-sync hand-off without asking "
                           "current_work_stream where the data is pending"):
            check.record("XAPI-19", "pass", asked)
    finally:
        y = x = None
        p.close()
        tries.settle()
