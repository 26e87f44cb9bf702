"""Interop on CUDA: every installed CUDA producer x the target as a CUDA consumer.

The twin of test_interop.py for device memory: each test is one (producer, layout, dtype) case,
its records carrying `peer` = the producer (`LIBRARY@cuda`). The producer's tensor is made on
the device by its stream device (`make`), viewed by its adapter where the layout needs a view,
and left to finish first (the device idle: test_cuda_stream.py judges the streams). The
consumer imports it through a recording producer (cu.Recorded: the two DLPack methods only),
and what its import holds, read back the library's way on the stream it named (cu.read_back),
must be the producer's elements, read its own way (its stream device's `to_host`).

LAY-11: the import holds the producer's elements in row-major order; a consumer may raise
instead (`unsupported`, with the exception quoted), except SystemError, which fails.
"""
import os

import pytest

from dlconform import kit
from support import attempts as tries
from support import cuda as cu
from support import dtypes as dty
from support import tensors as tns
from support.marks import consumer, interop_params

#: every record here names the CUDA device its tensors were on
pytestmark = pytest.mark.device("cuda")

#: the CUDA producers (LIBRARY@cuda) and the module each needs (checked at collection)
PRODUCERS = (("pyref@cuda", "dlconform.pyref"), ("ref@cuda", "dlconform._ref"), ("torch@cuda", "torch"),
             ("cupy@cuda", "cupy"), ("jax@cuda", "jax"))


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", interop_params(PRODUCERS, "cuda-producer:"))


_LOADED = {}


def _producer(spec, target):
    """(the producer's adapter, its CUDA stream device); Unsupported with the reason when the
    loader cannot load it or it has no CUDA device here. The target's own library is the target:
    loading a clean pyref would turn off the fault of a pyref target (pyref's faults are per
    process)."""
    if spec not in _LOADED:
        from dlconform.targets.base import TargetError
        from dlconform.targets.loader import load

        if spec.startswith("jax") and not target.name.startswith("jax"):
            # a peer of ours in this child: jax would take 75% of the GPU at its first array,
            # which the target's own library and the other children need (XLA's documented switch)
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        try:
            adapter = target if target.name.split(":")[0] == spec else load(spec)
            dev = adapter.stream_device()
            _LOADED[spec] = (adapter, dev, None if getattr(dev, "kind", None) == "cuda" else "no CUDA device")
        except TargetError as e:
            _LOADED[spec] = (None, None, str(e))
    adapter, dev, why = _LOADED[spec]
    if why:
        raise kit.Unsupported("producer %s unavailable: %s" % (spec, why))
    return adapter, dev


@consumer("LAY-11")
def test_cuda_interop(target, check, case):
    """One producer's CUDA tensor of one layout and dtype, imported by the target: the import
    holds the producer's elements."""
    spec, layout, dtype = case
    check.set_peer(spec)
    cdev, rt = cu.device(target)
    producer, pdev = _producer(spec, target)
    if dtype not in producer.dtypes():
        raise kit.Unsupported("producer %s cannot make %s tensors" % (spec, dtype))
    base_shape, view, shape = tns.INTEROP_LAYOUTS[layout]
    what = "a %s %s CUDA tensor from %s" % (layout, dtype, spec)
    try:
        x = pdev.make(dtype, base_shape, dty.safe_values(dtype, base_shape))
        if view:
            x = getattr(producer, view[0])(x, *view[1])
        rt.synchronize()  # ready: the streams are test_cuda_stream.py's
        expected = None if x is None else pdev.to_host(x)
    except Exception as e:  # noqa: BLE001
        raise kit.Unsupported("producer %s cannot make %s: %s" % (spec, what, tries.describe_exc(e)))
    if x is None:
        raise kit.Unsupported("producer %s has no %s view of its CUDA tensors" % (spec, layout))
    p = cu.Recorded(x)
    att = tries.Attempt(target, p)
    if att.exc is not None:
        if p.exc is not None:
            raise kit.Unsupported("the producer %s did not export %s: %s (producer-side clauses judge that)"
                                  % (spec, what, tries.describe_exc(p.exc)))
        tries.interop_refused(check, att, what, ("LAY-11",))
        return
    got, how = cu.read_back(check, cdev, att, p, "LAY-11", what)
    if got is not None:
        check.equal(got, expected, "LAY-11", "%s: the import's elements%s" % (what, " (%s)" % how if how else ""))
    att.result = None
