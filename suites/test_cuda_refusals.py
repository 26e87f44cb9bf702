"""Every refusal reason of support/reasons.py over CUDA memory: what a CUDA consumer does with
each capsule test_refusals.py feeds a CPU consumer, its data on (kDLCUDA, 0), the dtypes a rule
reads (rs.DTYPE_REASONS: fp6 and fp4 with other bits, DT-07 and DT-08) among them.

A consumer that takes device memory only (a kernel library, cupy, `module@cuda`) never meets
the CPU files' capsules on its own path, so its checks of version, ndim, shape, extents, strides
and NULL data are judged here. Each reason is graded as there (suites/README.md, Grading):
importing what a rule says to refuse fails (VER-08), importing malformed metadata is a warn,
a valid layout (40 dimensions, negative or zero strides) imports with its elements, read back
the library's way, or is refused cleanly; the deleter runs once, never while the result lives
(support/attempts.py: refusal_accounting). An unknown dtype code imported is read as VER-09
reads it on the CPU (misread fails, carried unread warns), with its bytes read back from the
device and its dtype as the device's reader names it (`import_dtype`; unsupported where it
cannot). The reasons whose device is the point are test_refusals.py's alone.

Two refusals that are no capsule's metadata are judged here too, with the CPU's code: a capsule
of CUDA memory already named used_* (CAP-04), and an exception of a CUDA producer, which must
reach the caller unchanged (ERR-02).
"""
import pytest

from dlconform import kit
from support import attempts as tries
from support import cuda as cu
from support import dtypes as dty
from support import readings as rd
from support import reasons as rs
from support.marks import consumer

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")

#: the bytes of device memory under each capsule: every valid reason's elements lie in it
BUFFER = 64


def _cases():
    for r in rs.REASONS + rs.DTYPE_REASONS:
        if tuple(r.device) == (1, 0):
            yield pytest.param(r.id, id=r.id, marks=[pytest.mark.clause(r.clause), pytest.mark.feeds(r.feeds)])


@pytest.mark.parametrize("reason", list(_cases()))
@pytest.mark.role("consumer")
def test_cuda_consumer_refusal_and_deleter(target, check, reason):
    """One reason over CUDA memory: a clean refusal or a sound import, and the deleter once,
    never while the result lives. `reason` is the id of one of rs.REASONS."""
    reason = rs.REASON[reason]
    dev, rt = cu.device(target)
    kw = {k: v for k, v in reason.kw.items() if k != "buffer_size"}
    data = dty.safe_values("uint8", (BUFFER,))
    forges = kit.forges(device=(2, 0), **kw) if kw.get("data") == "null" else cu.device_forges(rt, data, **kw)
    p = kit.RecordingProducer(forges, device=(2, 0), keep=True)
    att = tries.Attempt(target, p)
    what = "%s over CUDA memory (%s capsule)" % (reason.id, p.last_kind or "no")
    if reason.kind == "versioned" and p.last_kind == "legacy":
        check.record(reason.clause, "unsupported", "%s: the consumer asked for a legacy capsule, and the reason lives "
                     "in the versioned struct" % what)
    elif att.refused:
        check.refusal(reason.clause, att, what)
    elif reason.must == "refuse":
        check.record(reason.clause, "fail", "%s was imported" % what)
    elif reason.must == "invalid":
        check.accepted(reason.clause, "%s was imported" % what)
    elif reason.must == "read":
        _unknown_value(check, target, dev, att, p, reason, data, what)
    else:
        got, how = cu.read_back(check, dev, att, p, reason.clause, what)
        if got is not None:
            shape = kw["shape"]
            strides = kw.get("strides") or dty.row_major_strides(shape)
            check.equal(got, cu.host_elements(data, kw.get("byte_offset", 0), shape, strides, 4), reason.clause,
                        "%s: the import's elements%s" % (what, " (%s)" % how if how else ""))
    tries.refusal_accounting(check, target, att, what, reason.feeds)


def _unknown_value(check, target, dev, att, p, reason, data, what):
    """VER-09 for an import of a dtype code the consumer cannot know, as the CPU reads it
    (rd.unknown_value_verdict: misread fails, carried unread warns), its bytes read back the
    library's way and its dtype as the device's reader names it (import_dtype); unsupported
    where the device cannot tell either."""
    shape, (_, bits, lanes) = reason.kw["shape"], reason.kw["dtype"]
    expected = cu.host_elements(data, 0, shape, dty.row_major_strides(shape), bits * lanes // 8)
    try:
        held = dev.import_dtype(att.result)
        reader = (expected, lambda y: cu.read_ready(dev, y, p)[0], lambda y: {"dtype": held})
        check.record(reason.clause, *rd.unknown_value_verdict(target, att, what, dtype=reason.kw["dtype"],
                                                              device_reader=reader))
    except kit.Unsupported as e:
        check.record(reason.clause, "unsupported", "%s was imported, but %s" % (what, e))


def _device_forges(rt):
    """A factory of cu.DeviceForge over ready CUDA memory of float32 elements (distinct values)
    of the shape asked for, with explicit row-major strides."""
    return lambda **kw: cu.DeviceForge(rt, dty.safe_values("float32", kw["shape"]), dtype="float32",
                                       strides=kit.row_major(kw["shape"]), **kw)


@consumer("CAP-04")
def test_cuda_consumer_refuses_used_capsule(target, check):
    """A capsule of CUDA memory already named used_* belongs to another consumer: from_dlpack
    must refuse it (either kind) and never call its deleter; the owner does, exactly once."""
    _, rt = cu.device(target)
    for versioned in (False, True):
        what = "%s CUDA capsule" % ("versioned" if versioned else "legacy")
        tries.used_capsule_refused(check, target, versioned, what, "CAP-04", make_forge=_device_forges(rt),
                                   shape=(2, 3))


@consumer("ERR-02")
@pytest.mark.parametrize("where", ["__dlpack__", "__dlpack_device__"])
def test_cuda_producer_exception_propagates(target, check, where):
    """An exception a CUDA producer's __dlpack__ or __dlpack_device__ raises reaches the caller
    of from_dlpack unchanged (the same object), a plain Exception subclass and a BufferError
    subclass alike: a kernel library must not wrap or replace it."""
    _, rt = cu.device(target)
    tries.producer_error_propagates(check, target, where, device=(2, 0), make_forge=_device_forges(rt))
