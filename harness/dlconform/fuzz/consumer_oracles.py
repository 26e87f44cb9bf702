"""The consumer target's oracles in Python: the twin of fuzz/target_consumer.c and
fuzz/consumer_oracles.c, for reproducers.

judge(data, from_dlpack) replays one input as LLVMFuzzerTestOneInput does (decode, plan,
one exchange, then the same oracles in the same order) and returns every breach as
(clause, message), in the order the C target would report them; the C target stops at the
first. The rules, and why each holds, are in fuzz/README.md ("Oracles"); each function
below names its C twin. fuzz/tests/test_oracle_agreement.py holds the two to one verdict.

Where the Python twin cannot see what the C target sees (exchange.py lists the rest):
- a SIGSEGV is the process's end, not a breach: the caller maps it (XAPI-11 for a call of
  the NULL dltensor_from_py_object_no_sync while the exchange is in flight);
- overruns and reads after the deleter that ASan reports go unseen.
"""
import ctypes as C
import gc
import operator

from . import devices
from . import devmem
from . import exchange as X
from . import record as R
from .breaches import Breaches, allowed_exceptions, conclude, replayer, say


# ---- the export (target_consumer.c) ------------------------------------------------------

def refusal_clause(rec, p):
    """(clause, message) a consumer breaks by accepting this export, or None."""
    from .. import _probe

    if rec["kind"] & R.KIND["used"]:
        return "CAP-04", "accepted a capsule already named used_*"
    if R.versioned(rec) and rec["version"][0] != 1:
        return "VER-08", "accepted a versioned capsule of version %d.%d" % rec["version"]
    status = p["ext"]["status"]
    if status == "overflow":
        return "LAY-10", "accepted a tensor whose size overflows int64"
    if status == "bad_itemsize":
        return "DT-10", "accepted dtype (%d, %d, %d) of item size 0" % rec["dtype"]
    if status != "ok":
        return "LAY-09", "accepted ndim %d / shape %s with extent status %s" % (
            rec["ndim"], "NULL" if rec["kind"] & R.KIND["shape_null"] else "set", status)
    # check's own dtype and device rules at 1.3 (dlc_dtype_classify, dlc_is_known_device)
    found = [c for c, _ in _probe.check(R.metadata_capsule(rec), spec=(1, 3))]
    dt = [c for c in found if c.startswith("DT-")]
    if dt:  # the message names the dtype rule, as dlc_dtype_classify's clause
        return "VER-09", "accepted dtype (%d, %d, %d), invalid in DLPack 1.3 (%s)" % (rec["dtype"] + (dt[0],))
    if "DEV-01" in found:
        return "VER-09", "accepted device type %d, unknown in DLPack 1.3" % rec["device"][0]
    if p["mode"] == "null" and not p["ext"]["zero_size"]:
        return "LAY-01", "accepted NULL data for %d elements" % p["ext"]["numel"]
    return None


def array_api_dtype(rec):
    code, bits, lanes = rec["dtype"]
    return lanes == 1 and (code, bits) in R.ARRAY_API_DTYPES


def small_span(rec, p):
    """The product of the extents, zeros counted as 1, times the item size is within the cap."""
    span = p["ext"]["itemsize"]
    for s in rec["shape"]:
        if span > R.CAP:
            break
        span *= s if s > 1 else 1
    return span <= R.CAP


def acceptance_clause(rec, p, max_major):
    """The clause a consumer breaks by refusing this plain export (LAY-04, LAY-07), or None."""
    ext, versioned = p["ext"], R.versioned(rec)
    if versioned and max_major < 1:
        return None
    if not small_span(rec, p):
        return None
    # the plain device: the host's, or in the CUDA mode (2, 0) too (fuzz/devmem.h)
    plain_device = rec["device"] == (R.CPU, 0) or (devmem.mode() == "cuda" and rec["device"] == (R.CUDA, 0))
    if (not plain_device or not array_api_dtype(rec) or rec["kw"] & (R.KW_PASSED | R.KW["old_producer"])
            or ext["status"] != "ok" or rec["ndim"] > 8 or not ext["row_major"] or rec["byte_offset"] != 0
            or rec["kind"] & (R.KIND["shape_null"] | R.KIND["used"])
            or (versioned and (rec["version"][0] != 1 or rec["version"][1] > 3 or rec["flags"] & ~3))):
        return None
    if ext["zero_size"] and p["mode"] == "null":
        return "LAY-04"
    if not versioned and rec["kind"] & R.KIND["strides_null"] and rec["ndim"] > 0 and p["mode"] == "buffer":
        return "LAY-07"
    return None


def _plain_call(rec, from_dlpack):
    """(export, result or None): the record's export from a plain producer, imported with no
    keyword; a refusal is None, its frames forgotten (they would keep the capsule alive)."""
    export = X.Export(rec, R.plan(rec))
    producer = X.Producer(export.capsule(), rec["device"], order=X.pending_order(export))
    try:
        return export, from_dlpack(producer)
    except BaseException as e:
        X._forget_frames(e)
        return export, None


def _plain_end(export):
    """dlc_plain_end: collect, then give the export's device copy back, unless the consumer kept
    the export (its deleter not run yet): leaked then rather than freed under it."""
    if export.has_deleter and export.deleter_calls == 0:
        gc.collect()
    if not (export.has_deleter and export.deleter_calls == 0 and not export.used):
        export.close()


def control_accepts(rec, from_dlpack):
    """A plain producer of the record's export, no keywords: does the consumer accept it?"""
    export, result = _plain_call(rec, from_dlpack)
    ok = result is not None
    del result
    _plain_end(export)
    return ok


def refusal_is_due_to(clause, rec, from_dlpack):
    """LAY-07 / LAY-04 hold only when the same export with row-major strides / a real
    buffer is accepted."""
    control = dict(rec)
    if clause == "LAY-07":
        control["kind"] &= ~R.KIND["strides_null"]
        strides = R.row_major_strides(rec["ndim"], rec["shape"])
        if strides is None:
            return False
        control["strides"] = strides
    else:
        control["kind"] &= ~R.KIND["data_null"]
    return control_accepts(control, from_dlpack)


# ---- how the consumer called the producer, and its refusal (consumer_oracles.c) ---------

def _cpu_device_kw(rec):
    return bool(rec["kw"] & R.KW["dl_device"]) and rec["kw_device"] == (R.CPU, 0)


def _keyword_type_error(error):
    return isinstance(error, TypeError) and "keyword" in str(error)


def check_calls(b, rec, copy, log, error, refused, must_refuse):
    """dlc_check_calls."""
    if log.stream_clause is not None:
        b.fail(log.stream_clause, log.stream_msg)
    if (log.side and rec["device"][0] == R.CUDA and log.calls > 0 and log.named_int and not log.named_host
            and log.named not in (-1, 0) and log.named % (1 << 64) != log.side):
        b.fail("STR-07", "inside a side-stream context of its library (stream %d) the consumer named stream %d to "
               "__dlpack__" % (log.side, log.named))
    if refused and log.refused_kw > 0 and log.calls == log.refused_kw and isinstance(error, TypeError):
        b.fail("VER-06", "an old producer's __dlpack__ raised TypeError for new keywords %d time(s), and the "
                         "consumer never retried without them" % log.refused_kw)
    if rec["device"][0] == R.CPU or must_refuse or not _cpu_device_kw(rec):
        return
    if (refused and copy != R.COPY_FALSE and not log.cpu_dl_device and log.refused_kw == 0
            and not _keyword_type_error(error)):
        b.fail("DEV-06", "from_dlpack(device='cpu') refused a producer on device %d without asking it for "
                         "dl_device=(1, 0)" % rec["device"][0])
    if copy == R.COPY_FALSE and log.copy_forwarded in (X.FWD_NONE, X.FWD_TRUE):
        b.fail("CPY-07", "from_dlpack(device='cpu', copy=False) forwarded copy=%s to a producer on device %d" % (
            "None" if log.copy_forwarded == X.FWD_NONE else "True", rec["device"][0]))
    elif copy == R.COPY_FALSE and log.cpu_ask_unguarded:
        b.fail("CPY-07", "from_dlpack(device='cpu', copy=False) asked a producer on device %d for dl_device=(1, 0) "
                         "without copy=False" % rec["device"][0])


def check_refusal_class(b, rec, copy, log, error, other_reason, backed=False):
    """dlc_check_refusal_class; error is None for NULL without an exception. backed: the
    export is device memory (the CUDA mode), no lie."""
    if error is None:
        return b.fail("EXC", "from_dlpack returned NULL without setting an exception")
    clause = None
    # host memory named as a device this machine has (or the CUDA mode's device): a lie; device
    # memory of the CUDA mode is none
    lie = (devices.present(rec["device"][0]) or (devmem.mode() == "cuda" and rec["device"][0] == R.CUDA)) \
        and not backed
    if (rec["device"][0] != R.CPU and not other_reason and not lie and log.refused_kw == 0
            and not _keyword_type_error(error)
            and not isinstance(error, (BufferError, MemoryError))):
        if not rec["kw"] & R.KW["dl_device"]:
            clause = "DEV-07"
        elif _cpu_device_kw(rec) and not (copy == R.COPY_FALSE and isinstance(error, ValueError)):
            strict = rec["kw"] & R.KW["strict_producer"]
            clause = "DEV-07" if log.cpu_dl_device and not strict else "CPY-08"
    foreign_device_arg = bool(rec["kw"] & R.KW["dl_device"]) and not _cpu_device_kw(rec)
    if (clause is None and not isinstance(error, allowed_exceptions())
            and (not (foreign_device_arg or lie) or isinstance(error, SystemError))):
        clause = "EXC"
    if clause is not None:
        b.fail(clause, "from_dlpack raised %s: %s" % (type(error).__name__, error))


# ---- an accepted result (target_consumer.c, consumer_oracles.c) --------------------------

class PyBuffer(C.Structure):
    _fields_ = [("buf", C.c_void_p), ("obj", C.c_void_p), ("len", C.c_ssize_t), ("itemsize", C.c_ssize_t),
                ("readonly", C.c_int), ("ndim", C.c_int), ("format", C.c_char_p),
                ("shape", C.POINTER(C.c_ssize_t)), ("strides", C.POINTER(C.c_ssize_t)),
                ("suboffsets", C.POINTER(C.c_ssize_t)), ("internal", C.c_void_p)]


_py = C.PyDLL(None)
_py.PyObject_CheckBuffer.argtypes = (C.py_object,)
_py.PyObject_GetBuffer.argtypes = (C.py_object, C.POINTER(PyBuffer), C.c_int)
_py.PyBuffer_Release.argtypes = (C.POINTER(PyBuffer),)
_py.PyBuffer_Release.restype = None
RECORDS_RO = 0x1C  # PyBUF_RECORDS_RO


class View:
    """The result's buffer-protocol view (PyBUF_RECORDS_RO), as the C target reads it."""

    def __init__(self, result):
        self.raw = PyBuffer()
        _py.PyObject_GetBuffer(result, C.byref(self.raw), RECORDS_RO)  # raises when refused
        v = self.raw
        self.buf, self.itemsize, self.ndim, self.readonly = v.buf or 0, v.itemsize, v.ndim, v.readonly
        self.shape = [v.shape[i] for i in range(v.ndim)] if v.shape else []
        self.strides = [v.strides[i] for i in range(v.ndim)] if v.strides else []
        if not v.strides and v.shape:  # NULL strides mean C-contiguous (result_view.c)
            self.strides, s = [0] * v.ndim, v.itemsize
            for i in reversed(range(v.ndim)):
                self.strides[i], s = s, s * self.shape[i]

    def release(self):
        _py.PyBuffer_Release(C.byref(self.raw))


class CudaView:
    """target_consumer.c's cai_view: the result's __cuda_array_interface__ as a view (buf,
    ndim, itemsize, shape, strides in bytes); nothing to release. Its readonly is not used."""

    readonly = 0

    def __init__(self, cai):
        data, shape, strides, typestr = cai["data"], cai["shape"], cai.get("strides"), cai["typestr"]
        stream = cai.get("stream")
        self.stream = stream % (1 << 64) if isinstance(stream, int) else 0  # v3: read after it
        if not (isinstance(data, tuple) and data and isinstance(shape, tuple) and isinstance(typestr, str)):
            raise ValueError("malformed")
        if len(shape) > R.MAX_NDIM:
            raise ValueError("too many dims")
        self.itemsize = int(typestr[2:]) if len(typestr) > 2 else 0
        self.buf = operator.index(data[0])
        if self.itemsize <= 0 or not self.buf:
            raise ValueError("no address")
        self.ndim, self.shape = len(shape), [operator.index(n) for n in shape]
        if strides is not None:
            if not isinstance(strides, tuple) or len(strides) != self.ndim:
                raise ValueError("malformed")
            self.strides = [operator.index(n) for n in strides]
        else:
            self.strides = [0] * self.ndim
            for i in reversed(range(self.ndim)):
                self.strides[i] = self.itemsize if i == self.ndim - 1 else self.strides[i + 1] * self.shape[i + 1]
                if not -(1 << 63) <= self.strides[i] < 1 << 63:  # past Py_ssize_t: no view
                    raise ValueError("overflow")

    def release(self):
        pass


def result_address(result, cuda=None):
    """(address of the result's first element or None, its View (or CudaView) or None). cuda:
    whether to read a CUDA array interface (None: in the CUDA mode, devmem.mode())."""
    if _py.PyObject_CheckBuffer(result):
        try:
            view = View(result)
            return view.buf or None, view
        except Exception:
            pass
    if cuda or (cuda is None and devmem.mode() == "cuda"):
        try:
            cai = result.__cuda_array_interface__
            view = CudaView(cai) if isinstance(cai, dict) else None
        except Exception:
            view = None
        if view is not None:
            return view.buf, view
    try:
        ptr = result.data_ptr
        ptr = ptr() if callable(ptr) else ptr
    except Exception:
        return None, None
    if not isinstance(ptr, int):
        return None, None
    try:
        off = result.byte_offset
        ptr += off if isinstance(off, int) else 0
    except Exception:
        pass
    return ptr % (1 << 64) or None, None


def _export_strides(export):
    """The export's strides in elements (row-major for NULL strides), or None."""
    rec = export.rec
    if export.strides is not None:
        return export.strides
    return R.row_major_strides(rec["ndim"], rec["shape"])


def check_view(b, export, v):
    """LAY-03, LAY-05, SEM-01 on a buffer-protocol view that aliases the export."""
    rec, ext = export.rec, export.plan["ext"]
    ndim, shape = rec["ndim"], rec["shape"]
    lo, hi = export.base, export.base + export.plan["size"]
    if v.ndim != ndim or ext["itemsize"] != v.itemsize:
        if rec["dtype"][2] == 1:
            b.fail("SEM-01", "view has ndim %d itemsize %d, export ndim %d itemsize %d" % (
                v.ndim, v.itemsize, ndim, ext["itemsize"]))
        return
    strides = _export_strides(export)
    if strides is None:
        return
    for i in range(ndim):
        if v.shape[i] != shape[i]:
            return b.fail("SEM-01", "view shape[%d] = %d, export %d" % (i, v.shape[i], shape[i]))
        want = strides[i] * ext["itemsize"]
        if shape[i] > 1 and v.strides[i] != want:
            b.fail("LAY-05" if v.strides[i] == strides[i] else "LAY-11",
                   "view stride[%d] = %d bytes, export %d elements of %d" % (i, v.strides[i], strides[i],
                                                                             ext["itemsize"]))
    if ext["zero_size"]:
        return
    low = high = v.buf
    for i in range(ndim):
        span = (v.shape[i] - 1) * v.strides[i]
        if span < 0:
            low += span
        else:
            high += span
    if low < lo or high + v.itemsize > hi:
        b.fail("LAY-03", "view elements span [%#x, %#x), outside the export [%#x, %#x)" % (
            low, high + v.itemsize, lo, hi))


def result_device(result):
    """dlc_result_device: the (type, id) the result's __dlpack_device__ reports (-1 for what is
    not an int pair), or None when it has none or raised."""
    try:
        dev = result.__dlpack_device__()
    except Exception:
        return None
    if isinstance(dev, tuple) and len(dev) == 2:
        return X._as_long(dev[0]), X._as_long(dev[1])
    return -1, -1


COPY_CHECK_MAX = 4096  # DLC_COPY_CHECK_MAX


def _float_part(code, bits):
    """copy_values.c's float_part: the width of the IEEE parts compared one by one, 0 for an
    integer, -1 for a dtype not judged."""
    if code in (0, 1):
        return 0 if bits in (8, 16, 32, 64) else -1
    if code == 2:
        return bits if bits in (16, 32, 64) else -1
    if code == 4:
        return 16 if bits == 16 else -1
    if code == 5:
        return bits // 2 if bits in (64, 128) else -1
    return -1


def _is_nan(v, width, bfloat):
    exp_bits = (8 if bfloat else 5) if width == 16 else 8 if width == 32 else 11
    frac_bits = width - 1 - exp_bits
    return (v >> frac_bits) & ((1 << exp_bits) - 1) == (1 << exp_bits) - 1 and v & ((1 << frac_bits) - 1) != 0


def _same_element(have, expect, part, bfloat):
    """copy_values.c's same_element: the same bytes, or a NaN for a NaN part by part."""
    if have == expect:
        return True
    if part <= 0:
        return False
    step = part // 8
    for at in range(0, len(have), step):
        h, e = int.from_bytes(have[at:at + step], "little"), int.from_bytes(expect[at:at + step], "little")
        if h != e and not (_is_nan(h, part, bfloat) and _is_nan(e, part, bfloat)):
            return False
    return True


def check_copy_values(b, rec, p, view, pending=False):
    """fuzz/copy_values.c: a copy with a compact row-major view of the export's shape and item
    size, of an integer or IEEE float dtype and at most COPY_CHECK_MAX elements, holds the
    export's elements, a NaN part for a NaN part (LAY-11); the export's bytes follow from the
    fill pattern. pending: the export's device bytes were pending, and a first wrong element
    of poison is no LAY-11: its index is returned, for the caller's stream clause. Else None."""
    ext, (code, bits, lanes) = p["ext"], rec["dtype"]
    part = _float_part(code, bits)
    if (p["mode"] != "buffer" or ext["status"] != "ok" or ext["zero_size"] or ext["numel"] > COPY_CHECK_MAX
            or lanes != 1 or part < 0 or rec["kind"] & R.KIND["shape_null"] or not view.buf):
        return
    n, item = max(rec["ndim"], 0), bits // 8
    if view.ndim != n or view.itemsize != item:
        return
    want = item
    for i in reversed(range(n)):
        if view.shape[i] != rec["shape"][i] or (view.shape[i] > 1 and view.strides[i] != want):
            return
        want *= view.shape[i]
    size = ext["numel"] * item
    if isinstance(view, CudaView):
        try:
            rt = devmem.runtime()
            if view.stream:
                rt.synchronize(view.stream)
            got = rt.copy_to_host(view.buf, size)
        except Exception:  # the harness cannot read it: no verdict
            return
    else:
        got = C.string_at(view.buf, size)
    strides = R.row_major_strides(rec["ndim"], rec["shape"]) if rec["kind"] & R.KIND["strides_null"] \
        else rec["strides"]
    if strides is None:
        return
    idx = [0] * n
    for k in range(ext["numel"]):
        off = p["pad"] + rec["byte_offset"] + sum(i * s for i, s in zip(idx, strides)) * item
        expect = bytes(((off + j) * 131 + rec["seed"]) & 0xFF for j in range(item))
        have = bytes(got[k * item:(k + 1) * item])
        if not _same_element(have, expect, part, code == 4):
            if pending and have == bytes([devmem.POISON]) * item:
                return k
            j = next(j for j in range(item) if have[j] != expect[j])
            return b.fail("LAY-11", "the copy's element %d holds byte %d at %d, the export's %d (buffer offset "
                          "%d)" % (k, have[j], j, expect[j], off + j))
        for i in reversed(range(n)):
            idx[i] += 1
            if idx[i] < rec["shape"][i]:
                break
            idx[i] = 0


def check_device(b, rec, result, backed=False):
    """API-05: a result of a (1, 0) export, or of device memory (the CUDA mode), imported
    without device=, reports the export's device."""
    if (rec["device"][0] != R.CPU and not backed) or rec["device"][1] != 0 or rec["kw"] & R.KW["dl_device"]:
        return
    dev = result_device(result)
    if dev is None:
        return
    t, i = dev
    if t != rec["device"][0] or i != 0:
        b.fail("API-05", "the result of a (%d, 0) export reports device (%d, %d)" % (rec["device"][0], t, i))


def check_readonly(b, result, view):
    """FLG-03: a zero-copy result of a READ_ONLY export, whose type can say read-only, says so."""
    if view is not None:
        if not view.readonly:
            b.fail("FLG-03", "the zero-copy result of a READ_ONLY export is a writable buffer")
        return
    try:
        ro = result.readonly
    except Exception:
        return
    if ro is False:
        b.fail("FLG-03", "the zero-copy result of a READ_ONLY export has readonly False")


def _element_strides(result):
    try:
        s = result.strides
        if isinstance(s, tuple):
            return s
    except Exception:
        pass
    try:
        s = result.stride()
        return s if isinstance(s, tuple) else None
    except Exception:
        return None


def check_strides(b, export, result):
    """LAY-11: a zero-copy result without the buffer protocol keeps the export's strides."""
    rec = export.rec
    want = _export_strides(export)
    s = _element_strides(result) if want is not None else None
    if s is None or len(s) != rec["ndim"]:
        return
    for i in range(rec["ndim"]):
        try:
            got = operator.index(s[i])  # PyLong_AsLongLong
        except Exception:
            break
        if rec["shape"][i] > 1 and got != want[i]:
            b.fail("LAY-11", "result stride[%d] = %d elements, export %d" % (i, got, want[i]))
            break


_plain_copies = {}  # plain_import.c's memo: (from_dlpack, backed) -> copies


def plain_import_copies(from_dlpack, backed):
    """fuzz/plain_import.c: whether the consumer copies even a plain export (uint8[16],
    row-major, legacy, no keyword; on the CPU, or backed: on (2, 0) in device memory). Once per
    consumer and kind."""
    key = (from_dlpack, bool(backed))
    if key not in _plain_copies:
        rec = R.decode(b"")
        rec.update(format=2, ndim=1, shape=(16,), strides=(1,), dtype=(1, 8, 1), seed=1,
                   device=(R.CUDA if backed else R.CPU, 0))
        export, result = _plain_call(rec, from_dlpack)
        copies = False
        if result is not None:
            addr, view = result_address(result)
            copies = addr is not None and not 0 <= addr - export.base < export.plan["size"]
            if view is not None:
                view.release()
            del view
        del result
        _plain_end(export)
        _plain_copies[key] = copies
    return _plain_copies[key]


def check_result_extra(b, rec, copy, export, result, view, aliases, addr, view_only, from_dlpack=None):
    """dlc_check_result_extra; view: a View, a CudaView or None."""
    p = export.plan
    zero_size = p["ext"]["zero_size"]
    backed = export.device is not None
    check_device(b, rec, result, backed)
    copied_flag = R.versioned(rec) and rec["flags"] & R.IS_COPIED
    if copy == R.COPY_TRUE and aliases and not zero_size and not copied_flag:
        b.fail("CPY-06", "from_dlpack(copy=True) returned a view of the producer's memory")
    _code, bits, lanes = rec["dtype"]
    if (copy != R.COPY_TRUE and addr is not None and not aliases and p["mode"] == "buffer" and not zero_size
            and (rec["device"] == (R.CPU, 0) or (backed and p["ext"]["row_major"])) and lanes == 1 and bits % 8 == 0
            and (not rec["kw"] & R.KW["dl_device"] or tuple(rec["kw_device"]) == tuple(rec["device"]))):
        ambiguous = from_dlpack is not None and plain_import_copies(from_dlpack, backed)
        b.fail("SEM-01", "the result copies a %s export it could view (copy not requested)%s" % (
            "CUDA" if backed else "CPU", " (ambiguous: this consumer copies even a plain contiguous export: read as "
            "a library whose arrays own their memory)" if ambiguous else ""))
    if aliases and p["readonly"] and not view_only:
        check_readonly(b, result, view if isinstance(view, View) else None)
    if aliases and view is None and not zero_size:
        check_strides(b, export, result)


#: target_consumer.c's ORDER_*: how an import of pending device bytes was ordered
ORDER_NAMED, ORDER_MINUS_ONE, ORDER_TABLE = range(3)


def stale_clause(how):
    return "XAPI-19" if how == ORDER_TABLE else "STR-01"


def stale_why(how, log):
    """target_consumer.c's stale_why: how the consumer ordered a copy found stale."""
    if how == ORDER_TABLE:
        return ("imported through the exchange table's *_no_sync functions, it did not copy on the stream "
                "current_work_stream names")
    if how == ORDER_MINUS_ONE:
        return "the consumer passed stream=-1 (no synchronisation) and did not synchronise itself"
    if log.named_int:
        return ("the consumer named stream %d to __dlpack__, which the producer made wait, and copied on another"
                % log.named)
    return ("the consumer named no stream to __dlpack__ (the legacy default stream, which the producer made wait) "
            "and copied on another")


def check_pending_view(b, export, stream, how):
    """target_consumer.c's check_pending_view: after stream=-1 or through a table, a device view
    of pending bytes read on its own stream (`stream`, 0: the legacy default stream) holds what
    the device holds once idle (STR-01, XAPI-19)."""
    ext = export.plan["ext"]
    if ext["status"] != "ok" or ext["zero_size"] or export.deleter_calls > 0:
        return
    first = export.data + export.rec["byte_offset"]
    n, stream = ext["hi"] - ext["lo"], stream or 1
    rt = devmem.runtime()
    try:
        on = rt.read_on(stream, first + ext["lo"], n)
        rt.synchronize()
        idle = rt.copy_to_host(first + ext["lo"], n)
    except Exception:  # a read the runtime refuses is the harness's: no verdict
        return
    if on != idle:
        k = next(k for k in range(n) if on[k] != idle[k])
        b.fail(stale_clause(how), "the import %s and its view, read on its stream %d, holds byte 0x%02x at +%d "
               "where the producer's data, once the device is idle, holds 0x%02x" % (
                   "came through the exchange table's *_no_sync functions (current_work_stream names the "
                   "producer's stream)" if how == ORDER_TABLE else "passed stream=-1 (no synchronisation)",
                   stream, on[k], ext["lo"] + k, idle[k]))


def check_result(b, rec, copy, export, result, view_only, from_dlpack=None, how=ORDER_NAMED, log=None):
    """check_result: the oracles on an accepted result, while it lives. how: ORDER_*. log: the
    producer's (its unrenamed: the capsule __dlpack__ handed out still has its unconsumed
    name)."""
    p = export.plan
    breach = refusal_clause(rec, p)
    # a dltensor_from_py_object_no_sync view is a bare DLTensor: it carries no version
    if breach and not (view_only and breach[0] == "VER-08"):
        b.fail(*breach)
    if log is not None and log.unrenamed and not export.used:
        b.fail("CAP-03", "the consumer imported the tensor but left its capsule named %s"
               % ("dltensor_versioned" if export.versioned else "dltensor"))
    addr, view = result_address(result)
    aliases = p["mode"] == "buffer" and addr is not None and 0 <= addr - export.base <= p["size"]
    if aliases and isinstance(view, CudaView) and export.device is not None and export.device.pending \
            and how != ORDER_NAMED:
        check_pending_view(b, export, view.stream, how)
    zero_copy = aliases or (addr is None and copy != R.COPY_TRUE and not p["ext"]["zero_size"])
    if zero_copy and not aliases and export.device is not None:  # no host result views device memory
        zero_copy = result_device(result) == rec["device"]
    if zero_copy and export.has_deleter and export.deleter_calls > 0:
        clause, why = "OWN-03", ""
        if export.destructor_deleted and view_only:
            clause, why = "XAPI-15", " (a dltensor_from_py_object_no_sync view kept past the call)"
        elif export.destructor_deleted:
            clause, why = "CAP-03", " (capsule died unconsumed)"
        b.fail(clause, "deleter ran %d time(s) while the zero-copy result is alive%s" % (export.deleter_calls, why))
    if aliases and not p["ext"]["zero_size"]:
        first = export.data + rec["byte_offset"]
        if addr != first:
            b.fail("LAY-03", "result starts at data%+d, export at data+%d" % (addr - export.data, rec["byte_offset"]))
        if view is not None:
            check_view(b, export, view)
    if not aliases and view is not None and addr is not None:  # a copy: it holds the export's elements
        stale = check_copy_values(b, rec, p, view, export.device is not None and export.device.pending)
        if stale is not None:
            b.fail(stale_clause(how), "the copy's element %d holds the export's bytes from before the producer's "
                   "stream wrote them (0x%02x): %s" % (stale, devmem.POISON, stale_why(how, log)))
    check_result_extra(b, rec, copy, export, result, view, aliases, addr, view_only, from_dlpack)
    if view is not None:
        view.release()


def check_released(b, export):
    """OWN-03 once everything is dropped: the deleter ran exactly once."""
    if not export.has_deleter:
        return
    calls = export.deleter_calls
    if export.used:
        if calls != 0:
            b.fail("CAP-04", "deleter of a capsule already named used_* ran %d time(s)" % calls)
        return
    if calls > 1 and export.destructor_deleted:
        b.fail("CAP-03", "deleter ran %d times: the capsule died unconsumed, and the consumer called it too" % calls)
    if calls != 1:
        b.fail("OWN-03", "deleter ran %d times once the result was dropped" % calls)


# ---- one input (LLVMFuzzerTestOneInput) ----------------------------------------------------

def triage_line(rec, p):
    """The "dlconform-input: CLAUSE: why" line the C target prints in triage mode."""
    breach = refusal_clause(rec, p)
    if breach:
        return "%s: %s" % breach
    if rec["device"][0] != R.CPU and not devmem.backs(rec, p):  # device memory is a legal export
        return "DEV-07: another device: refuse with BufferError"
    if p["mode"] == "null" and p["ext"]["zero_size"]:  # what a consumer must accept (LAY-04)
        return "LAY-04: NULL data of a zero-size tensor: import it"
    return "LAY-11: a legal export: import, copy or raise"


def judge(data, from_dlpack, say=None):
    """Every breach of one input, in the C target's order. say: prints the exchange's steps."""
    rec = R.apply_offer(R.decode(data))
    p = R.plan(rec)
    R.drop_giant_copies(rec, p)
    breach = refusal_clause(rec, p)
    export = X.Export(rec, p)
    copy = R.copy_passed(rec, p)
    b = Breaches()
    out = X.exchange(export, rec, copy, from_dlpack, b, say)
    result, error, log = out.result, out.error, out.log
    del out.result, out.error
    if isinstance(error, SystemError) and out.silent_failures:  # exchange.py: BufferError in C
        error = BufferError("%s (the C table function raises BufferError here)" % error)
    if say is not None:
        say("accepted: %s" % type(result).__name__ if error is None else
            "refused: %s: %s" % (type(error).__name__, error))
        say("__dlpack__ calls: %r; exchange API calls: %r" % (log.kwargs, out.called))
    refused = error is not None
    check_calls(b, rec, copy, log, error, refused, breach is not None)
    if refused:
        must = acceptance_clause(rec, p, log.max_major)
        if must and not refusal_is_due_to(must, rec, from_dlpack):
            must = None
        if must:
            b.fail(must, "refused a plain export it accepts without the NULL pointer (%s: %s)" % (
                type(error).__name__, error))
        ext = p["ext"]
        other_reason = (breach is not None or not array_api_dtype(rec) or rec["ndim"] > 32 or rec["byte_offset"] != 0
                        or ext["status"] != "ok" or not ext["row_major"] or p["mode"] != "buffer"
                        or not small_span(rec, p) or (R.versioned(rec) and log.max_major < 1))
        check_refusal_class(b, rec, copy, log, error, other_reason, export.device is not None)
        del error
    else:
        view_only = out.views > 0 and out.handouts == 0 and log.calls == 0
        how = (ORDER_MINUS_ONE if log.named_int and log.named == -1 else ORDER_NAMED) if log.calls > 0 else \
            ORDER_TABLE if out.views > 0 or out.handouts > 0 else ORDER_NAMED
        check_result(b, rec, copy, export, result, view_only, from_dlpack, how, log)
        del result
    if export.has_deleter and export.deleter_calls == 0 and not export.used:
        gc.collect()
    check_released(b, export)
    export.close()
    return b


def reproduce(data, from_dlpack, finding="", known=None, sanitizer=None, name="input", target=None):
    """The reproducer's body: judge one input with its steps printed, then conclude (breaches.py:
    the known-findings file `known`, the kind of a sanitizer crash, the input's name, and the fuzz
    target `target` whose sanitizer build replays such a crash)."""
    rec = R.apply_offer(R.decode(data))
    say("dlconform-input: " + triage_line(rec, R.plan(rec)))
    conclude(judge(data, from_dlpack, say), finding, known, sanitizer, name, replayer(data, target, known))
