"""CPY: the copy keyword of __dlpack__ (producer side, CPU) and of from_dlpack (consumer side)."""

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import imports as imp
from support import readings as rd
from support import tensors as tns
from support.marks import consumer, producer


@producer("CPY-01")
def test_copy_true_exports_separate_memory(target, check):
    """copy=True always copies: the export holds the same values in other memory."""
    x, values = tns.make(target, "float32", (2, 3))
    ptr = tns.native_ptr(target, x)
    if ptr is None:
        check.record("CPY-01", "skip", "the adapter cannot tell where %s keeps its data" % target.name)
        return
    try:
        cap = pycap.export_versioned(x, copy=True)
    except BufferError as e:
        check.record("CPY-01", *rd.copy_refused(e))
    else:
        info = pycap.fields(cap)
        check.that(pycap.address(info) != ptr, "CPY-01", "copy=True exported the tensor's own memory (0x%x)" % ptr)
        rd.copy_values(check, "CPY-01", cap, target.expected(x), "values of the copy",
                       plain=lambda: pycap.export_versioned(x))
    # copy=True binds legacy exports too (max_version=None); a legacy capsule just cannot
    # carry IS_COPIED
    try:
        legacy = x.__dlpack__(copy=True)
    except Exception as e:  # noqa: BLE001 - a refusal of the legacy path is judged elsewhere
        if not pycap.keyword_rejected(e, "copy") and not isinstance(e, BufferError):
            check.record("CPY-01", "fail", "x.__dlpack__(copy=True) raised %s" % tries.describe_exc(e))
        return
    linfo = pycap.fields(legacy)
    if linfo["kind"] == "legacy":
        check.that(pycap.address(linfo) != ptr, "CPY-01", "x.__dlpack__(copy=True) (legacy capsule) exported the "
                   "tensor's own memory (0x%x)" % ptr)


@producer("CPY-02", "CPY-03")
def test_copy_false_and_none_share_cpu_memory(target, check):
    """copy=False never copies, and copy=None reuses the buffer when it can (always, on the CPU)."""
    x, values = tns.make(target, "float32", (2, 3))
    ptr = tns.native_ptr(target, x)
    if ptr is None:
        for clause in ("CPY-02", "CPY-03"):
            check.record(clause, "skip", "the adapter cannot tell where %s keeps its data" % target.name)
        return
    for clause, copy in (("CPY-02", False), ("CPY-03", None)):
        info = pycap.fields(pycap.export_versioned(x, copy=copy))
        check.equal(pycap.address(info), ptr, clause, "copy=%r must export the tensor's own memory" % (copy,))
        check.that(not (info.get("flags") or 0) & pycap.FLAG_IS_COPIED, clause,
                   "copy=%r set IS_COPIED on a zero-copy export" % (copy,))


# ---------------------------------------------------------------------------- consumer: copy keyword
@consumer("CPY-06", "CPY-07")
def test_consumer_copy_keyword(target, check):
    """from_dlpack(copy=True) always copies, copy=False never does, None reuses the producer's
    memory when it can (always for CPU memory). The producer honours copy=True itself, so a
    consumer may leave the copy to it."""
    imp.copy_keyword(check, target, lambda: kit.CopyingProducer(shape=(2, 3)), imp.HostResults(target))


@consumer("CPY-07")
def test_consumer_copy_false_when_a_copy_is_needed(target, check):
    """from_dlpack(x, device='cpu', copy=False) for non-CPU memory needs a copy: ValueError or
    BufferError (the catalogue's reading of CPY-07); anything else, or an import, fails."""
    imp.copy_false_refused(check, target, lambda: kit.StreamDeviceProducer((2, 0), host_copies=True))
