"""STR: the stream keyword on devices without streams (producer side, CPU)."""
import pytest

import _capsule_support as S
from dlconform import _probe


def _export_with_stream(x, stream):
    """(capsule or None, exception or None) of x.__dlpack__(stream=stream)."""
    try:
        return x.__dlpack__(stream=stream), None
    except Exception as e:  # noqa: BLE001 - the caller judges the class
        return None, e


@pytest.mark.clause("STR-10")
@pytest.mark.role("producer")
def test_cpu_producer_accepts_only_stream_none(target, check):
    """On the CPU only stream=None is accepted: an integer stream must be rejected."""
    x, values, mk = S.make(target, "float32", (4,))
    if tuple(int(v) for v in x.__dlpack_device__())[0] != 1:
        check.record("STR-10", "skip", "the target's tensors are not on the CPU")
        return
    check.repro(S.setup_lines(target) + mk + ["x.__dlpack__(stream=None)  # accepted",
                                               "x.__dlpack__(stream=1)  # must raise"])
    cap, err = _export_with_stream(x, None)
    check.that(err is None, "STR-10", "stream=None was rejected: %s" % (S.describe_exc(err) if err else ""))
    del cap
    for stream in (1, 2, -1):
        cap, err = _export_with_stream(x, stream)
        if cap is not None:
            if stream == -1:
                # -1 asks for no synchronisation, which a CPU producer never does anyway.
                check.warn("STR-10", "a CPU tensor exported with stream=-1; the spec accepts only None on "
                           "the CPU, but -1 (no synchronisation) is harmless there")
            else:
                check.record("STR-10", "fail", "a CPU tensor exported with stream=%d; only None is "
                             "accepted on the CPU" % stream)
            return
        check.that(not isinstance(err, SystemError), "STR-10",
                   "stream=%d raised SystemError (%s)" % (stream, err))


@pytest.mark.clause("STR-02")
@pytest.mark.role("producer")
def test_stream_of_wrong_type_is_rejected(target, check):
    """A stream that is not an int (or None) is an error, never silently accepted."""
    x, values, mk = S.make(target, "float32", (4,))
    check.repro(S.setup_lines(target) + mk + ["x.__dlpack__(stream='1')  # must raise"])
    for stream in ("1", 1.5, object()):
        cap, err = _export_with_stream(x, stream)
        check.that(cap is None, "STR-02", "stream=%r (%s) was accepted" % (stream, type(stream).__name__))
        if err is not None:
            check.that(not isinstance(err, SystemError), "STR-02", "stream=%r raised SystemError" % (stream,))
        if cap is not None:
            _probe.inspect(cap)
