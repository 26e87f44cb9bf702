"""DT-01..13: dtype codes, bits and lanes, as exported (producer) and as imported (consumer).

Producer: every dtype the library has exports the (code, bits, lanes) of the header and the
same element bytes. Consumer: forged capsules of each dtype import with the right item size
and bytes (a refusal is not a breach, except that refusing a dtype the library itself has is
reported as warn), and invalid dtypes (unknown codes, fp6/fp4 with other bits) are refused.
An unknown code is VER-09's case (unknown values must not be misread; DT-01 binds the producer
that sent it). A result that carries the unknown dtype unchanged or keeps untyped bytes (a byte
buffer such as mpi4py's) misreads nothing: warn, per the catalogue readings of VER-09 and
DT-07/08; packed fp4 kept packed imposes no element order (DT-09).
"""

from dlconform import _probe, kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import readings as rd
from support import tensors as tns
from support.marks import consumer, producer


def _values(name, n, seed=0):
    """n elements of `name`: distinct_values, and for a sub-byte type one element a byte, each
    within its bits."""
    if name in dty.SUBBYTE:
        return bytes((i * 5 + seed) & ((1 << dty.DTYPES[name][1]) - 1) for i in range(n))
    return dty.distinct_values(name, (n,), seed)


# ============================================================================ producer
@producer("DT-01", "DT-03", "DT-04", "DT-05", "DT-06", "DT-10", "DT-13")
def test_producer_dtype_fields_and_bytes(target, check):
    """Each native dtype exports the header's (code, bits, lanes) and the same element bytes."""
    seen = set()
    refused = {}
    for name in [n for n in target.dtypes() if n in dty.DTYPES and n not in dty.SUBBYTE]:
        x = target.make(name, (2, 3), _values(name, 6))
        cl = dty.clause_of(name)
        try:
            cap = x.__dlpack__()
        except Exception as e:  # noqa: BLE001 - coverage is DT-12's business
            refused[cl] = "%s export refused (%s: %s)" % (name, type(e).__name__, e)
            continue
        seen.add(cl)
        info = pycap.fields(cap)
        code, bits, lanes = info["dtype"]
        check.that(code in range(0, 18), "DT-01", "%s exported with code %d, not a DLDataTypeCode" % (name, code))
        check.equal(lanes, 1, "DT-10", "%s lanes" % name)
        same = check.equal((code, bits, lanes), dty.DTYPES[name], cl, "%s (code, bits, lanes)" % name)
        for clause, msg in _probe.check(cap):
            if clause.startswith("DT-"):
                check.record(clause, "fail", "%s: %s" % (name, msg))
        if not tns.record_layout(check, target, x, info, dty.itemsize(name)) and same:
            check.equal(kit.read_elements(cap), target.expected(x), cl, "%s element bytes" % name)
    check.record("DT-01", "pass", "")
    check.record("DT-10", "pass", "")
    for cl in ("DT-03", "DT-04", "DT-05", "DT-06", "DT-13"):
        if cl not in seen:
            check.record(cl, "unsupported", refused.get(cl) or "%s has no dtype of this kind" % target.name)


@producer("DT-12")
def test_producer_array_api_dtypes_export(target, check):
    """Every array-API dtype the library has exports (DT-12 reading: a dtype the library lacks
    is not counted)."""
    have = [d for d in dty.ARRAY_API_DTYPES if d in target.dtypes()]
    if not have:
        raise kit.Unsupported("%s has none of the array-API dtypes" % target.name)
    for name in have:
        x = target.make(name, (3,), _values(name, 3))
        try:
            x.__dlpack__()
        except Exception as e:  # noqa: BLE001
            if name == "bool" and not check.unclean(e):
                check.warn("DT-12", "bool export refused (%s: %s); DT-12 lists bool, but kDLBool exists only from "
                           "DLPack 0.8 (DT-03) and a legacy-only producer does not say which version it implements"
                           % (type(e).__name__, e))
            else:
                check.record("DT-12", "fail", "%s export refused (%s: %s)" % (name, type(e).__name__, e))
            continue
        check.record("DT-12", "pass", "")


@producer("DT-02")
def test_producer_native_byte_order(target, check):
    """Exports hold native-order bytes; a non-native-order array (numpy) should be refused."""
    name = next((d for d in ("int32", "float32", "int16") if d in target.dtypes()), None)
    if name is None:
        raise kit.Unsupported("no multi-byte dtype in %s" % target.name)
    vals = _values(name, 4)
    x = target.make(name, (4,), vals)
    cap = x.__dlpack__()
    if not tns.record_layout(check, target, x, pycap.fields(cap), dty.itemsize(name)):
        check.equal(kit.read_elements(cap), vals, "DT-02", "native-order element bytes")
    y = target.byteswapped(x)
    if y is not None:
        try:
            y.__dlpack__()
            check.warn("DT-02", "a %s array in non-native byte order was exported" % name)
        except Exception as e:  # noqa: BLE001
            check.refusal("DT-02", e, "non-native byte order")


@producer("DT-07", "DT-08", "DT-09")
def test_producer_subbyte_dtypes(target, check):
    """fp6 exports bits 6, fp4 bits 4 (lanes 1); packed data (no PADDED flag) is little
    bit-endian, padded data holds one element per byte."""
    done, skipped = set(), []
    for name in dty.SUBBYTE:
        n = 5
        try:
            x = target.make(name, (n,), _values(name, n))
        except Exception:
            continue
        cap, e = kit.attempt(lambda: pycap.export_kind(x, versioned=True))
        if isinstance(e, kit.Unsupported):  # a legacy-only producer: its legacy export
            cap, e = kit.attempt(x.__dlpack__)
        if e is not None:
            continue
        info = pycap.fields(cap)
        code, bits, lanes = info["dtype"]
        cl = dty.clause_of(name)
        if bits * lanes % 8 == 0 and cl not in ("DT-07", "DT-08"):
            # int4/uint4 exported as whole bytes (torch: (0, 8, 1)): no sub-byte storage, so no
            # element order for DT-09 to judge (fp6/fp4 fix their bits: DT-07/DT-08 below)
            skipped.append("%s exports as %r" % (name, (code, bits, lanes)))
            continue
        if cl in ("DT-07", "DT-08"):
            check.equal((code, bits, lanes), dty.DTYPES[name], cl, "%s (code, bits, lanes)" % name)
            done.add(cl)
        expected = target.expected(x)
        if (info.get("flags") or 0) & pycap.FLAG_SUBBYTE_PADDED:
            check.equal(kit.read_elements(cap), expected, "DT-09", "%s padded elements" % name)
        else:
            raw = kit.read_storage(cap, (n * bits + 7) // 8)  # device memory through the runtime
            got = bytes((int.from_bytes(raw, "little") >> (i * bits)) & ((1 << bits) - 1) for i in range(n))
            check.equal(got, expected, "DT-09", "%s packed elements (little bit-endian)" % name)
        done.add("DT-09")
    if not done:
        why = " (%s)" % "; ".join(skipped) if skipped else ""
        raise kit.Unsupported("%s exports no sub-byte dtype%s" % (target.name, why))
    for cl in ("DT-07", "DT-08", "DT-09"):
        if cl not in done:
            check.record(cl, "unsupported", "%s has no dtype of this kind" % target.name)


def _discovered_export(x, versioned):
    """(inspect() dict, read_elements() or None) of x's export, or (None, exception)."""
    try:
        cap = pycap.export_kind(x, versioned)
    except kit.Unsupported:
        raise
    except Exception as e:  # noqa: BLE001 - the caller judges the class
        return None, e
    info = pycap.fields(cap)  # Unsupported for a capsule whose fields cannot be read
    try:
        return info, kit.read_elements(cap)
    except ValueError:
        return info, None


@producer("ERR-01", feeds="valid")
def test_producer_every_discovered_dtype(target, check):
    """Every dtype the library has, found in it at run time (Target.discover_dtypes(): float8
    families, bool, bfloat16, complex32, and dtypes DLPack has no type for) and exported in
    each capsule kind: a DLPack type exports its header's (code, bits, lanes) and the tensor's
    bytes, or is refused with BufferError (ERR-01: warn for another class; DT-12 judges the
    array-API dtypes); a dtype DLPack has no type for is refused with BufferError (ERR-01), and
    exported under a DLPack code it is warn (the consumer reads it as that type) unless the
    code is no DLDataTypeCode (DT-01)."""
    found = target.discover_dtypes()
    if not found:
        raise kit.Unsupported("%s lists no dtypes" % target.name)
    x0 = target.make(*next(((n, (3,), bytes(3 * size)) for n, (_, size) in found.items())))
    kinds = [False] + ([True] if pycap.versioned_supported(x0) else [])
    for name, (dlpack, size) in found.items():
        if dlpack in dty.SUBBYTE:
            continue  # test_producer_subbyte_dtypes: packed or padded storage
        vals = _values(dlpack, 3) if dlpack else bytes((i * 7 + 1) & 0x3F for i in range(3 * size))
        try:
            x = target.make(name, (3,), vals)
        except Exception as e:  # noqa: BLE001 - a dtype the adapter cannot fill
            check.record("ERR-01", "pass", "%s: the adapter cannot make one (%s)" % (name, tries.describe_exc(e)))
            continue
        for versioned in kinds:
            what = "%s (%s) %s export" % (name, dlpack or "no DLPack type", "versioned" if versioned else "legacy")
            info, got = _discovered_export(x, versioned)
            if info is None:
                exc = got
                if check.unclean(exc):
                    check.record("ERR-01", "fail", "%s raised %s" % (what, check.unclean(exc)))
                elif not isinstance(exc, BufferError) and not (dlpack in dty.ARRAY_API_DTYPES):
                    check.warn("ERR-01", "%s refused with %s; data that cannot be exported should raise BufferError"
                               % (what, tries.describe_exc(exc, 200)))
                continue
            code = tuple(info["dtype"] or ())
            if dlpack is None:
                if code and code[0] not in range(18):
                    check.record("DT-01", "fail", "%s: code %d is no DLDataTypeCode" % (what, code[0]))
                else:
                    check.warn("ERR-01", "%s was exported as (code, bits, lanes) %r: DLPack has no type for it, "
                               "so a consumer reads it as that type; it should be refused with BufferError"
                               % (what, code))
            elif check.equal(code, dty.DTYPES[dlpack], dty.clause_of(dlpack), "%s (code, bits, lanes)" % what) \
                    and got is not None and not tns.compare_layout(target, x, info, dty.itemsize(dlpack)):
                check.equal(got, target.expected(x), dty.clause_of(dlpack), "%s element bytes" % what)
    check.record("ERR-01", "pass", "")


# ============================================================================ consumer
@consumer("DT-03", "DT-04", "DT-05", "DT-06", "DT-13")
def test_consumer_imports_dtypes(target, check):
    """Forged capsules of each standard and fp8 dtype import with the right item size, kind and
    bytes, or are refused (warn when the library itself has the dtype)."""
    seen = set()
    notes = {}
    for name in [n for n in dty.DTYPES if n not in dty.SUBBYTE]:
        cl = dty.clause_of(name)
        kw = dict(dtype=dty.DTYPES[name], shape=(4,))
        if name == "bool":
            kw["fill"] = dty.distinct_values("bool", (4,))
        att = tries.forged(target, kw)
        if att.refused:
            dty.refused_dtype(check, target, att, name, cl, seen, notes)
        else:
            seen.add(cl)
            got, d = tries.result_elements(target, att.result)
            check.equal(d["itemsize"], dty.itemsize(name), cl, "%s result item size" % name)
            check.equal(got, att.forge.expected_elements(), cl, "%s result bytes" % name)
            dty.judge_kind(check, target, att.result, name, cl)
        att.settle()
    dty.unseen_kinds(check, seen, notes)


@consumer("DT-07", "DT-08", "OWN-03")
def test_consumer_refuses_wrong_subbyte_bits(target, check):
    """fp6 (codes 15, 16) with bits != 6 and fp4 (17) with bits != 4: the consumer must stop
    importing. dlpack.h says so of every consumer, whether or not its result keeps an element
    type (a byte buffer too), so this is no unspecified invalid input: importing fails."""
    for dtype in [(15, 8, 1), (16, 8, 1), (17, 8, 1), (17, 2, 1), (15, 4, 1)]:
        cl = "DT-08" if dtype[0] == 17 else "DT-07"
        att = tries.forged(target, dict(dtype=dtype, shape=(4,), buffer_size=64))
        if not att.refused:
            held = tries.result_dtype(target, att.result)
            check.record(cl, "fail", "dtype %r was imported (%s; result %r); dlpack.h: a consumer that sees "
                         "other bits must stop importing" % (
                             dtype, "as untyped bytes" if held == "bytes" else "as dtype %r" % (held,) if held
                             else "a typed result", tries.Shown(target, att.result)))
        else:
            check.refusal(cl, att, "dtype %r" % (dtype,))
        tries.deleter_once(check, att.settle(), "dtype %r, imported or refused and let go" % (dtype,))


@consumer("VER-09", "OWN-03")
def test_consumer_refuses_unknown_dtype_codes(target, check):
    """A code that is no DLDataTypeCode (18, 99, 255) is never imported as something else
    (VER-09: unknown values must not be misread; DT-01 binds the producer that sent it).
    Refusing passes; carrying the code unchanged, or keeping untyped bytes, is warn (reading)."""
    for dtype in [(18, 32, 1), (99, 32, 1), (255, 8, 1)]:
        att = tries.forged(target, dict(dtype=dtype, shape=(4,), buffer_size=64))
        if not att.refused:
            check.record("VER-09", *rd.unknown_value_verdict(target, att, "unknown dtype %r" % (dtype,), dtype=dtype))
        else:
            check.refusal("VER-09", att, "dtype %r" % (dtype,))
        tries.deleter_once(check, att.settle(), "dtype %r, imported or refused and let go" % (dtype,))


@consumer("DT-10", "DT-11", "DT-09")
def test_consumer_lanes_opaque_packed(target, check):
    """Vector lanes import with itemsize bits*lanes/8 or are refused; kDLOpaqueHandle is by
    agreement (import or refuse); packed sub-byte data imports little bit-endian or is refused."""
    for dtype in dty.VECTOR_DTYPES:
        att = tries.forged(target, dict(dtype=dtype, shape=(3,)))
        if att.refused:
            check.refusal("DT-10", att, "dtype %r" % (dtype,))
        else:
            got, d = tries.result_elements(target, att.result)
            ok = (d["itemsize"] == dty.itemsize(dtype) and got == att.forge.expected_elements()) or (
                d["itemsize"] == dtype[1] // 8 and tuple(d["shape"]) == (3, dtype[2]))
            check.that(ok, "DT-10", "dtype %r imported with shape %r itemsize %d" % (dtype, d["shape"], d["itemsize"]))
        att.settle()
    att = tries.forged(target, dict(dtype=(3, 64, 1), shape=(2,)))
    if att.refused:
        check.refusal("DT-11", att, "opaque handle")
    else:
        check.record("DT-11", "pass", "")
    att.settle()
    att = tries.forged(target, dict(dtype=(17, 4, 1), shape=(4,), flags=0, fill=b"\x21\x43"))
    if att.refused:
        check.refusal("DT-09", att, "packed fp4")
    else:
        d = target.describe(att.result)
        held = tries.result_dtype(target, att.result)
        if held in ("bytes", (17, 4, 1)):
            # kept packed: no element is formed, so no bit order is imposed; the storage must
            # be the producer's bytes, unchanged
            raw = bytes(kit.gather(d["ptr"], (2,), (1,), 1))
            if check.equal(raw, b"\x21\x43", "DT-09", "packed fp4 storage kept as %s"
                           % ("untyped bytes" if held == "bytes" else "dtype (17, 4, 1)")):
                check.record("DT-09", "pass", "packed fp4 kept packed (%s): the storage bytes are the producer's, "
                             "no element order imposed" % ("untyped bytes" if held == "bytes"
                                                           else "dtype (17, 4, 1) unchanged"))
        elif d["itemsize"] == 1 and tuple(d["shape"]) == (4,):
            got, _ = tries.result_elements(target, att.result)
            check.equal(got, b"\x01\x02\x03\x04", "DT-09", "packed fp4 0x21 0x43 unpacked little bit-endian")
        else:
            check.warn("DT-09", "packed fp4 imported as shape %r itemsize %d: cannot tell its element order"
                       % (d["shape"], d["itemsize"]))
    att.settle()
