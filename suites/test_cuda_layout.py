"""LAY and DT on CUDA, consumer side: what a CUDA consumer makes of device capsules of every
layout and element type.

The capsules are kit's forges over ready device memory of our own (support/cuda.device_forges:
the data is complete before the import, so no stream ordering is judged here, test_cuda_stream.py
does that). What the consumer imported is read back the library's way (its device's
read_import; once the device is idle where that device reads so) and compared with the elements
the capsule describes, gathered on the host from the same bytes. The CPU's checks of the same
clauses are in test_layout.py and test_dtype.py; these are their twins for consumers that take
device memory only (kernel libraries, cupy, pyref@cuda).
"""
import pytest

from dlconform import kit
from support import attempts as tries
from support import cuda as cu
from support import dtypes as dty
from support import strategies as hh
from support.marks import consumer

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")


def _device_view_case(target, check, shape, strides, byte_offset, buffer_size, itemsize, dtype):
    """One strided view on the device: a CUDA capsule of `shape` and `strides` whose first
    element is byte_offset bytes into a buffer of buffer_size (data points at it, byte_offset 0:
    test_cuda_stream.py judges LAY-03). Imported, it holds the view's elements; refused, the
    refusal is clean (LAY-11: import, copy or raise)."""
    dev, rt = cu.device(target)
    count = -(-buffer_size // itemsize)
    data = dty.safe_values("float32", (count,))[:buffer_size]
    # room after the view, so a consumer that reads it as compact reads device memory of ours
    pad = b"\0" * (itemsize * max(1, dty.numel(shape)))
    p = kit.RecordingProducer(cu.device_forges(rt, data + pad, at=byte_offset, dtype=dtype, shape=shape,
                                               strides=strides), device=(2, 0), keep=True)
    att = tries.Attempt(target, p)
    what = "a float32 CUDA capsule of shape %r, strides %r" % (shape, strides)
    if att.refused:
        why = check.unclean(att)
        if why:
            check.record("LAY-11", "fail", "%s refused uncleanly: %s" % (what, why))
    else:
        got, how = cu.read_back(check, dev, att, p, "LAY-11", what)
        if got is not None:
            check.equal(got, cu.host_elements(data, byte_offset, shape, strides, itemsize), "LAY-11",
                        "%s: the import's elements%s" % (what, " (%s)" % how if how else ""))
    att.settle()


@consumer("LAY-11")
def test_cuda_consumer_reads_strided_views(target, check):
    """Strided CUDA capsules (transposed, stepped, negative, size-1 dimensions with odd
    strides, 0-d, empty) import with the view's elements, or are refused cleanly (LAY-11)."""
    views = hh.views(itemsize=4, min_ndim=0, max_ndim=3, allow_negative=True).map(lambda v: v._asdict())
    hh.explore(check, _device_view_case, target, views, max_examples=16,
               seed=0x5d1e0c3a9b7f42e68c0d1a2b3c4d5e6f, dtype=(2, 32, 1))


@consumer("DT-03", "DT-04", "DT-05", "DT-06", "DT-13")
def test_cuda_consumer_imports_dtypes(target, check):
    """CUDA capsules of each standard and fp8 dtype import with their bytes, or are refused
    (warn when the library itself has the dtype), as test_dtype.py's CPU twin judges them."""
    dev, rt = cu.device(target)
    seen, notes = set(), {}
    for name in [n for n in dty.DTYPES if n not in dty.SUBBYTE]:
        cl = dty.clause_of(name)
        values = (dty.distinct_values if name == "bool" else dty.safe_values)(name, (4,))
        p = kit.RecordingProducer(cu.device_forges(rt, values, dtype=dty.DTYPES[name], shape=(4,)),
                                  device=(2, 0), keep=True)
        att = tries.Attempt(target, p)
        what = "a %s CUDA capsule of shape (4,)" % name
        if att.refused:
            dty.refused_dtype(check, target, att, name, cl, seen, notes)
        else:
            seen.add(cl)
            got, how = cu.read_back(check, dev, att, p, cl, what)
            if got is not None:
                check.equal(got, values, cl, "%s: the import's bytes%s" % (what, " (%s)" % how if how else ""))
            dty.judge_kind(check, target, att.result, name, cl)
        att.settle()
    dty.unseen_kinds(check, seen, notes)


def _device_attempt(target, forges):
    """(the RecordingProducer on (kDLCUDA, 0) of `forges`, its Attempt on the target)."""
    p = kit.RecordingProducer(forges, device=(2, 0), keep=True)
    return p, tries.Attempt(target, p)


@consumer("LAY-04", "LAY-08")
def test_cuda_consumer_takes_empty_and_0d_tensors(target, check):
    """Zero-size CUDA capsules with NULL data import, empty (LAY-04, MUST: a kernel library that
    asserts a non-NULL pointer fails here; refusing the same layout over real memory too is
    refusing the layout, which LAY-11 allows); 0-d ones with NULL strides import with their
    element, and with NULL shape too in a versioned capsule (LAY-08), as test_layout.py judges
    the CPU."""
    dev, rt = cu.device(target)
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        p, att = _device_attempt(target, kit.forges(data="null", device=(2, 0), shape=shape))
        what = "a zero-size CUDA capsule of shape %r with NULL data" % (shape,)
        if att.refused:
            tries.null_data_refused(check, att, shape,
                                    lambda: _device_attempt(target, cu.device_forges(rt, b"\0" * 64, shape=shape))[1])
        else:
            got, how = cu.read_back(check, dev, att, p, "LAY-04", what)
            if got is not None:
                check.equal(got, b"", "LAY-04", "%s: the import's elements%s" % (what, " (%s)" % how if how else ""))
        att.settle()
    values = dty.safe_values("float32", ())
    for null_shape in (False, True):
        p, att = _device_attempt(target, cu.device_forges(rt, values, shape=(), strides=None, shape_null=null_shape))
        what = "a 0-d float32 CUDA capsule with NULL %s" % ("shape and strides" if null_shape else "strides")
        if att.refused:  # the control: a 0-d capsule with a shape and (empty) strides
            tries.ndim0_refused(check, att, null_shape, lambda: _device_attempt(
                target, cu.device_forges(rt, values, shape=(), strides=()))[1])
        else:
            got, how = cu.read_back(check, dev, att, p, "LAY-08", what)
            if got is not None:
                check.equal(got, values, "LAY-08", "%s: the import's element%s" % (what, " (%s)" % how if how else ""))
        att.settle()
