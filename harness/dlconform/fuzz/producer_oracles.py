"""The producer target's oracles in Python: the twin of fuzz/target_producer.c, for
reproducers.

judge(data, producer) replays one input as LLVMFuzzerTestOneInput does: the record's view
parameters make a native tensor of the producer (producer_views.build), which is exported
through __dlpack__ with the record's keywords and, when its type offers one, the C exchange
API; every breach comes back as (clause, message), in the order the C target would report
them (it stops at the first). The rules are in fuzz/README.md ("Oracles");
fuzz/tests/test_oracle_agreement.py holds the two to one verdict. check's rules come from
dlconform._probe (check, extent, read_elements), the same C the target links.
"""
import ctypes as C

from . import devmem
from . import producer_cuda as PC
from . import record as R
from .breaches import Breaches, allowed_exceptions, conclude, replayer, say

BASE_ELEMENTS = 64
# DLDeviceType values of DLPack 1.3 other than kDLCPU (dlc_is_known_device)
NON_CPU_DEVICES = R.KNOWN_DEVICES - {R.CPU}

_py = C.PyDLL(None)
_py.PyCapsule_New.restype = C.py_object
_py.PyCapsule_New.argtypes = (C.c_void_p, C.c_char_p, C.c_void_p)
_py.PyCapsule_GetName.restype = C.c_char_p
_py.PyCapsule_GetName.argtypes = (C.py_object,)
_py.PyCapsule_GetPointer.restype = C.c_void_p
_py.PyCapsule_GetPointer.argtypes = (C.py_object, C.c_char_p)
_py.PyCapsule_IsValid.argtypes = (C.py_object, C.c_char_p)


def _c_mod(a, m):
    """C's a % m (the sign follows a)."""
    r = abs(a) % m
    return -r if a < 0 else r


def view_parameters(rec):
    """build_view's arguments: (dtype index, shape, strides, element offset, readonly, seed)."""
    code, bits, _ = rec["dtype"]
    keys = R.ARRAY_API_DTYPES  # in producer_views.DTYPES order
    idx = keys.index((code, bits)) if (code, bits) in keys else (code + bits) % 13
    nd = (rec["ndim"] & 0xFF) % 5
    dims = max(rec["ndim"], 0)
    shape = tuple((rec["shape"][i] if i < dims else 0) % (1 << 64) % 5 for i in range(nd))
    strides = tuple(_c_mod(rec["strides"][i] if i < dims else 0, 9) for i in range(nd))
    return idx, shape, strides, rec["byte_offset"] % BASE_ELEMENTS, rec["flags"] & 1, rec["seed"]


def dlpack_kwargs(rec, mode=None):
    """build_kwargs: the keywords of __dlpack__, from the record's kw bits (mode: the CUDA
    mode's, whose stream ints above 2 are its own stream)."""
    kw = {}
    if rec["kw"] & R.KW["max_version"]:
        kw["max_version"] = rec["max_version"]
    if rec["kw"] & R.KW["copy"]:
        kw["copy"] = R.COPY_VALUES[rec["copy"] % 3]
    if rec["kw"] & R.KW["dl_device"]:
        kw["dl_device"] = rec["kw_device"]
    if rec["kw"] & R.KW["stream"]:
        v = mode.stream_value(rec["stream"]) if mode else rec["stream"]
        kw["stream"] = (None, v, "stream")[rec["stream_kind"] % 3]
    return kw


def _odd_stream(rec):
    return bool(rec["kw"] & R.KW["stream"]) and rec["stream_kind"] % 3 != 0


def foreign_device(rec):
    """A defined non-CPU dl_device with an id >= 0: a CPU tensor may not export to it, and it
    is no bad argument (foreign_device in target_producer.c)."""
    dev_type, dev_id = rec["kw_device"]
    return bool(rec["kw"] & R.KW["dl_device"]) and dev_type in NON_CPU_DEVICES and dev_id >= 0


def check_exception(b, what, error, any_class):
    """check_exception: a failure must raise an allowed class (any but SystemError for a
    refused stream other than None)."""
    if error is None:
        return b.fail("EXC", "%s failed without setting an exception" % what)
    ok = not isinstance(error, SystemError) if any_class else isinstance(error, allowed_exceptions())
    if not ok:
        b.fail("EXC", "%s raised %s: %s" % (what, type(error).__name__, error))


def check_device_refusal(b, rec, error, clause="DEV-05"):
    """DEV-05: BufferError for a dl_device the producer cannot export to (CPY-05: also when
    copy=False forbids the copy it needs; TypeError passes: an old producer, VER-06)."""
    if error is None or isinstance(error, SystemError):
        return check_exception(b, "__dlpack__", error, False)
    if not isinstance(error, (BufferError, TypeError)):
        b.fail(clause, "__dlpack__ refused dl_device=(%d, %d) with %s, not BufferError: %s" % (
            rec["kw_device"] + (type(error).__name__, error)))


class Tensor:
    """A DLManagedTensor[Versioned] at an address, as _probe reads capsules. For a versioned
    struct the reads go through a copy with version 1.0 and no flags, so that _probe.check
    gives dlc_check_tensor's report alone and reads past the version whatever its major."""

    def __init__(self, pointer, versioned):
        self.versioned = versioned
        if versioned:
            self._copy = C.create_string_buffer(C.string_at(pointer, 80), 80)
            C.memmove(self._copy, (C.c_uint32 * 2)(1, 0), 8)
            C.memmove(C.addressof(self._copy) + 24, (C.c_uint64 * 1)(0), 8)
            self.capsule = _py.PyCapsule_New(C.addressof(self._copy), b"dltensor_versioned", None)
            self.flags = C.c_uint64.from_address(pointer + 24).value
        else:
            self.capsule = _py.PyCapsule_New(pointer, b"dltensor", None)
            self.flags = 0


def _in_source(rec, t, e):
    """in_source: whether the export's elements lie in the export a library's array was
    imported from (rec["_source"], (address, bytes, read-only), or None)."""
    src = rec.get("_source")
    if not src or not src[1] or e["status"] != "ok" or e["zero_size"]:
        return False
    from .. import _probe

    info = _probe.inspect(t.capsule)
    first = (info["data"] + info["byte_offset"]) % (1 << 64)
    return first + e["lo"] >= src[0] and first + e["hi"] <= src[0] + src[1]


LAY05 = "%s: the strides count bytes, not elements: divided by the item size they describe the tensor"


def _strides_in_bytes(mode, info, strides, size, device, expected, base=0, nbytes=0):
    """target_producer.c's strides_in_bytes: whether the strides, each divided by the item size,
    describe the tensor (in [base, base + nbytes) when base is not 0), where as given they do not:
    LAY-05 rather than SEM-01."""
    from ..kit.capsules import layout_extent

    shape = info["shape"] or ()
    if size < 2 or info["ndim"] > 8 or any(n > 1 and st % size for n, st in zip(shape, strides)):
        return False
    el = [st // size for st in strides]
    if not any(n > 1 and st for n, st in zip(shape, el)):
        return False
    e = layout_extent(info["ndim"], shape, el, info["dtype"])
    first = info["data"] + info["byte_offset"]
    if e["status"] != "ok" or e["zero_size"] or (base and not (first + e["lo"] >= base and
                                                               first + e["hi"] <= base + nbytes)):
        return False
    if device:
        got = _device_elements(mode, first, e, shape, el, 0)
    else:  # within the export's own extent, which check_tensor reads too
        got = _gather(C.string_at(first + e["lo"], e["hi"] - e["lo"]), e, shape, el)
    return got is not None and _first_difference(got, expected, size, e["numel"]) is None


def check_tensor(b, via, t, rec, expected, base, nbytes, mode=None):
    """check_tensor: check's report, the CUDA mode's device oracles, the flag oracles, then
    zero-copy and values; a SEM-01 that strides counted in bytes explain is LAY-05."""
    from .. import _probe

    for clause, msg in _probe.check(t.capsule, spec=(1, 3)):
        if clause not in ("LAY-04", "LAY-01"):
            return b.fail(clause, "%s: %s" % (via, msg))
    where = PC.READ_HOST
    if mode:
        device = _probe.inspect(t.capsule)["device"]
        where = mode.placed(b, rec, device, t.versioned, t.flags, "DEV-03" if via == "__dlpack__" else "XAPI-14")
    copy = rec["copy"] % 3 if rec["kw"] & R.KW["copy"] else R.COPY_ABSENT
    e = _probe.extent(t.capsule)
    if (t.versioned and rec["flags"] & 1 and not t.flags & (R.READ_ONLY | R.IS_COPIED)
            and (not rec.get("_source") or _in_source(rec, t, e))):
        b.fail("FLG-02", "%s: a read-only view exported without READ_ONLY" % via)
    if t.versioned and copy == R.COPY_TRUE and not t.flags & R.IS_COPIED and not (mode and where == PC.READ_HOST):
        b.fail("FLG-04", "%s: copy=True exported without IS_COPIED" % via)
    if copy == R.COPY_TRUE and not base and _in_source(rec, t, e):  # it copied nothing
        b.fail("CPY-01", "%s: copy=True exported the memory the array was imported from" % via)
    if where == PC.READ_NONE or e["status"] != "ok" or e["zero_size"]:
        return
    info = _probe.inspect(t.capsule)
    strides = info["strides"]
    if strides is None:
        strides = R.row_major_strides(info["ndim"], info["shape"]) if info["ndim"] <= 8 else None
        if strides is None:
            return
    first = info["data"] + info["byte_offset"]
    size, device = e["itemsize"], where == PC.READ_DEVICE
    # base 0: a library that does not say where its array lies; a host copy of a CUDA view is
    # a copy by definition
    if base and (not mode or device):
        inside = first + e["lo"] >= base and first + e["hi"] <= base + nbytes
        if copy == R.COPY_TRUE and inside:
            b.fail("CPY-01", "%s: copy=True exported the view's own memory" % via)
        if copy != R.COPY_TRUE and not inside and not t.flags & R.IS_COPIED:
            if len(expected) == e["numel"] * size and _strides_in_bytes(mode, info, strides, size, device, expected,
                                                                         base, nbytes):
                return b.fail("LAY-05", LAY05 % via)
            b.fail("SEM-01", "%s: the export does not view the tensor's memory (copy not asked)" % via)
    if len(expected) != e["numel"] * size:
        return b.fail("SEM-01", "%s: %d elements of %d bytes exported, the view has %d bytes" % (
            via, e["numel"], size, len(expected)))
    # a device export is read first as the consumer reads it, on the stream it named (STR-01)
    on = mode.read_stream(rec) if where == PC.READ_DEVICE and via == "__dlpack__" else 0
    if where == PC.READ_DEVICE:
        got = _device_elements(mode, first, e, info["shape"], strides, on)
        if got is None and on:  # the stream is gone (mode.after's STR-11): read without it
            on = 0
            got = _device_elements(mode, first, e, info["shape"], strides, 0)
        if got is None and _strides_in_bytes(mode, info, strides, size, True, expected):
            return b.fail("LAY-05", LAY05 % via)
        if got is None:  # the runtime reads any live device memory: the export names none
            return b.fail("SEM-01", "%s: the export's elements (%d bytes from data + byte_offset %+d) are no device "
                          "memory the runtime can read" % (via, e["hi"] - e["lo"], e["lo"]))
    else:
        got = _probe.read_elements(t.capsule)
    bad = _first_difference(got, expected, size, e["numel"])
    if bad is not None and on:
        settled = _device_elements(mode, first, e, info["shape"], strides, 0)
        if settled is not None and _first_difference(settled, expected, size, e["numel"]) is None:
            return b.fail(mode.stream_clause(rec), "%s: what the consumer's stream reads right after it returned "
                          "differs at element %d from what the tensor holds once its stream ran: it did not make "
                          "that stream wait (STR-01)" % (via, bad))
    if bad is not None and _strides_in_bytes(mode, info, strides, size, device, expected):
        return b.fail("LAY-05", LAY05 % via)
    if bad is not None:
        b.fail("SEM-01", "%s: element %d differs from the tensor's value" % (via, bad))


def _first_difference(got, expected, size, numel):
    for i in range(numel):
        if got[i * size:(i + 1) * size] != expected[i * size:(i + 1) * size]:
            return i
    return None


def _device_elements(mode, first, e, shape, strides, stream):
    """The elements of a device export in row-major order, read through its strides from a copy
    of its extent (check_tensor's device_copy): on `stream`, or settled for 0; None when the
    runtime refused the read."""
    n = e["hi"] - e["lo"]
    raw = mode.read_on(stream, first + e["lo"], n) if stream else mode.settled(first + e["lo"], n)
    return None if raw is None else _gather(raw, e, shape, strides)


def _gather(raw, e, shape, strides):
    """The elements in row-major order of a view whose extent's bytes are `raw` (raw[0] is the
    byte at first + lo)."""
    import itertools

    size, out = e["itemsize"], bytearray()
    for idx in itertools.product(*(range(n) for n in shape or ())):
        off = sum(i * st for i, st in zip(idx, strides)) * size - e["lo"]
        out += raw[off:off + size]
    return bytes(out)


def check_name(b, rec, cap):
    """The capsule's name against max_version (CAP-01, VER-02, VER-04): whether it is versioned."""
    name = _py.PyCapsule_GetName(cap) if type(cap).__name__ == "PyCapsule" else None
    versioned = name == b"dltensor_versioned"
    if not versioned and name != b"dltensor":
        b.fail("CAP-01", "__dlpack__ returned a capsule named %s" % (name.decode() if name else "NULL"))
    asked = rec["max_version"][0] if rec["kw"] & R.KW["max_version"] else -1
    if versioned and asked < 1:
        b.fail("VER-04" if asked >= 0 else "VER-02", "versioned capsule for max_version %s" % (
            "None" if asked < 0 else "(0, x)"))
    return name, versioned


def export_dunder(b, rec, view, expected, base, nbytes, say, mode=None):
    """__dlpack__(**keywords) and the oracles on what it gave."""
    from .. import _probe

    kw = dlpack_kwargs(rec, mode)
    say("call: __dlpack__(%s)" % ", ".join("%s=%r" % kv for kv in kw.items()))
    try:
        cap, error = view.__dlpack__(**kw), None
    except BaseException as e:
        cap, error = None, e
    odd = _odd_stream(rec)
    if error is not None and mode:
        say("refused: %s: %s" % (type(error).__name__, error))
        rule = mode.refusal_rule(rec)
        if rule in (PC.REFUSE_DEVICE, PC.REFUSE_COPY):
            return check_device_refusal(b, rec, error, "CPY-05" if rule == PC.REFUSE_COPY else "DEV-05")
        return check_exception(b, "__dlpack__", error, rule == PC.REFUSE_ANY)
    if mode:
        mode.arguments(b, rec)
        odd = False  # the CUDA meanings replace the CPU tensor's rules below
    if error is not None:
        say("refused: %s: %s" % (type(error).__name__, error))
        if not odd and foreign_device(rec):
            return check_device_refusal(b, rec, error)
        return check_exception(b, "__dlpack__", error, odd)
    if odd:
        int_stream = rec["stream_kind"] % 3 == 1
        b.fail("STR-10" if int_stream else "STR-02", "__dlpack__ accepted stream=%s for a CPU tensor%s" % (
            "'stream'" if not int_stream else "-1" if rec["stream"] == -1 else "<int>",
            " (ambiguous: it asks for no synchronisation)" if int_stream and rec["stream"] == -1
            else " (invalid argument: the behaviour is unspecified)"))
    if not mode and rec["kw"] & R.KW["dl_device"] and rec["kw_device"] != (R.CPU, 0):
        b.fail("DEV-05", "__dlpack__ accepted dl_device=(%d, %d) for a CPU tensor%s" % (
            rec["kw_device"] + (" (ambiguous: a CPU device id that is not zero)" if rec["kw_device"][0] == R.CPU
                                else "",)))
    name, versioned = check_name(b, rec, cap)
    if name not in (b"dltensor", b"dltensor_versioned"):
        return
    t = Tensor(_py.PyCapsule_GetPointer(cap, name), versioned)
    say("exported: %s, flags %#x, %r" % (name.decode(), t.flags, _probe.inspect(t.capsule)))
    if versioned:
        for clause, msg in _probe.check(cap, spec=(1, 3)):
            if not clause.startswith(("LAY-0", "DT-")):
                b.fail(clause, "__dlpack__: %s" % msg)
    check_tensor(b, "__dlpack__", t, rec, expected, base, nbytes, mode)
    _probe.consume(cap).release()  # as a consumer would: rename, then the deleter once
    if mode:
        mode.after(b, rec)


def export_xapi(b, rec, view, expected, base, nbytes, say, mode=None):
    """The exchange API of the view's type, when it offers a usable one (XAPI-14)."""
    from .. import _probe

    c = getattr(type(view), "__dlpack_c_exchange_api__", None)
    if c is None or not _py.PyCapsule_IsValid(c, b"dlpack_exchange_api"):
        return
    api = _py.PyCapsule_GetPointer(c, b"dlpack_exchange_api")
    if C.c_uint32.from_address(api).value != 1 or not C.c_void_p.from_address(api + 24).value:
        return
    rc, handle, error = _probe.xapi_managed_from(api, view)
    say("exchange API: managed_tensor_from_py_object_no_sync gave %s" % ("a tensor" if handle else error))
    if handle is None:
        if error is None:
            b.fail("XAPI-14", "managed_tensor_from_py_object_no_sync failed without a Python exception")
        return check_exception(b, "managed_tensor_from_py_object_no_sync", error, False)
    check_tensor(b, "exchange API", Tensor(handle.pointer, True), dict(rec, kw=0), expected, base, nbytes, mode)
    handle.release()


def judge(data, producer, say=lambda line: None):
    """Every breach of one input, in the C target's order. say: prints the steps."""
    from .producer_views import build

    name, device = devmem.split_target(producer)  # NAME@cuda: the CUDA mode (producer_cuda.h)
    mode = PC.Mode() if device else None  # devmem.Unavailable without a runtime
    rec = R.decode(data)
    if mode:
        rec["flags"] &= ~1  # a device view is never read-only
    b = Breaches()
    params = view_parameters(rec)
    try:
        made = build(name, *params, device=device)
    except BaseException as e:
        check_exception(b, "building the view", e, False)
        return b
    if made is None:
        say("skipped: %s cannot express this view" % producer)
        return b
    view, expected, _itemsize, base, nbytes = made[:5]
    source = None  # a view made here: read-only as the record asks
    if len(made) > 5:  # a library's import of our export: read-only where it views it
        source = made[5] if made[5] and made[5][1] else None
        if not source or not source[2]:
            rec["flags"] &= ~1
    rec["_source"] = source
    say("view: %s %r of dtype index %d, strides %r, offset %d, read-only %d" % (
        type(view).__name__, params[1], params[0], params[2], params[3], params[4]))
    export_dunder(b, rec, view, expected, base, nbytes, say, mode)
    export_xapi(b, rec, view, expected, base, nbytes, say, mode)
    return b


def reproduce(data, producer, finding="", known=None, sanitizer=None, name="input", target=None):
    """The reproducer's body: judge one input with its steps printed, then conclude (breaches.py:
    the known-findings file `known`, the kind of a sanitizer crash, the input's name, and the fuzz
    target `target` whose sanitizer build replays such a crash)."""
    conclude(judge(data, producer, say), finding, known, sanitizer, name, replayer(data, target, known))
