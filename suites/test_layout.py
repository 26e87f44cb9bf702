"""LAY-01..11, SEM-01, SEM-02: DLTensor layout, as exported (producer) and as imported (consumer).

Producer checks compare exported metadata with the native layout before reading a byte
(strides in elements, data + byte_offset at the first element), then the element bytes with
`target.expected`. Consumer checks import forged capsules and compare the result's memory
with `Forge.expected_elements()`, and count deleter calls.
"""
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import strategies as S
from _layout_support import (
    must_refuse, repro_once,
    DLPACK_FLAG_IS_COPIED, DLPACK_FLAG_SUBBYTE_PADDED, Attempt, attempt_lines, bad_exception, bool_values,
    compare_layout, apply_ops, deleter_accounting, export, make_lines, result_bytes, run_cases, setup_lines,
    settle_records, values_for, versioned_supported, lib)
from dlconform import _probe, _ref
from dlconform.verdicts import Unsupported

P = pytest.mark.role("producer")
C = pytest.mark.role("consumer")


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _values(dtype, shape, seed=0):
    n = _numel(shape)
    return bool_values(n) if dtype == "bool" else values_for(S.itemsize_of(dtype), n, seed)


def _exportable(target):
    """The target's dtypes that export at all (legacy), in the library's order."""
    out = []
    for d in target.dtypes():
        if d not in S.DTYPES:
            continue
        try:
            x = target.make(d, (2,), _values(d, (2,)))
            cap = x.__dlpack__()
        except Exception:
            continue
        del cap
        out.append(d)
    return out


# ============================================================================ producer
@pytest.mark.clause("LAY-03", "LAY-05", "LAY-11", "SEM-01")
@P
def test_producer_strided_views_describe_the_tensor(target, check):
    """Transposed, stepped, flipped (where the library has negative strides) and size-1 views
    export element strides and data + byte_offset at the first element; values match."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    state = {}
    clauses = ("LAY-03", "LAY-05", "LAY-11", "SEM-01")

    @S.settings_bounded(20)
    @given(st.data())
    def body(data):
        dtype = data.draw(st.sampled_from(names), "dtype")
        shape = data.draw(S.shapes(1, 4, 4, allow_zero=False, max_numel=120), "shape")
        ops = data.draw(S.view_ops(len(shape)), "ops")
        vals = _values(dtype, shape)
        x = target.make(dtype, shape, vals)
        v, oplines, bad = apply_ops(target, x, ops)
        if v is None:
            note("view op %r not offered by %s" % (bad, target.name))
            return
        expected = target.expected(v)
        lines = (setup_lines(target) + make_lines(target, dtype, shape, vals) + oplines +
                 ["v = %s" % ("v%d" % (len(ops) - 1) if ops else "x"), "cap = v.__dlpack__()",
                  "print(_probe.inspect(cap))",
                  "print(_probe.read_elements(cap).hex())  # expected %s" % expected.hex()[:200]])
        note("\n".join(lines))
        try:
            cap = v.__dlpack__()
        except Exception as e:  # noqa: BLE001
            why = bad_exception(type(e), str(e))
            rec = [("LAY-11", "fail" if why else "warn",
                    "exporting a %s view %r refused: %s" % (dtype, ops, why or "%s: %s" % (type(e).__name__, e)))]
            return settle_records(check, state, rec, lines)
        info = _probe.inspect(cap)
        problems = compare_layout(target, v, info, S.itemsize_of(dtype))
        recs = [(c, "fail", m) for c, m in problems if c in clauses]
        if not recs:
            ext = _probe.extent(cap)
            if ext["status"] != "ok":
                recs.append(("LAY-11", "fail", "exported extent is %s" % ext["status"]))
            else:
                got = _probe.read_elements(cap)
                if got != expected:
                    recs.append(("SEM-01", "fail", "the exported %s view %r (strides %r, byte_offset %d) reads %s, "
                                 "the tensor holds %s" % (dtype, ops, info["strides"], info["byte_offset"],
                                                           got.hex()[:80], expected.hex()[:80])))
        settle_records(check, state, recs, lines)

    run_cases(check, clauses, body)


@pytest.mark.clause("LAY-06")
@P
def test_producer_versioned_strides_not_null(target, check):
    """A capsule at version >= 1.2 has non-NULL strides when ndim != 0."""
    names = _exportable(target) or list(target.dtypes())
    dtype = "float32" if "float32" in names else names[0]
    shapes = [(3,), (2, 3), (4, 1, 2), (1,), (0, 3)]
    for shape in shapes:
        vals = _values(dtype, shape)
        x = target.make(dtype, shape, vals)
        cap = export(x, versioned=True)
        info = _probe.inspect(cap)
        repro_once(check, setup_lines(target) + make_lines(target, dtype, shape, vals) +
                    ["cap = x.__dlpack__(max_version=(1, 3))", "print(_probe.inspect(cap))"])
        version = info.get("version")
        if info["kind"] != "versioned" or version is None or tuple(version) < (1, 2):
            check.record("LAY-06", "pass", "")  # LAY-06 binds >= 1.2 only (LAY-07 below that)
            continue
        check.that(info["strides"] is not None, "LAY-06",
                   "versioned %d.%d capsule of shape %r has NULL strides" % (version[0], version[1], shape))
        if info["strides"] is not None:
            check.equal(len(info["strides"]), len(shape), "LAY-06", "strides length")


@pytest.mark.clause("LAY-04")
@P
def test_producer_zero_size_data_null(target, check):
    """Zero-size exports: data should be NULL (SHOULD, warn), the extent is empty and nothing
    is read."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    kinds = [False] + ([True] if versioned_supported(target.make(names[0], (1,), _values(names[0], (1,)))) else [])
    for dtype in names[:3]:
        for shape in [(0,), (3, 0), (0, 2, 5), (2, 0, 0)]:
            x = target.make(dtype, shape, b"")
            for versioned in kinds:
                call = "x.__dlpack__(max_version=(1, 3))" if versioned else "x.__dlpack__()"
                repro_once(check, setup_lines(target) + make_lines(target, dtype, shape, b"") +
                            ["cap = %s" % call, "print(_probe.inspect(cap)['data'])  # should be 0 (NULL)"])
                cap = export(x, versioned)
                info = _probe.inspect(cap)
                ext = _probe.extent(cap)
                check.that(ext["status"] == "ok" and ext["zero_size"], "LAY-04",
                           "zero-size export of shape %r has extent %r" % (shape, ext))
                check.equal(_probe.read_elements(cap), b"", "LAY-04", "elements of a zero-size export")
                if info["data"]:
                    check.warn("LAY-04", "zero-size %s export of shape %r has data=%#x; the header says it should "
                               "be NULL (LAY-04 reading: SHOULD for producers)" % (dtype, shape, info["data"]))


@pytest.mark.clause("LAY-08", "LAY-09")
@P
def test_producer_zero_d(target, check):
    """0-d tensors export ndim 0 (shape and strides may be NULL or empty) with their value."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    for dtype in names:
        vals = _values(dtype, (), seed=3)
        x = target.make(dtype, (), vals)
        repro_once(check, setup_lines(target) + make_lines(target, dtype, (), vals) +
                    ["cap = x.__dlpack__()", "print(_probe.inspect(cap), _probe.read_elements(cap).hex())"])
        cap = x.__dlpack__()
        info = _probe.inspect(cap)
        check.equal(info["ndim"], 0, "LAY-09", "%s 0-d export ndim" % dtype)
        check.that(info["shape"] in (None, ()), "LAY-08", "0-d shape %r" % (info["shape"],))
        check.that(info["strides"] in (None, ()), "LAY-08", "0-d strides %r" % (info["strides"],))
        check.equal(_probe.read_elements(cap), target.expected(x), "LAY-08", "%s 0-d value" % dtype)


@pytest.mark.clause("LAY-09", "LAY-08")
@P
def test_producer_high_ndim(target, check):
    """ndim up to 32: ndim, every extent (non-negative) and the values survive export."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    dtype = "float32" if "float32" in names else names[0]
    state = {}

    @S.settings_bounded(12)
    @given(S.high_ndim_shapes(17, 32))
    def body(shape):
        vals = _values(dtype, shape)
        try:
            x = target.make(dtype, shape, vals)
        except Exception as e:  # noqa: BLE001 - a library limit, not a DLPack matter
            note("%s cannot make ndim %d: %s" % (target.name, len(shape), e))
            return
        lines = setup_lines(target) + make_lines(target, dtype, shape, vals) + [
            "cap = x.__dlpack__()", "i = _probe.inspect(cap); print(i['ndim'], i['shape'])"]
        note("\n".join(lines))
        cap = x.__dlpack__()
        info = _probe.inspect(cap)
        recs = [(c, "fail", m) for c, m in compare_layout(target, x, info, S.itemsize_of(dtype))]
        if recs:
            pass
        elif info["ndim"] != len(shape) or tuple(info["shape"] or ()) != tuple(shape):
            recs.append(("LAY-09", "fail", "ndim/shape exported as %r/%r for a tensor of shape %r"
                         % (info["ndim"], info["shape"], shape)))
        elif _probe.read_elements(cap) != target.expected(x):
            recs.append(("LAY-09", "fail", "values of a %d-d tensor differ after export" % len(shape)))
        settle_records(check, state, recs, lines)

    run_cases(check, ("LAY-09", "LAY-08"), body)


@pytest.mark.clause("LAY-01")
@P
def test_producer_data_alignment(target, check):
    """data is 256-byte aligned and byte_offset points to the first element (SHOULD; LAY-02
    acknowledges producers that export byte_offset=0 with unaligned data: warn at most)."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    dtype = "float32" if "float32" in names else names[0]
    base = target.make(dtype, (64,), _values(dtype, (64,)))
    cases = [("x", base, [])]
    v, lines, _ = apply_ops(target, base, [("slice", 0, 1, None, 1)])
    if v is not None:
        cases.append(("v0", v, lines))
    for var, t, lines in cases:
        repro_once(check, setup_lines(target) + make_lines(target, dtype, (64,), _values(dtype, (64,))) + lines +
                    ["cap = %s.__dlpack__()" % var, "i = _probe.inspect(cap)",
                     "print(hex(i['data']), i['data'] % 256, i['byte_offset'])"])
        info = _probe.inspect(t.__dlpack__())
        if info["data"] % 256:
            check.warn("LAY-01", "%s: data %#x is not 256-byte aligned (byte_offset %d); LAY-01 is a SHOULD "
                       "and LAY-02 tells consumers not to rely on it" % (var, info["data"], info["byte_offset"]))
        else:
            check.record("LAY-01", "pass", "")


@pytest.mark.clause("LAY-10")
@P
def test_producer_storage_size(target, check):
    """A compact export spans prod(shape) * ceil(bits*lanes/8) bytes (GetDataSize); for packed
    sub-byte dtypes that formula overstates the storage (LAY-10 reading: warn)."""
    names = [d for d in list(target.dtypes()) + list(S.SUBBYTE) if d in S.DTYPES]
    tried = 0
    for dtype in dict.fromkeys(names):
        shape = (3, 4)
        try:
            x = target.make(dtype, shape, _values(dtype, shape) if dtype not in S.SUBBYTE else bytes(12))
        except Exception:
            continue
        versioned = dtype in S.SUBBYTE
        try:
            cap = export(x, versioned)
        except Unsupported:
            continue
        except Exception:
            continue
        tried += 1
        info = _probe.inspect(cap)
        ext = _probe.extent(cap)
        code, bits, lanes = info["dtype"]
        repro_once(check, setup_lines(target) + make_lines(target, dtype, shape, bytes(12 * S.itemsize_of(dtype))) +
                    ["cap = x.__dlpack__(%s)" % ("max_version=(1, 3)" if versioned else ""),
                     "print(_probe.inspect(cap)['dtype'], _probe.extent(cap))"])
        layout = compare_layout(target, x, info, S.itemsize_of(dtype))
        for c, m in layout:
            check.record(c, "fail", m)
        if layout:
            continue
        span = ext["hi"] - ext["lo"]
        formula = 12 * ((bits * lanes + 7) // 8)
        subbyte = bits * lanes < 8 or bits % 8
        padded = bool((info.get("flags") or 0) & DLPACK_FLAG_SUBBYTE_PADDED)
        if subbyte and not padded:
            packed = (12 * bits * lanes + 7) // 8
            if span != formula:
                check.warn("LAY-10", "%s packed storage spans %d bytes, GetDataSize gives %d, packed size is %d "
                           "(LAY-10 reading: the header formula overstates packed sub-byte storage)"
                           % (dtype, span, formula, packed))
            else:
                check.record("LAY-10", "pass", "")
            continue
        check.equal(span, formula, "LAY-10", "%s (%d, %d, %d) compact export of shape %r spans" %
                    (dtype, code, bits, lanes, shape))
    if not tried:
        raise Unsupported("no dtype of %s exports" % target.name)


@pytest.mark.clause("SEM-01")
@P
def test_producer_exports_share_memory(target, check):
    """Exports are zero-copy: two live exports of one tensor point at the same memory; a copy is
    allowed only when flagged IS_COPIED (versioned)."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    dtype = "float32" if "float32" in names else names[0]
    vals = _values(dtype, (2, 5))
    x = target.make(dtype, (2, 5), vals)
    repro_once(check, setup_lines(target) + make_lines(target, dtype, (2, 5), vals) +
                ["a = _probe.inspect(x.__dlpack__()); b = _probe.inspect(x.__dlpack__())",
                 "print(a['data'] + a['byte_offset'], b['data'] + b['byte_offset'])"])
    h1 = _probe.consume(x.__dlpack__())
    h2 = _probe.consume(x.__dlpack__())
    i1, i2 = h1.inspect(), h2.inspect()
    a1, a2 = i1["data"] + i1["byte_offset"], i2["data"] + i2["byte_offset"]
    copied = any((i.get("flags") or 0) & DLPACK_FLAG_IS_COPIED for i in (i1, i2))
    nat = None
    from _layout_support import native_layout
    nat = native_layout(target, x)
    if nat is not None:
        check.that(a1 == nat[2] or copied, "SEM-01", "export points at %#x, the tensor's memory is at %#x, "
                   "and IS_COPIED is not set" % (a1, nat[2]))
    check.that(a1 == a2 or copied, "SEM-01", "two exports of one tensor point at %#x and %#x without IS_COPIED"
               % (a1, a2))
    layout = [pm for pm in compare_layout(target, x, i1, S.itemsize_of(dtype)) if pm[0] == "LAY-05"]
    for c, m in layout:
        check.record(c, "fail", m)
    if not layout:
        check.equal(h1.read_elements(), target.expected(x), "SEM-01", "exported values")
    h1.release()
    h2.release()


@pytest.mark.clause("SEM-02")
@P
def test_producer_dense_strided_single_device(target, check):
    """Exports describe dense strided memory on the device __dlpack_device__ names; a
    non-strided (sparse) tensor, where the library has one, may be refused with BufferError."""
    names = _exportable(target)
    if not names:
        raise Unsupported("no dtype of %s exports" % target.name)
    dtype = names[0]
    x = target.make(dtype, (3, 2), _values(dtype, (3, 2)))
    repro_once(check, setup_lines(target) + make_lines(target, dtype, (3, 2), _values(dtype, (3, 2))) +
                ["print(x.__dlpack_device__(), _probe.inspect(x.__dlpack__())['device'])"])
    dev = tuple(int(v) for v in x.__dlpack_device__())
    info = _probe.inspect(x.__dlpack__())
    check.equal(tuple(info["device"]), dev, "SEM-02", "capsule device against __dlpack_device__")
    check.that(_probe.extent(x.__dlpack__())["status"] == "ok", "SEM-02", "export is not a valid strided extent")
    if lib(target) == "torch":
        torch = target.torch
        s = torch.zeros(3, 3).to_sparse()
        repro_once(check, setup_lines(target) + ["s = torch.zeros(3, 3).to_sparse()", "s.__dlpack__()"])
        try:
            s.__dlpack__()
            check.record("SEM-02", "warn", "a sparse tensor exported a capsule; SEM-02: only dense strided memory can "
                         "be exported")
        except BufferError:
            check.record("SEM-02", "pass", "")
        except Exception as e:  # noqa: BLE001
            check.record("SEM-02", "fail" if bad_exception(type(e), str(e)) else "warn",
                         "sparse export refused with %s: %s; SEM-02 names BufferError (MAY)" % (type(e).__name__, e))


# ============================================================================ consumer
def _check_import_values(check, target, att, clause, what):
    d, got = result_bytes(target, att.result)
    exp = att.forge.expected_elements()
    check.equal(tuple(int(n) for n in d["shape"]), tuple(att.forge_kwargs.get("shape", (4,))), clause,
                "%s: result shape" % what)
    check.equal(got, exp, clause, "%s: result elements" % what)
    return d


@pytest.mark.clause("LAY-03", "OWN-03")
@C
def test_consumer_honours_byte_offset(target, check):
    """A non-zero byte_offset moves the first element: the result reads from data + byte_offset."""
    cases = [dict(dtype=(2, 32, 1), shape=(5,), byte_offset=4), dict(dtype=(2, 32, 1), shape=(2, 3), byte_offset=12),
             dict(dtype=(1, 8, 1), shape=(6,), byte_offset=3), dict(dtype=(2, 64, 1), shape=(3,), byte_offset=256)]
    for kw in cases:
        repro_once(check, attempt_lines(target, kw))
        att = Attempt(target, kw)
        alive = att.calls()
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.record("LAY-03", "fail" if why else "warn",
                         "valid capsule with byte_offset=%d refused: %s" % (kw["byte_offset"], why or att.refusal()))
        else:
            d, got = result_bytes(target, att.result)
            exp = att.forge.expected_elements()
            base = att.forge.buffer_address
            hint = ""
            if d["ptr"] == base:
                hint = " (the result starts at data: byte_offset was ignored)"
            check.equal(got, exp, "LAY-03", "byte_offset=%d: result elements%s" % (kw["byte_offset"], hint))
        deleter_accounting(check, att, alive)


@pytest.mark.clause("SEM-01")
@C
def test_consumer_zero_copy(target, check):
    """Importing an aligned contiguous CPU tensor is zero-copy: the result's first element is the
    forged buffer's."""
    for kw in [dict(dtype=(2, 32, 1), shape=(8,)), dict(dtype=(0, 64, 1), shape=(2, 3))]:
        repro_once(check, attempt_lines(target, kw) + ["# y's first element should be at f.buffer_address"])
        att = Attempt(target, kw)
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.record("SEM-01", "fail" if why else "warn", "valid capsule refused: %s" % (why or att.refusal()))
            att.settle()
            continue
        d, got = result_bytes(target, att.result)
        check.equal(got, att.forge.expected_elements(), "SEM-01", "result elements")
        check.that(d["ptr"] == att.forge.buffer_address, "SEM-01",
                   "result starts at %#x, the producer's memory at %#x: the import copied" %
                   (d["ptr"], att.forge.buffer_address))
        att.settle()


@pytest.mark.clause("LAY-02")
@C
def test_consumer_unaligned_data(target, check):
    """data that is element-aligned but not 256-byte aligned imports (SHOULD)."""
    holder = _ref.Forge(dtype=(1, 8, 1), shape=(64,))
    for delta, dtype in [(4, (2, 32, 1)), (8, (2, 64, 1)), (1, (1, 8, 1))]:
        kw = dict(dtype=dtype, shape=(4,), data=holder.buffer_address + delta)
        repro_once(check, setup_lines(target) + ["holder = _ref.Forge(dtype=(1, 8, 1), shape=(64,))",
                                           "fac = forges(dtype=%r, shape=(4,), data=holder.buffer_address + %d)"
                                           % (dtype, delta), "p = RecordingProducer(fac)",
                                           "y = %s" % __import__("_layout_support").consumer_expr(target, "p")])
        att = Attempt(target, kw)
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.record("LAY-02", "fail" if why else "warn",
                         "data at 256-byte alignment + %d refused: %s" % (delta, why or att.refusal()))
        else:
            _check_import_values(check, target, att, "LAY-02", "data aligned to 256 + %d" % delta)
        att.settle()


@pytest.mark.clause("LAY-07", "OWN-03")
@C
def test_consumer_null_strides_legacy(target, check):
    """NULL strides in a legacy capsule (or a versioned one before 1.2) mean compact row-major."""
    for shape in [(2, 3), (4,), (2, 1, 3), ()]:
        fm = {"legacy": _ref.Forge(versioned=False, shape=shape, strides=None),
              "versioned": _ref.Forge(versioned=True, version=(1, 1), shape=shape, strides=None)}
        repro_once(check, setup_lines(target) + [
            "fm = {'legacy': _ref.Forge(versioned=False, shape=%r, strides=None)," % (shape,),
            "      'versioned': _ref.Forge(versioned=True, version=(1, 1), shape=%r, strides=None)}" % (shape,),
            "p = RecordingProducer(fm)", "y = %s" % __import__("_layout_support").consumer_expr(target, "p")])
        att = Attempt(target, {"shape": shape}, forge=fm)
        alive = att.calls()
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.record("LAY-07", "fail", "NULL strides (%s capsule, shape %r) refused: %s"
                         % (att.producer.last_kind, shape, why or att.refusal()))
        else:
            _check_import_values(check, target, att, "LAY-07", "NULL strides, shape %r" % (shape,))
        deleter_accounting(check, att, alive, what="NULL strides: ")


@pytest.mark.clause("LAY-04", "OWN-03")
@C
def test_consumer_zero_size_null_data(target, check):
    """NULL data with a zero-size shape imports (MUST) and the deleter still runs exactly once.
    A refusal breaks LAY-04 only when it is the NULL pointer that is refused: when the same
    shape and strides over real memory are refused too, the consumer refuses the layout, which
    LAY-11 allows (e.g. a contiguity test that a zero extent defeats)."""
    for shape in [(0,), (0, 3), (2, 0, 4)]:
        kw = dict(shape=shape, data="null")
        repro_once(check, attempt_lines(target, kw))
        att = Attempt(target, kw)
        alive = att.calls()
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            ctl = Attempt(target, dict(shape=shape, buffer_size=64)) if not why else None
            if ctl is not None and ctl.refused and not bad_exception(ctl.etype, ctl.emsg):
                check.record("LAY-04", "pass", "zero-size shape %r refused with NULL data (%s) and over real memory "
                             "alike (%s): the layout is refused, not the NULL pointer (LAY-11 lets a consumer "
                             "raise for a layout it does not take)" % (shape, att.refusal(), ctl.refusal()))
            else:
                check.record("LAY-04", "fail", "zero-size tensor of shape %r with NULL data refused: %s%s"
                             % (shape, why or att.refusal(), "" if ctl is None else
                                "; the same shape and strides over real memory %s" % (
                                    "import" if not ctl.refused else "are refused uncleanly: " + ctl.refusal())))
            if ctl is not None:
                ctl.settle()
        else:
            d = target.describe(att.result)
            check.equal(tuple(int(n) for n in d["shape"]), shape, "LAY-04", "result shape")
        deleter_accounting(check, att, alive, what="zero-size NULL-data import: ")


# The three checks below feed the consumer invalid LAY-09 input: a crash there is LAY-09's
# (the runner gives a crash to every clause a test is marked with), so they are marked LAY-09
# only and record the deleter count of the refusal under OWN-03 explicitly (must_refuse).
@pytest.mark.clause("LAY-09")
@C
def test_consumer_refuses_negative_extent(target, check):
    """A negative extent is invalid: the consumer raises, and the deleter still runs once."""
    for shape in [(-1,), (2, -3), (4, 0, -2)]:
        must_refuse(check, target, dict(shape=shape, buffer_size=256), "LAY-09", "shape %r" % (shape,))


@pytest.mark.clause("LAY-09")
@C
def test_consumer_refuses_negative_ndim(target, check):
    """ndim < 0 is invalid: the consumer raises without reading shape or strides."""
    must_refuse(check, target, dict(shape=(), ndim=-1, buffer_size=64), "LAY-09", "ndim -1")


@pytest.mark.clause("LAY-09")
@C
def test_consumer_refuses_null_shape_with_ndim(target, check):
    """ndim > 0 with a NULL shape pointer is invalid: the consumer raises, never dereferences."""
    must_refuse(check, target, dict(shape=(2, 3), shape_null=True, buffer_size=64), "LAY-09",
                 "ndim 2 with NULL shape")


@pytest.mark.clause("LAY-08")
@C
def test_consumer_ndim0(target, check):
    """ndim 0 with NULL strides imports in any capsule; NULL shape as well from v1.2."""
    kw = dict(shape=(), strides=None)
    repro_once(check, attempt_lines(target, kw))
    att = Attempt(target, kw)
    if att.refused:
        check.record("LAY-08", "fail", "0-d tensor with NULL strides refused: %s" % att.refusal())
    else:
        _check_import_values(check, target, att, "LAY-08", "0-d, NULL strides")
    att.settle()
    kw = dict(shape=(), strides=None, shape_null=True)
    repro_once(check, attempt_lines(target, kw))
    att = Attempt(target, kw)
    kind = att.producer.last_kind
    if att.refused:
        why = bad_exception(att.etype, att.emsg)
        if why or kind == "versioned":
            check.record("LAY-08", "fail", "0-d versioned 1.3 capsule with NULL shape refused: %s"
                         % (why or att.refusal()))
        else:
            check.record("LAY-08", "pass", "")  # a legacy capsule: NULL shape is sanctioned only from v1.2
    else:
        d, got = result_bytes(target, att.result)
        check.equal(tuple(d["shape"]), (), "LAY-08", "NULL-shape 0-d result shape")
        check.equal(got, att.forge.expected_elements(), "LAY-08", "NULL-shape 0-d value")
    att.settle()


def _view_import_body(target, check, state, view, dtype):
    # data points at the first element (byte_offset 0), so that LAY-03 is not tested here
    holder = _ref.Forge(dtype=(1, 8, 1), shape=(view.buffer_size,))
    kw = dict(dtype=dtype, shape=view.shape, strides=view.strides, data=holder.buffer_address + view.byte_offset)
    lines = setup_lines(target) + ["holder = _ref.Forge(dtype=(1, 8, 1), shape=(%d,))" % view.buffer_size] + [
        l.replace(repr(kw["data"]), "holder.buffer_address + %d" % view.byte_offset)
        for l in attempt_lines(target, kw)[len(setup_lines(target)):]]
    note("\n".join(lines))
    repro_once(check, lines)  # before the import: a consumer that dies here still has its snippet
    att = Attempt(target, kw)
    recs = []
    if att.refused:
        why = bad_exception(att.etype, att.emsg)
        if why:
            recs.append(("LAY-11", "fail", "strided view %r refused uncleanly: %s" % (kw, why)))
    else:
        d, got = result_bytes(target, att.result)
        exp = att.forge.expected_elements()
        if tuple(d["shape"]) != view.shape or got != exp:
            recs.append(("LAY-11", "fail", "imported view shape %r strides %r byte_offset %d reads %s, expected %s "
                         "(result shape %r, strides %r)" % (view.shape, view.strides, view.byte_offset,
                                                            got.hex()[:64], exp.hex()[:64], d["shape"], d["strides"])))
    att.settle()
    del holder
    settle_records(check, state, recs, lines)


@pytest.mark.clause("LAY-11", "LAY-05")
@C
def test_consumer_strided_views(target, check):
    """Transposed, stepped and size-1-odd-stride layouts with byte_offset import with the right
    values, or are refused cleanly (LAY-11: import or copy/raise)."""
    state = {}

    @S.settings_bounded(20)
    @given(S.views(itemsize=4, min_ndim=1, max_ndim=4, allow_negative=False))
    def body(view):
        _view_import_body(target, check, state, view, (2, 32, 1))

    run_cases(check, ("LAY-11", "LAY-05"), body)


@pytest.mark.clause("LAY-11")
@C
def test_consumer_negative_strides(target, check):
    """Negative strides are a legal layout: import with the right values or refuse cleanly."""
    state = {}

    @S.settings_bounded(12)
    @given(S.views(itemsize=4, min_ndim=1, max_ndim=3, allow_negative=True).filter(
        lambda v: any(s < 0 for n, s in zip(v.shape, v.strides) if n > 1)))
    def body(view):
        _view_import_body(target, check, state, view, (2, 32, 1))

    run_cases(check, ("LAY-11",), body)


@pytest.mark.clause("LAY-10")  # a crash on this input is LAY-10's; OWN-03 is recorded explicitly
@C
def test_consumer_huge_shape(target, check):
    """A shape whose storage size overflows int64 is refused (importing it: warn, the spec has
    no explicit rule)."""
    for shape in [(1 << 62, 4), (1 << 31, 1 << 31, 1 << 31)]:
        kw = dict(shape=shape, buffer_size=64)
        repro_once(check, attempt_lines(target, kw))
        att = Attempt(target, kw)
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.that(why is None, "LAY-10", "overflowing shape %r refused uncleanly: %s" % (shape, why))
        else:
            check.warn("LAY-10", "shape %r (storage size prod(shape)*4 overflows int64) was imported; LAY-10/LAY-09 "
                       "give the size formula but no consumer-side rule" % (shape,))
        after = att.settle()
        check.that(after == 1, "OWN-03", "deleter ran %d time(s) for shape %r (expected 1)" % (after, shape))


@pytest.mark.clause("LAY-09")  # a crash on this input is LAY-09's; OWN-03 is recorded explicitly
@C
def test_consumer_shape_beyond_memory(target, check):
    """A valid int64 shape claiming more memory than exists (2**40 float32 over 64 bytes) may be
    imported as a view (a consumer cannot know) or refused; it is never read here."""
    kw = dict(shape=(1 << 40,), buffer_size=64)
    repro_once(check, attempt_lines(target, kw))
    att = Attempt(target, kw)
    if att.refused:
        why = bad_exception(att.etype, att.emsg)
        check.that(why is None, "LAY-09", "shape (2**40,) refused uncleanly: %s" % why)
    else:
        check.record("LAY-09", "pass", "")  # imported as a view; nothing reads it
    after = att.settle()
    check.that(after == 1, "OWN-03", "deleter ran %d time(s) for shape (2**40,) (expected 1)" % after)


@pytest.mark.clause("LAY-10")  # a crash on this input is LAY-10's; OWN-03 is recorded explicitly
@C
def test_consumer_huge_strides(target, check):
    """Strides whose byte span overflows int64 are refused or imported without a crash."""
    kw = dict(shape=(2,), strides=(1 << 62,), buffer_size=64)
    repro_once(check, attempt_lines(target, kw))
    att = Attempt(target, kw)
    if att.refused:
        why = bad_exception(att.etype, att.emsg)
        check.that(why is None, "LAY-10", "overflowing strides refused uncleanly: %s" % why)
    else:
        d = target.describe(att.result)
        check.warn("LAY-10", "strides (2**62,) (byte span overflows int64) imported as strides %r; LAY-10 gives "
                   "no consumer-side rule" % (tuple(d["strides"]),))
    after = att.settle()
    check.that(after == 1, "OWN-03", "deleter ran %d time(s) (expected 1)" % after)
