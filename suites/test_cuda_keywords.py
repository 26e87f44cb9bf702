"""API, CPY, DEV, VER, FLG and OWN-06 on CUDA, consumer side: what a CUDA consumer's from_dlpack
makes of its keywords (`device`, `copy`), what max_version it passes and how it retries for an
old producer, and what it makes of a READ_ONLY or IS_COPIED capsule and of a NULL manager_ctx,
over device memory.

The CPU's checks of the same clauses (test_device.py, test_copy.py, test_versioning.py,
test_flags.py, test_ownership.py) feed host memory, so a device variant skips them; these feed
a producer over ready device memory of our own (support/cuda.DeviceProducer: it copies on the
device for copy=True and to the host for dl_device=(kDLCPU, 0), as a correct producer does, or
takes the stream alone, as an old one does) and judge with the same code (support/imports.py),
reading each import the library's way (cuda.DeviceResults).
"""
import pytest

from dlconform import kit

from support import attempts as tries
from support import cuda as cu
from support import dtypes as dty
from support import imports as imp
from support.marks import consumer

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")

SHAPE = (2, 3)


def _producer(rt, **kw):
    """A DeviceProducer of float32 SHAPE elements (distinct values, so a misread shows)."""
    return cu.DeviceProducer(rt, dty.safe_values("float32", SHAPE), dtype="float32", shape=SHAPE, **kw)


@consumer("API-05")
def test_cuda_consumer_keeps_the_device(target, check):
    """from_dlpack(x), and from_dlpack(x, device=None), of CUDA memory gives a result on that
    device holding x's elements; a clean refusal is a warn (DEV-07 lets a consumer without the
    device refuse, but a CUDA consumer that refuses ready CUDA memory serves none)."""
    dev, rt = cu.device(target)
    imp.keeps_device(check, target, lambda: _producer(rt), (2, 0), cu.DeviceResults(target, dev, rt), refused="warn")


@consumer("CPY-06", "CPY-07")
def test_cuda_consumer_copy_keyword(target, check):
    """from_dlpack(copy=True) of CUDA memory copies it (the producer, asked, or the consumer),
    copy=False never copies, None views it when the library can hold a view."""
    dev, rt = cu.device(target)
    tries.require_keywords(target, "copy")
    imp.copy_keyword(check, target, lambda: _producer(rt), cu.DeviceResults(target, dev, rt))


@consumer("CPY-07")
def test_cuda_consumer_copy_false_to_host(target, check):
    """from_dlpack(x, device='cpu', copy=False) of CUDA memory needs a copy: ValueError or
    BufferError (CPY-07's reading), never an import."""
    _, rt = cu.device(target)
    tries.require_keywords(target, "copy", "device")
    imp.copy_false_refused(check, target, lambda: _producer(rt))


@consumer("CPY-08")
def test_cuda_consumer_host_copy_impossible(target, check):
    """from_dlpack(x, device='cpu') of CUDA memory whose producer cannot copy it to the host
    (it refuses dl_device=(1, 0)): BufferError, or a CPU result with x's elements where the
    consumer makes the host copy itself (it can read the memory: the request is servable)."""
    dev, rt = cu.device(target)
    tries.require_keywords(target, "device")
    imp.unservable_refused(check, target, _producer(rt, host_copies=False), cu.DeviceResults(target, dev, rt))


@consumer("DEV-06")
def test_cuda_consumer_device_cpu(target, check):
    """from_dlpack(x, device='cpu') of CUDA memory whose producer copies to the host when asked
    gives a CPU result holding x's elements (a warn where the consumer refuses: SHOULD)."""
    _, rt = cu.device(target)
    tries.require_keywords(target, "device")
    imp.host_result(check, target, "CUDA producer over device memory", _producer(rt))


@consumer("DEV-07")
def test_cuda_consumer_refuses_foreign_device(target, check):
    """A CUDA consumer given memory on a device it lacks (kDLHexagon) refuses it with
    BufferError, as a CPU consumer does (test_device.py)."""
    cu.device(target)
    imp.foreign_refused(check, target)


@consumer("VER-01")
def test_cuda_consumer_passes_max_version_tuple(target, check):
    """The max_version a CUDA consumer passes to a producer of device memory, where it passes
    one, is a (major, minor) tuple of two ints, (1, 0) or above."""
    _, rt = cu.device(target)
    p = _producer(rt)
    tries.Attempt(target, p).settle()
    imp.passes_max_version(check, [c.get("max_version") for c in p.calls])


@consumer("VER-05", "OWN-03")
def test_cuda_consumer_checks_name_and_version(target, check):
    """Whatever max_version it passed, a CUDA consumer follows the capsule it gets: a legacy
    capsule from a producer that accepts max_version (a producer at DLPack 0.x answers so,
    VER-03), a versioned (1, 0) one, each with its elements; a capsule of an unknown name is
    refused, its deleter run once."""
    dev, rt = cu.device(target)
    imp.follows_capsule_kind(check, target, lambda **kw: cu.DeviceForge(
        rt, dty.safe_values("float32", kw["shape"]), dtype="float32", strides=kit.row_major(kw["shape"]), **kw),
        cu.DeviceResults(target, dev, rt))


@consumer("VER-06", "OWN-03")
def test_cuda_consumer_retries_without_new_keywords(target, check):
    """An old CUDA producer, whose __dlpack__ takes the stream alone: the consumer asks again
    without max_version (and the other new keywords), still naming its stream, and imports the
    legacy capsule with its elements; the deleter runs once the result died."""
    dev, rt = cu.device(target)
    imp.retries_legacy(check, target, _producer(rt, legacy_only=True), cu.DeviceResults(target, dev, rt))


@consumer("VER-06", feeds="valid")
def test_cuda_consumer_retries_for_every_keyword(target, check):
    """The same retry under copy=True, copy=False and device='cpu' (the consumer then meets the
    request itself: a copy of its own, on the device or to the host); a refusal for another
    reason is left to the checks of that reason."""
    dev, rt = cu.device(target)
    imp.retries_for_every_keyword(check, target, lambda: _producer(rt, legacy_only=True),
                                  cu.DeviceResults(target, dev, rt))


@consumer("FLG-03")
def test_cuda_consumer_readonly_import(target, check):
    """A READ_ONLY CUDA capsule imports with its elements: read-only where the library has
    read-only device arrays (jax's are all immutable), else the flag ignored (preferred over
    raising, which warns). A consumer that asks for legacy capsules, which have no flags, is
    not judged."""
    dev, rt = cu.device(target)
    att = imp.readonly_import(check, target, _producer(rt, flags=kit.FLAG_READ_ONLY),
                              cu.DeviceResults(target, dev, rt))
    if att is not None:
        att.settle()


@consumer("FLG-05")
def test_cuda_consumer_is_copied_import(target, check):
    """An IS_COPIED CUDA capsule (alone, and with READ_ONLY) is the consumer's alone: it imports
    as any other, with its elements and the ownership of a plain import; a refusal warns, but
    where READ_ONLY alone is refused (FLG-03's finding then)."""
    dev, rt = cu.device(target)
    imp.is_copied_import(check, target, lambda flags: _producer(rt, flags=flags), cu.DeviceResults(target, dev, rt))


@consumer("OWN-06")
def test_cuda_consumer_accepts_null_manager_ctx(target, check):
    """manager_ctx is opaque and may be NULL: a CUDA capsule with none imports with its elements,
    and its ownership departs from the consumer's plain import in nothing."""
    dev, rt = cu.device(target)
    imp.null_manager_ctx(check, target, _producer(rt), cu.DeviceResults(target, dev, rt))
