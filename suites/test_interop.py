"""Interop: every installed producer library x the target as consumer, ref included.

This file runs in the consumer target's child, like every suite, and imports the producer
libraries there through their built-in adapters (dlconform.targets.loader). Each test is one
(producer, layout, dtype) case and its records carry `peer` = the producer.

The consumer is handed a `_Exporter`: an object with only the two DLPack methods, forwarding
to the producer's tensor, so every consumer takes the DLPack path (not the buffer protocol or
a private fast path) and the capsule can be inspected before the consumer takes it.

Verdicts:
  - LAY-11: the result has the producer's shape and element values (any strided layout is
    legal; a consumer may raise instead, which is `unsupported` with the exception quoted,
    except SystemError, which fails);
  - SEM-01: the result views the capsule's memory (zero-copy); a copy of a contiguous or 0-d
    tensor fails, a copy of a strided view warns (the consumer may not represent it).

test_library_round_trip is the library with itself, where the target can read its consumer's
results only through the library's own __dlpack__: an import that does not read back as given
is a finding of the library, on the clause of the case, blaming neither role alone.
"""
import pytest

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import tensors as tns
from support.marks import consumer, interop_params

#: built-in targets that can produce, and the module each needs (checked at collection)
PRODUCERS = (("ref", "dlconform._ref"), ("numpy", "numpy"), ("torch", "torch"),
             ("tvm_ffi", "tvm_ffi"), ("pyarrow", "pyarrow"))
LAYOUTS, STRIDED = tns.INTEROP_LAYOUTS, tns.INTEROP_STRIDED


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        metafunc.parametrize("case", interop_params(PRODUCERS, "producer:"))


_LOADED = {}


def _producer(spec):
    """The producer's adapter, or raises Unsupported with the loader's reason."""
    if spec not in _LOADED:
        from dlconform.targets.base import TargetError
        from dlconform.targets.loader import load

        try:
            _LOADED[spec] = (load(spec), None)
        except TargetError as e:
            _LOADED[spec] = (None, str(e))
    adapter, why = _LOADED[spec]
    if adapter is None:
        raise kit.Unsupported("producer %s unavailable: %s" % (spec, why))
    if "producer" not in adapter.roles:
        raise kit.Unsupported("%s is not a producer" % spec)
    return adapter


class _Exporter:
    """Only the two DLPack methods of x; keeps the inspect() of the last capsule."""

    def __init__(self, x):
        self._x = x
        self.info = None
        self.producer_exc = None  # what the producer's __dlpack__ raised, if it did

    def __dlpack_device__(self):
        return self._x.__dlpack_device__()

    def __dlpack__(self, *args, **kw):
        try:
            cap = self._x.__dlpack__(*args, **kw)
        except Exception as e:
            self.producer_exc = e
            raise
        try:
            self.info = kit.inspect(cap)
        except Exception:  # noqa: BLE001 - not a capsule: the consumer's to refuse
            self.info = None
        return cap


@consumer("SEM-01", "LAY-11")
def test_interop_round_trip(target, check, case):
    spec, layout, dtype = case
    check.set_peer(spec)
    producer = _producer(spec)
    if dtype not in producer.dtypes():
        raise kit.Unsupported("producer %s cannot make %s tensors" % (spec, dtype))
    base_shape, view, shape = LAYOUTS[layout]
    try:
        x = producer.make(dtype, base_shape, dty.safe_values(dtype, base_shape))
        if view:
            x = getattr(producer, view[0])(x, *view[1])
    except Exception as e:  # noqa: BLE001
        raise kit.Unsupported("producer %s cannot make a %s %s tensor: %s"
                              % (spec, layout, dtype, tries.describe_exc(e)))
    if x is None:
        raise kit.Unsupported("producer %s has no %s view" % (spec, layout))
    extra = tries.over_deletes(target)
    if extra:
        raise kit.Unsupported("the consumer calls a plain import's deleter %d times (OWN-03, test_ownership.py's "
                              "finding): %s's tensor would be freed twice by its own deleter, a death that is "
                              "OWN-03's, not this check's" % (extra, spec))
    expected = producer.expected(x)
    native = tns.native_ptr(producer, x)
    exporter = _Exporter(x)
    att = tries.Attempt(target, exporter)
    if att.exc is not None:
        if exporter.info is None and exporter.producer_exc is not None:
            raise kit.Unsupported("the producer %s did not export a %s %s tensor: %s (producer-side clauses judge "
                              "that)" % (spec, layout, dtype, tries.describe_exc(exporter.producer_exc)))
        tries.interop_refused(check, att, "a %s %s tensor from %s" % (layout, dtype, spec), ("LAY-11", "SEM-01"))
        return
    got, d = tries.result_elements(target, att.result)
    check.equal(tuple(d["shape"]), shape, "LAY-11", "%s %s from %s: result shape" % (layout, dtype, spec))
    check.equal(got, expected, "LAY-11", "%s %s from %s: element values" % (layout, dtype, spec))
    info = exporter.info
    if layout == "zero-size" or not info or info.get("data") is None:
        check.record("SEM-01", "pass")
    else:
        exported = info["data"] + info["byte_offset"]
        if (info.get("flags") or 0) & pycap.FLAG_IS_COPIED or (native is not None and exported != native):
            check.record("SEM-01", "fail", "%s %s: the producer %s exported a copy (tensor at 0x%x, capsule at 0x%x) "
                         "without being asked" % (layout, dtype, spec, native or 0, exported))
        elif layout in STRIDED and d["ptr"] != exported:
            check.record("SEM-01", "warn", "%s %s from %s: the result (0x%x) does not view the exported memory "
                         "(0x%x): the consumer copied a strided view it may not represent" % (layout, dtype, spec,
                                                                                             d["ptr"], exported))
        else:
            tries.zero_copy(check, target, d["ptr"], exported, "%s %s from %s" % (layout, dtype, spec))
    if shape and d["shape"] == shape and layout == "contiguous" and tuple(d["strides"]) != dty.row_major_strides(shape):
        check.warn("LAY-11", "a contiguous import came back with strides %r" % (tuple(d["strides"]),))
    att.result = None


@pytest.mark.clause("LAY-11", "LAY-03", "LAY-08", "LAY-04", "FLG-02")
def test_library_round_trip(target, check):
    """The kit's tensors (plain, transposed, stepped, flipped, at a byte offset, 0-d, zero-size,
    read-only) imported by the library's from_dlpack and read back through its own __dlpack__
    hold what they were given. Only for targets with no other way to read results (round_trips):
    the consumer and producer checks lean on this reading, and say unsupported while it fails."""
    if not {"producer", "consumer"} <= set(target.roles):
        raise kit.Unsupported("the round trip needs both roles (%s has %s)"
                              % (target.name, ", ".join(sorted(target.roles)) or "none"))
    wrong = target.round_trips()
    if wrong is None:
        raise kit.Unsupported("%s reads its consumer's results without the library's own export: each role is "
                              "judged on its own" % target.name)
    for what, problem, clause in wrong:
        check.record(clause, "fail", "%s, imported by from_dlpack and read back through the result's own "
                     "__dlpack__: %s (from_dlpack or __dlpack__ is wrong; dlconform cannot tell which)"
                     % (what, problem))
    for clause in ("LAY-11", "LAY-03", "LAY-08", "LAY-04", "FLG-02"):
        if clause not in {c for _, _, c in wrong}:
            check.record(clause, "pass")
