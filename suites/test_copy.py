"""CPY: the copy keyword of __dlpack__ (producer side, CPU)."""
import pytest

import _capsule_support as S
from dlconform import _probe


def _exported(target, x, **kw):
    cap = S.export_versioned(x, **kw)
    info = _probe.inspect(cap)
    return cap, info


def _address(info):
    return None if info.get("data") is None else info["data"] + info["byte_offset"]


@pytest.mark.clause("CPY-01")
@pytest.mark.role("producer")
def test_copy_true_exports_separate_memory(target, check):
    """copy=True always copies: the export holds the same values in other memory."""
    x, values, mk = S.make(target, "float32", (2, 3))
    check.repro(S.setup_lines(target) + mk + [
        "cap = x.__dlpack__(max_version=(1, 3), copy=True)",
        "print(hex(_probe.inspect(cap)['data']), x)  # must differ from x's memory"])
    ptr = S.native_ptr(target, x)
    if ptr is None:
        check.record("CPY-01", "skip", "the adapter cannot tell where %s keeps its data" % target.name)
        return
    cap, info = _exported(target, x, copy=True)
    check.that(_address(info) != ptr, "CPY-01", "copy=True exported the tensor's own memory (0x%x)" % ptr)
    check.equal(_probe.read_elements(cap), target.expected(x), "CPY-01", "values of the copy")


@pytest.mark.clause("CPY-02", "CPY-03")
@pytest.mark.role("producer")
def test_copy_false_and_none_share_cpu_memory(target, check):
    """copy=False never copies, and copy=None reuses the buffer when it can (always, on the CPU)."""
    x, values, mk = S.make(target, "float32", (2, 3))
    ptr = S.native_ptr(target, x)
    check.repro(S.setup_lines(target) + mk + [
        "cap = x.__dlpack__(max_version=(1, 3), copy=False)",
        "print(hex(_probe.inspect(cap)['data']))  # must be x's own memory"])
    if ptr is None:
        for clause in ("CPY-02", "CPY-03"):
            check.record(clause, "skip", "the adapter cannot tell where %s keeps its data" % target.name)
        return
    for clause, copy in (("CPY-02", False), ("CPY-03", None)):
        cap, info = _exported(target, x, copy=copy)
        check.equal(_address(info), ptr, clause, "copy=%r must export the tensor's own memory" % (copy,))
        check.that(not (info.get("flags") or 0) & S.FLAG_IS_COPIED, clause,
                   "copy=%r set IS_COPIED on a zero-copy export" % (copy,))
