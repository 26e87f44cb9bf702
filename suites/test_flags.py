"""FLG: the flags word of DLManagedTensorVersioned (READ_ONLY, IS_COPIED, IS_SUBBYTE_TYPE_PADDED).

Flags exist only in versioned capsules: a legacy-only producer or consumer gets `unsupported`.
"""
import re

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import imports as imp
from support import readings as rd
from support import tensors as tns
from support.marks import consumer, producer

#: sub-byte dtype names (a pattern, not a compiled one: a reproducer script defines its
#: constants before its imports run)
SUBBYTE_NAME = r"^(float4_|float6_)|^u?int[124]$"


def _copied(target, x, info):
    """True/False: whether the capsule's first element is somewhere else than x's; None when
    the adapter cannot tell where x lives."""
    ptr = tns.native_ptr(target, x)
    if ptr is None or info.get("data") is None:
        return None
    return (info["data"] + info["byte_offset"]) != ptr


# ============================================================================ producer
@producer("FLG-01")
def test_flags_default_zero(target, check):
    """A plain export (writable, not copied, byte-sized dtype) has flags 0; no undefined bit is
    ever set (a defined bit that does not apply is warn)."""
    for dtype in dty.pick(target)[:3]:
        x, values = tns.make(target, dtype, (2, 3))
        for label, v in [("x", x)] + tns.views(target, x, [("x.T", ("transpose", (1, 0)))]):
            cap, info = pycap.versioned_with_flags(v)
            flags = info["flags"]
            check.that(flags & ~pycap.DEFINED_FLAGS == 0, "FLG-01", "%s %s: flags %#x set undefined bits %#x"
                       % (dtype, label, flags, flags & ~pycap.DEFINED_FLAGS))
            stray = flags & pycap.DEFINED_FLAGS
            if stray & pycap.FLAG_IS_COPIED and _copied(target, v, info):
                stray &= ~pycap.FLAG_IS_COPIED  # the producer did copy: the flag is right (FLG-04)
            check.record("FLG-01", "warn" if stray else "pass",
                         "%s %s: flags %#x on a writable, uncopied %s export (flags default to 0)"
                         % (dtype, label, flags, dtype) if stray else "")
            del cap


@producer("FLG-02")
def test_readonly_export_flagged(target, check):
    """A read-only tensor exported versioned carries READ_ONLY. A legacy capsule cannot carry it:
    refusing (BufferError) is the safe answer, a silent legacy export is warn."""
    x, values = tns.make(target)
    ro = target.readonly(x)
    if ro is None:
        raise kit.Unsupported("target %s has no read-only tensors" % target.name)
    legacy_note = None
    try:
        lcap = ro.__dlpack__()
    except BufferError as e:
        legacy_note = "legacy export refused with BufferError (%s)" % e
    except Exception as e:  # noqa: BLE001
        legacy_note = "legacy export refused with %s (ERR-01 expects BufferError)" % tries.describe_exc(e)
    else:
        if pycap.is_capsule(lcap) and kit.inspect(lcap)["name"] == pycap.LEGACY:
            check.warn("FLG-02", "a read-only tensor is exported in a legacy capsule, which cannot carry READ_ONLY: "
                       "a consumer may write to it")
        del lcap
    if pycap.producer_is_legacy_only(ro):
        raise kit.Unsupported("legacy-only producer (no flags)%s" % ("; " + legacy_note if legacy_note else ""))
    cap, info = pycap.versioned_with_flags(ro)
    check.that(info["flags"] & pycap.FLAG_READ_ONLY, "FLG-02", "flags %#x of a read-only tensor's export lack READ_ONLY"
               % info["flags"])
    del cap


def _imported_readonly(target):
    """[(what, a tensor the target imported from a READ_ONLY versioned capsule, whether the import
    kept it read-only)], or [] when the target cannot import one."""
    if not target.has_role("consumer") or not tries.consumer_takes_versioned(target):
        return []
    p = kit.RecordingProducer(kit.Forge(versioned=True, shape=(2, 3), strides=(3, 1), flags=pycap.FLAG_READ_ONLY,
                                        fill=dty.safe_values("float32", (2, 3))))
    y, exc = kit.attempt(lambda: target.from_dlpack(p))
    if exc is not None:  # refusing READ_ONLY is FLG-03's to judge
        return []
    readonly = tries.described_readonly(target, y)
    return [] if readonly is None else [("imported from a READ_ONLY capsule", y, readonly)]


@producer("FLG-02", feeds="valid")
def test_readonly_every_way_exported_flagged(target, check):
    """Every way the library holds read-only data (Target.readonly_ways(), and data it imported
    from a READ_ONLY capsule) is exported versioned with READ_ONLY, or as a copy (IS_COPIED);
    a legacy capsule cannot say it: refusing passes, exporting is warn. An import the library
    made writable (FLG-03 lets a library ignore the flag) re-exported without READ_ONLY is warn:
    the memory its producer marked read-only travels on as writable."""
    x, values = tns.make(target)
    ways = [(what, ro, True) for what, ro in target.readonly_ways(x)] + _imported_readonly(target)
    if not ways:
        raise kit.Unsupported("target %s holds no read-only data the suite knows how to make" % target.name)
    for what, ro, kept in ways:
        try:
            lcap = ro.__dlpack__()
        except Exception as e:  # noqa: BLE001
            check.refusal("FLG-02", e, "%s: legacy export" % what)
        else:
            if pycap.is_capsule(lcap) and kit.inspect(lcap)["name"] == pycap.LEGACY:
                check.warn("FLG-02", "%s: exported in a legacy capsule, which cannot carry READ_ONLY: a consumer "
                           "may write to it" % what)
            del lcap
        if pycap.producer_is_legacy_only(ro):
            continue
        try:
            cap, info = pycap.versioned_with_flags(ro)
        except kit.Unsupported:
            continue
        except Exception as e:  # noqa: BLE001
            check.refusal("FLG-02", e, "%s: versioned export" % what)
            continue
        flags = info["flags"] or 0
        if not flags & (pycap.FLAG_READ_ONLY | pycap.FLAG_IS_COPIED):
            message = "%s: exported versioned with flags %#x, without READ_ONLY" % (what, flags)
            if kept:
                check.record("FLG-02", "fail", message)
            else:
                check.warn("FLG-02", message + " (the import made it writable, which FLG-03 allows; the memory "
                           "is still read-only)")
        else:
            check.record("FLG-02", "pass", "")
        del cap


@producer("FLG-04")
def test_copy_sets_is_copied(target, check):
    """Whenever the producer copied (copy=True, or copy=None when it had to), IS_COPIED is set.
    IS_COPIED on memory that was not copied is warn (the consumer may then write to it)."""
    x, values = tns.make(target)
    if tns.native_ptr(target, x) is None:
        raise kit.Unsupported("the adapter cannot tell where the tensor's memory is")
    for label, kw in (("copy=True", {"copy": True}), ("copy=None", {}), ("copy=False", {"copy": False})):
        try:
            cap, info = pycap.versioned_with_flags(x, **kw)
        except TypeError as e:
            if pycap.keyword_rejected(e, "copy"):
                raise kit.Unsupported("__dlpack__ has max_version but no copy keyword: %s" % tries.describe_exc(e))
            raise
        except BufferError as e:
            # a refused export made no copy, so there is nothing for IS_COPIED to mark; the
            # refusal itself is judged by the copy checks (CPY-01 for copy=True, CPY-03)
            check.record("FLG-04", "pass", "%s raised %s: no copy was made, so IS_COPIED had nothing to mark "
                         "(the refusal is judged under CPY-01/CPY-03)" % (label, tries.describe_exc(e)))
            continue
        flagged = bool(info["flags"] & pycap.FLAG_IS_COPIED)
        if _copied(target, x, info):
            check.that(flagged, "FLG-04", "%s: the export is a copy (data %#x, tensor at %#x) but flags %#x lack "
                       "IS_COPIED" % (label, info["data"] + info["byte_offset"], tns.native_ptr(target, x),
                                      info["flags"]))
            rd.copy_values(check, "FLG-04", cap, values, "%s: values of the copy" % label,
                           plain=lambda: pycap.versioned_with_flags(x)[0])
        elif flagged:
            check.warn("FLG-04", "%s: IS_COPIED is set but the capsule points at the tensor's own memory" % label)
        else:
            check.that(True, "FLG-04")
        del cap


@producer("FLG-06")
def test_subbyte_padding_flag(target, check):
    """Sub-byte dtypes: IS_SUBBYTE_TYPE_PADDED is set exactly when elements are padded to a byte.
    Byte-sized dtypes never need it."""
    sub = [d for d in target.dtypes() if re.search(SUBBYTE_NAME, d)]
    if not sub:
        raise kit.Unsupported("target %s has no sub-byte dtypes" % target.name)
    for dtype in sub:
        try:
            x = target.make(dtype, (4,), bytes(4))
        except Exception as e:  # noqa: BLE001
            raise kit.Unsupported("cannot make a %s tensor of 4 zero bytes: %s" % (dtype, tries.describe_exc(e)))
        cap, info = pycap.versioned_with_flags(x)
        bits = info["dtype"][1]
        padded = bool(info["flags"] & pycap.FLAG_SUBBYTE_PADDED)
        ext = kit.extent(cap)
        span = ext.get("hi", 0) - ext.get("lo", 0)
        # packed storage of 4 elements spans ceil(4 * bits / 8) bytes, padded storage 4 bytes
        if span >= 4 and (4 * bits + 7) // 8 < 4:
            check.that(padded, "FLG-06", "%s: storage spans %d bytes for 4 elements of %d bits but the PADDED flag "
                       "is clear" % (dtype, span, bits))
        else:
            check.that(True, "FLG-06")
        del cap


# ============================================================================ consumer
@consumer("FLG-03")
def test_readonly_import(target, check):
    """A READ_ONLY capsule: a consumer with read-only arrays honours it (read-only result); one
    without ignores it (preferred over raising). Raising is allowed but warn; a writable view
    from a library that has read-only arrays is warn; a writable copy passes."""
    tries.require_versioned_consumer(target)
    plain = tries.plain_lifetime(target)
    p = kit.RecordingProducer(kit.Forge(versioned=True, shape=(2, 3), flags=pycap.FLAG_READ_ONLY), keep=True)
    att = imp.readonly_import(check, target, p, imp.HostResults(target))
    if att is not None:  # what differs from a plain import: CAP-03's and OWN-03's, on this path
        tries.ownership(check, att.lifetime(), plain, "READ_ONLY capsule: ")


@consumer("FLG-05")
def test_is_copied_import(target, check):
    """An IS_COPIED capsule (alone, and with READ_ONLY) is the consumer's alone: it imports
    normally, its values the producer's and its ownership that of a plain import."""
    imp.is_copied_import(check, target, lambda flags: kit.RecordingProducer(
        kit.Forge(versioned=True, shape=(2, 3), flags=flags), keep=True), imp.HostResults(target))


@consumer("FLG-06")
def test_subbyte_import(target, check):
    """fp4 (code 17, bits 4) packed (flag clear) and padded (IS_SUBBYTE_TYPE_PADDED): a consumer
    that imports them reads the storage the flag describes; one that cannot refuses both."""
    tries.require_versioned_consumer(target)
    refusals = []
    for flags, fill in ((0, bytes([0x21, 0x43])), (pycap.FLAG_SUBBYTE_PADDED, bytes([1, 2, 3, 4]))):
        forge = kit.Forge(versioned=True, shape=(4,), dtype=(17, 4, 1), flags=flags, fill=fill)
        p = kit.RecordingProducer(forge, keep=True)
        att = tries.Attempt(target, p)
        if att.exc is not None:
            check.refusal("FLG-06", att, "flags %#x" % flags)
            refusals.append(att.exc)
            att.drop_capsules()
            tries.settle()
            continue
        d = target.describe(att.result)
        if flags & pycap.FLAG_SUBBYTE_PADDED:
            check.that(d["itemsize"] == 1 and tuple(d["shape"]) == (4,), "FLG-06",
                       "padded fp4 imported as itemsize %r shape %r; expected one byte per element"
                       % (d["itemsize"], d["shape"]))
            if d["itemsize"] == 1:
                got, _ = tries.result_elements(target, att.result)
                check.equal(got, bytes([1, 2, 3, 4]), "FLG-06", "padded fp4 element bytes")
        else:
            check.that(d["ptr"] == forge.buffer_address, "FLG-06", "packed fp4 import does not view the buffer")
        att.result = None
        tries.drop_capsules(p, imported=True)
        tries.settle()
    if len(refusals) == 2:
        raise kit.Unsupported("the consumer imports no fp4 tensors: %s" % tries.describe_exc(refusals[0]))
