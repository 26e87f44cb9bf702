"""LAY-01..11, SEM-01, SEM-02: DLTensor layout, as exported (producer) and as imported (consumer).

Producer checks compare exported metadata with the native layout before reading a byte
(strides in elements, data + byte_offset at the first element), then the element bytes with
`target.expected`. Consumer checks import forged capsules and compare the result's memory
with `Forge.expected_elements()`, and count deleter calls.

Each hypothesis search has its own seed: the examples it draws stay the same when its text
is edited (a derandomized run without one seeds from the source text).
"""
from hypothesis import strategies as st

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import strategies as hh
from support import tensors as tns
from support.marks import consumer, producer


def _exportable(target):
    """The target's dtypes that export at all (legacy), in the library's order."""
    out = []
    for d in [d for d in target.dtypes() if d in dty.DTYPES]:
        try:
            x = target.make(d, (2,), dty.distinct_values(d, (2,)))
            cap = x.__dlpack__()
        except Exception:
            continue
        del cap
        out.append(d)
    return out


def _exporting(target):
    """_exportable(target); Unsupported when no dtype exports."""
    names = _exportable(target)
    if not names:
        raise kit.Unsupported("no dtype of %s exports" % target.name)
    return names


# ============================================================================ producer
@st.composite
def _strided_view_args(draw, names):
    """dtype, shape and native view ops, drawn in this order."""
    dtype = draw(st.sampled_from(names))
    shape = draw(hh.shapes(1, 4, 4, allow_zero=False, max_numel=120))
    ops = draw(hh.view_ops(len(shape)))
    return {"dtype": dtype, "shape": shape, "ops": ops}


def _strided_view_case(target, check, dtype, shape, ops):
    x = target.make(dtype, shape, dty.distinct_values(dtype, shape))
    v, _ = tns.apply_views(target, x, ops)
    if v is None:
        return  # a view op the target does not offer
    expected = target.expected(v)
    try:
        cap = v.__dlpack__()
    except Exception as e:  # noqa: BLE001
        why = check.unclean(e)
        check.record("LAY-11", "fail" if why else "warn",
                     "exporting a %s view %r refused: %s" % (dtype, ops, why or "%s: %s" % (type(e).__name__, e)))
        return
    info = pycap.fields(cap)
    if tns.record_layout(check, target, v, info, dty.itemsize(dtype), ("LAY-03", "LAY-05", "LAY-11", "SEM-01")):
        return
    ext = kit.extent(cap)
    if ext["status"] != "ok":
        check.record("LAY-11", "fail", "exported extent is %s" % ext["status"])
        return
    got = kit.read_elements(cap)
    if got != expected:
        check.record("SEM-01", "fail", "the exported %s view %r (strides %r, byte_offset %d) reads %s, the tensor "
                     "holds %s" % (dtype, ops, info["strides"], info["byte_offset"], got.hex()[:80],
                                   expected.hex()[:80]))


@producer("LAY-03", "LAY-05", "LAY-11", "SEM-01")
def test_producer_strided_views_describe_the_tensor(target, check):
    """Transposed, stepped, flipped (where the library has negative strides) and size-1 views
    export element strides and data + byte_offset at the first element; values match."""
    hh.explore(check, _strided_view_case, target, _strided_view_args(_exporting(target)), max_examples=20,
               seed=0xb2ee60b93b172a6c611dc09ff4afecf100fe082ec8f497ff8cda18c77e384c898b4c3035b1391b6e5da294754f6ab262)


@producer("LAY-06")
def test_producer_versioned_strides_not_null(target, check):
    """A capsule at version >= 1.2 has non-NULL strides when ndim != 0."""
    names = _exportable(target) or list(target.dtypes())
    dtype = "float32" if "float32" in names else names[0]
    for shape in [(3,), (2, 3), (4, 1, 2), (1,), (0, 3)]:
        x = target.make(dtype, shape, dty.distinct_values(dtype, shape))
        info = pycap.fields(pycap.export_kind(x, versioned=True))
        version = info.get("version")
        if info["kind"] != "versioned" or version is None or tuple(version) < (1, 2):
            check.record("LAY-06", "pass", "")  # LAY-06 binds >= 1.2 only (LAY-07 below that)
        elif check.that(info["strides"] is not None, "LAY-06",
                        "versioned %d.%d capsule of shape %r has NULL strides" % (version[0], version[1], shape)):
            check.equal(len(info["strides"]), len(shape), "LAY-06", "strides length")


@producer("LAY-04")
def test_producer_zero_size_data_null(target, check):
    """Zero-size exports: data should be NULL (SHOULD, warn), the extent is empty and nothing
    is read."""
    names = _exporting(target)
    one = target.make(names[0], (1,), dty.distinct_values(names[0], (1,)))
    kinds = [False] + ([True] if pycap.versioned_supported(one) else [])
    for dtype in names[:3]:
        for shape in [(0,), (3, 0), (0, 2, 5), (2, 0, 0)]:
            x = target.make(dtype, shape, b"")
            for versioned in kinds:
                cap = pycap.export_kind(x, versioned)
                info = pycap.fields(cap)
                ext = kit.extent(cap)
                check.that(ext["status"] == "ok" and ext["zero_size"], "LAY-04",
                           "zero-size export of shape %r has extent %r" % (shape, ext))
                check.equal(kit.read_elements(cap), b"", "LAY-04", "elements of a zero-size export")
                if info["data"]:
                    check.warn("LAY-04", "zero-size %s export of shape %r has data=%#x; the header says it should "
                               "be NULL (LAY-04 reading: SHOULD for producers)" % (dtype, shape, info["data"]))


@producer("LAY-08", "LAY-09")
def test_producer_zero_d(target, check):
    """0-d tensors export ndim 0 (shape and strides may be NULL or empty) with their value."""
    for dtype in _exporting(target):
        x = target.make(dtype, (), dty.distinct_values(dtype, (), seed=3))
        cap = x.__dlpack__()
        info = pycap.fields(cap)
        check.equal(info["ndim"], 0, "LAY-09", "%s 0-d export ndim" % dtype)
        check.that(info["shape"] in (None, ()), "LAY-08", "0-d shape %r" % (info["shape"],))
        check.that(info["strides"] in (None, ()), "LAY-08", "0-d strides %r" % (info["strides"],))
        check.equal(kit.read_elements(cap), target.expected(x), "LAY-08", "%s 0-d value" % dtype)


def _high_ndim_case(target, check, dtype, shape):
    try:
        x = target.make(dtype, shape, dty.distinct_values(dtype, shape))
    except Exception:  # noqa: BLE001 - a library limit, not a DLPack matter
        return
    cap = x.__dlpack__()
    info = pycap.fields(cap)
    if tns.record_layout(check, target, x, info, dty.itemsize(dtype)):
        return
    if info["ndim"] != len(shape) or tuple(info["shape"] or ()) != tuple(shape):
        check.record("LAY-09", "fail", "ndim/shape exported as %r/%r for a tensor of shape %r"
                     % (info["ndim"], info["shape"], shape))
    elif kit.read_elements(cap) != target.expected(x):
        check.record("LAY-09", "fail", "values of a %d-d tensor differ after export" % len(shape))


@producer("LAY-09")
def test_producer_high_ndim(target, check):
    """ndim up to 32: ndim, every extent (non-negative) and the values survive export."""
    names = _exporting(target)
    dtype = "float32" if "float32" in names else names[0]
    hh.explore(check, _high_ndim_case, target, st.fixed_dictionaries({"shape": hh.high_ndim_shapes(17, 32)}),
               max_examples=12,
               seed=0x79fab0f546cd1f92b5385436facb685f4220afb0297965b75bb5264c8bd70391e3a78bdc6ea3e9534636912220e164ec,
               dtype=dtype)


@producer("LAY-01")
def test_producer_data_alignment(target, check):
    """data is 256-byte aligned and byte_offset points to the first element (SHOULD; LAY-02
    acknowledges producers that export byte_offset=0 with unaligned data: warn at most)."""
    names = _exporting(target)
    dtype = "float32" if "float32" in names else names[0]
    base = target.make(dtype, (64,), dty.distinct_values(dtype, (64,)))
    cases = [("x", base)]
    # whether one fresh allocation lands 256-aligned is chance for an allocator that aligns
    # less: several of other sizes give a verdict that does not change from run to run
    cases += [("a%d" % n, target.make(dtype, (n,), dty.distinct_values(dtype, (n,)))) for n in (3, 17, 1000)]
    # an offset view's export is never chance
    cases += tns.views(target, base, [("v0", ("slice", 0, 1, None, 1))])
    for var, t in cases:
        info = pycap.fields(t.__dlpack__())
        if info["data"] % 256:
            check.warn("LAY-01", "%s: data %#x is not 256-byte aligned (byte_offset %d); LAY-01 is a SHOULD "
                       "and LAY-02 tells consumers not to rely on it" % (var, info["data"], info["byte_offset"]))
        else:
            check.record("LAY-01", "pass", "")


@producer("LAY-10")
def test_producer_storage_size(target, check):
    """GetDataSize of a compact export, prod(shape) * ceil(bits*lanes/8), is the storage the
    tensor holds. Packed sub-byte exports are left out: the formula overstates their storage by
    construction (DT-09 holds their elements)."""
    names = [d for d in list(target.dtypes()) + list(dty.SUBBYTE) if d in dty.DTYPES]
    tried = 0
    for dtype in dict.fromkeys(names):
        shape = (3, 4)
        try:
            x = target.make(dtype, shape, dty.distinct_values(dtype, shape) if dtype not in dty.SUBBYTE else bytes(12))
            cap = pycap.export_kind(x, dtype in dty.SUBBYTE)
        except Exception:  # kit.Unsupported included: a dtype the target cannot make or export is left out
            continue
        info = pycap.fields(cap)
        code, bits, lanes = info["dtype"]
        tried += 1
        if tns.record_layout(check, target, x, info, dty.itemsize(dtype)):
            continue
        if (bits * lanes < 8 or bits % 8) and not (info.get("flags") or 0) & pycap.FLAG_SUBBYTE_PADDED:
            # packed sub-byte storage: GetDataSize's ceil(bits*lanes/8) per element overstates it
            # by the header's own formula, whatever the producer does; DT-09
            # (test_producer_subbyte_dtypes) holds the packed elements, LAY-10 grades nothing here
            continue
        # GetDataSize must be the storage the tensor has, or a consumer that copies that many
        # bytes loses some
        check.equal(12 * ((bits * lanes + 7) // 8), 12 * dty.itemsize(dtype), "LAY-10", "%s exported as (%d, %d, "
                    "%d): GetDataSize of shape %r against the bytes the tensor holds" % (dtype, code, bits, lanes,
                                                                                         shape))
    if not tried:
        raise kit.Unsupported("no dtype of %s exports" % target.name)


@producer("SEM-01")
def test_producer_exports_share_memory(target, check):
    """Exports are zero-copy: two live exports of one tensor point at the same memory; a copy is
    allowed only when flagged IS_COPIED (versioned)."""
    names = _exporting(target)
    dtype = "float32" if "float32" in names else names[0]
    x = target.make(dtype, (2, 5), dty.distinct_values(dtype, (2, 5)))
    h1 = kit.consume(x.__dlpack__())
    h2 = kit.consume(x.__dlpack__())
    i1, i2 = h1.inspect(), h2.inspect()
    a1, a2 = i1["data"] + i1["byte_offset"], i2["data"] + i2["byte_offset"]
    copied = any((i.get("flags") or 0) & pycap.FLAG_IS_COPIED for i in (i1, i2))
    nat = tns.native_layout(target, x)
    if nat is not None:
        check.that(a1 == nat[2] or copied, "SEM-01", "export points at %#x, the tensor's memory is at %#x, "
                   "and IS_COPIED is not set" % (a1, nat[2]))
    check.that(a1 == a2 or copied, "SEM-01", "two exports of one tensor point at %#x and %#x without IS_COPIED"
               % (a1, a2))
    if not tns.record_layout(check, target, x, i1, dty.itemsize(dtype), ("LAY-05",)):
        check.equal(h1.read_elements(), target.expected(x), "SEM-01", "exported values")
    h1.release()
    h2.release()


@producer("SEM-02")
def test_producer_dense_strided_single_device(target, check):
    """Exports describe dense strided memory on the device __dlpack_device__ names; a
    non-strided (sparse) tensor, where the library has one, may be refused with BufferError."""
    dtype = _exporting(target)[0]
    x = target.make(dtype, (3, 2), dty.distinct_values(dtype, (3, 2)))
    dev = tuple(int(v) for v in x.__dlpack_device__())
    info = pycap.fields(x.__dlpack__())
    check.equal(tuple(info["device"]), dev, "SEM-02", "capsule device against __dlpack_device__")
    check.that(kit.extent(x.__dlpack__())["status"] == "ok", "SEM-02", "export is not a valid strided extent")
    s = target.sparse()
    if s is not None:
        try:
            s.__dlpack__()
            check.record("SEM-02", "warn", "a sparse tensor exported a capsule; SEM-02: only dense strided memory can "
                         "be exported")
        except BufferError:
            check.record("SEM-02", "pass", "")
        except Exception as e:  # noqa: BLE001
            check.record("SEM-02", "fail" if check.unclean(e) else "warn",
                         "sparse export refused with %s: %s; SEM-02 names BufferError (MAY)" % (type(e).__name__, e))


# ============================================================================ consumer
def _check_import_values(check, target, att, clause, what):
    got, d = tries.result_elements(target, att.result)
    check.equal(tuple(int(n) for n in d["shape"]), tuple(att.forge_kwargs.get("shape", (4,))), clause,
                "%s: result shape" % what)
    check.equal(got, att.forge.expected_elements(), clause, "%s: result elements" % what)


@consumer("LAY-03", "OWN-03")
def test_consumer_honours_byte_offset(target, check):
    """A non-zero byte_offset moves the first element: the result reads from data + byte_offset."""
    cases = [dict(dtype=(2, 32, 1), shape=(5,), byte_offset=4), dict(dtype=(2, 32, 1), shape=(2, 3), byte_offset=12),
             dict(dtype=(1, 8, 1), shape=(6,), byte_offset=3), dict(dtype=(2, 64, 1), shape=(3,), byte_offset=256)]
    for kw in cases:
        att = tries.forged(target, kw)
        alive = att.calls()
        if att.refused:
            tries.record_refused(check, "LAY-03", att, "valid capsule with byte_offset=%d" % kw["byte_offset"])
        else:
            got, d = tries.result_elements(target, att.result)
            hint = " (the result starts at data: byte_offset ignored)" if d["ptr"] == att.forge.buffer_address else ""
            check.equal(got, att.forge.expected_elements(), "LAY-03", "byte_offset=%d: result elements%s"
                        % (kw["byte_offset"], hint))
        tries.deleter_accounting(check, att, alive)


@consumer("SEM-01")
def test_consumer_zero_copy(target, check):
    """Importing an aligned contiguous CPU tensor is zero-copy: the result's first element is the
    forged buffer's."""
    for kw in [dict(dtype=(2, 32, 1), shape=(8,)), dict(dtype=(0, 64, 1), shape=(2, 3))]:
        att = tries.forged(target, kw)
        d = tries.imported_elements(check, target, att, "SEM-01", "valid capsule")
        if d is not None:
            tries.zero_copy(check, target, d["ptr"], att.forge.buffer_address, "import of %r" % (kw,))
        att.settle()


@consumer("LAY-02")
def test_consumer_unaligned_data(target, check):
    """data that is element-aligned but not 256-byte aligned imports (SHOULD)."""
    holder = kit.Forge(dtype=(1, 8, 1), shape=(64,))
    for delta, dtype in [(4, (2, 32, 1)), (8, (2, 64, 1)), (1, (1, 8, 1))]:
        att = tries.forged(target, dict(dtype=dtype, shape=(4,), data=holder.buffer_address + delta))
        if att.refused:
            tries.record_refused(check, "LAY-02", att, "data at 256-byte alignment + %d" % delta)
        else:
            _check_import_values(check, target, att, "LAY-02", "data aligned to 256 + %d" % delta)
        att.settle()


@consumer("LAY-07", "OWN-03")
def test_consumer_null_strides_legacy(target, check):
    """NULL strides in a legacy capsule (or a versioned one before 1.2) mean compact row-major."""
    for shape in [(2, 3), (4,), (2, 1, 3), ()]:
        fm = {"legacy": kit.Forge(versioned=False, shape=shape, strides=None),
              "versioned": kit.Forge(versioned=True, version=(1, 1), shape=shape, strides=None)}
        att = tries.forged(target, {"shape": shape}, forge=fm)
        alive = att.calls()
        if att.refused:
            tries.record_refused(check, "LAY-07", att, "NULL strides (%s capsule, shape %r)"
                                 % (att.producer.last_kind, shape), clean="fail")
        else:
            _check_import_values(check, target, att, "LAY-07", "NULL strides, shape %r" % (shape,))
        tries.deleter_accounting(check, att, alive, what="NULL strides: ")


@consumer("LAY-04", "OWN-03")
def test_consumer_zero_size_null_data(target, check):
    """NULL data with a zero-size shape imports (MUST) and the deleter still runs exactly once
    (early, too: a zero-size result views nothing, Attempt.copied).
    A refusal breaks LAY-04 only when it is the NULL pointer that is refused: when the same
    shape and strides over real memory are refused too, the consumer refuses the layout, which
    LAY-11 allows (e.g. a contiguity test that a zero extent defeats)."""
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        att = tries.forged(target, dict(shape=shape, data="null"))
        alive = att.calls()
        if att.refused:
            tries.null_data_refused(check, att, shape, lambda: tries.forged(target, dict(shape=shape, buffer_size=64)))
        else:
            check.equal(tuple(int(n) for n in target.describe(att.result)["shape"]), shape, "LAY-04", "result shape")
        tries.deleter_accounting(check, att, alive, what="zero-size NULL-data import: ")


# The checks below feed the consumer invalid metadata (feeds("invalid")): a clean refusal
# passes, accepting it warns (the behaviour is unspecified), dying on it is a robustness crash
# of the clause the test is marked with (LAY-09 or LAY-10). The deleter count of a refusal is
# recorded under OWN-03 explicitly: giving the tensor back is owed whatever the metadata.
@consumer("LAY-09", feeds="invalid")
def test_consumer_refuses_negative_extent(target, check):
    """A negative extent is invalid: the consumer raises, and the deleter still runs once."""
    for shape in [(-1,), (2, -3), (4, 0, -2)]:
        tries.must_refuse(check, target, dict(shape=shape, buffer_size=256), "LAY-09", "shape %r" % (shape,))


@consumer("LAY-09", feeds="invalid")
def test_consumer_refuses_negative_ndim(target, check):
    """ndim < 0 is invalid: the consumer raises without reading shape or strides."""
    tries.must_refuse(check, target, dict(shape=(), ndim=-1, buffer_size=64), "LAY-09", "ndim -1")


@consumer("LAY-09", feeds="invalid")
def test_consumer_refuses_null_shape_with_ndim(target, check):
    """ndim > 0 with a NULL shape pointer is invalid: the consumer raises, never dereferences."""
    tries.must_refuse(check, target, dict(shape=(2, 3), shape_null=True, buffer_size=64), "LAY-09",
                      "ndim 2 with NULL shape")


@consumer("LAY-08")
def test_consumer_ndim0(target, check):
    """ndim 0 with NULL strides imports in any capsule; NULL shape as well from v1.2."""
    for null_shape in (False, True):
        att = tries.forged(target, dict(shape=(), strides=None, shape_null=null_shape))
        if att.refused:
            tries.ndim0_refused(check, att, null_shape)
        else:
            _check_import_values(check, target, att, "LAY-08", "0-d, NULL %s" % ("shape" if null_shape else "strides"))
        att.settle()


def _strides_read_as_bytes(d, shape, strides, itemsize, data):
    """LAY-05 on the consumer side: a zero-copy result (at `data`) whose strides differ from the
    view's, on a dimension of extent > 1, only as the view's strides read as byte counts do
    (each divided by the itemsize, rounded toward 0)."""
    if d["ptr"] != data:
        return False
    pairs = [(int(r), s) for r, s, n in zip(d["strides"], strides, shape) if n > 1 and int(r) != s]
    return bool(pairs) and all(r == int(s / itemsize) for r, s in pairs)


def _view_import_case(target, check, shape, strides, byte_offset, buffer_size, itemsize, dtype, lay05=False):
    """Imports the strided view (hh.views) of a forged buffer: data points at the first element
    (byte_offset 0), so that LAY-03 is not tested here."""
    holder = kit.Forge(dtype=(1, 8, 1), shape=(buffer_size,))
    kw = dict(dtype=dtype, shape=shape, strides=strides, data=holder.buffer_address + byte_offset)
    att = tries.forged(target, kw)
    if att.refused:
        why = check.unclean(att)
        if why:
            check.record("LAY-11", "fail", "strided view %r refused uncleanly: %s" % (kw, why))
    else:
        got, d = tries.result_elements(target, att.result)
        exp = att.forge.expected_elements()
        if tuple(d["shape"]) != shape or got != exp:
            as_bytes = lay05 and tuple(d["shape"]) == shape and _strides_read_as_bytes(d, shape, strides, itemsize,
                                                                                       kw["data"])
            check.record("LAY-05" if as_bytes else "LAY-11", "fail",
                         "imported view shape %r strides %r byte_offset %d reads %s, expected %s (result shape %r, "
                         "strides %r%s)" % (shape, strides, byte_offset, got.hex()[:64], exp.hex()[:64], d["shape"],
                                            d["strides"], ": the strides read as bytes" if as_bytes else ""))
    att.settle()
    del holder


@consumer("LAY-11", "LAY-05")
def test_consumer_strided_views(target, check):
    """Transposed, stepped and size-1-odd-stride layouts with byte_offset import with the right
    values, or are refused cleanly (LAY-11: import or copy/raise)."""
    views = hh.views(itemsize=4, min_ndim=1, max_ndim=4, allow_negative=False).map(lambda v: v._asdict())
    hh.explore(check, _view_import_case, target, views, max_examples=20,
               seed=0xaf2a4e2b61aab40669481ec63662f082491422370d0f9f5a208da288c1146f75587900e197b57bf6e689d2f3291a3462,
               dtype=(2, 32, 1), lay05=True)


@consumer("LAY-11")
def test_consumer_negative_strides(target, check):
    """Negative strides are a legal layout: import with the right values or refuse cleanly."""
    views = hh.views(itemsize=4, min_ndim=1, max_ndim=3, allow_negative=True).filter(
        lambda v: any(s < 0 for n, s in zip(v.shape, v.strides) if n > 1)).map(lambda v: v._asdict())
    hh.explore(check, _view_import_case, target, views, max_examples=12,
               seed=0xa4647a5122e882c74a3e868e0e39094338d13c51ee304b5dc42c4942c1046695c6beaea8c14c875646a42ca51da61bbe,
               dtype=(2, 32, 1))


@consumer("LAY-10", feeds="invalid")  # a crash on this input is LAY-10's; OWN-03 is recorded explicitly
def test_consumer_huge_shape(target, check):
    """A shape whose storage size overflows int64 is refused (importing it warns: invalid input);
    the deleter runs once, and never while an imported result lives."""
    for shape in [(1 << 62, 4), (1 << 31, 1 << 31, 1 << 31)]:
        att = tries.forged(target, dict(shape=shape, buffer_size=64))
        alive = att.calls()
        if att.refused:
            check.refusal("LAY-10", att, "overflowing shape %r" % (shape,))
        else:
            check.accepted("LAY-10", "shape %r (storage size prod(shape)*4 overflows int64) was imported" % (shape,))
        tries.deleter_accounting(check, att, alive, what="shape %r: " % (shape,))


@consumer("LAY-09")  # a crash on this input is LAY-09's; OWN-03 is recorded explicitly
def test_consumer_shape_beyond_memory(target, check):
    """A valid int64 shape claiming more memory than exists (2**40 float32 over 64 bytes) may be
    imported as a view (a consumer cannot know) or refused; it is never read here."""
    att = tries.forged(target, dict(shape=(1 << 40,), buffer_size=64))
    alive = att.calls()
    if att.refused:
        check.refusal("LAY-09", att, "shape (2**40,)")
    else:
        check.record("LAY-09", "pass", "")  # imported as a view; nothing reads it
    tries.deleter_accounting(check, att, alive, what="shape (2**40,): ")


@consumer("LAY-10", feeds="invalid")  # a crash on this input is LAY-10's; OWN-03 is recorded explicitly
def test_consumer_huge_strides(target, check):
    """Strides whose byte span overflows int64 are refused or imported without a crash; the
    deleter runs once, and never while an imported result lives."""
    att = tries.forged(target, dict(shape=(2,), strides=(1 << 62,), buffer_size=64))
    alive = att.calls()
    if att.refused:
        check.refusal("LAY-10", att, "overflowing strides")
    else:
        d = target.describe(att.result)
        check.accepted("LAY-10", "strides (2**62,) (byte span overflows int64) imported as strides %r"
                       % (tuple(d["strides"]),))
    tries.deleter_accounting(check, att, alive, what="strides (2**62,): ")
