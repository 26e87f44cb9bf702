"""One exchange of the consumer target, in Python: the twin of fuzz/forge.c, fuzz/layout.c,
fuzz/producer.c, fuzz/xapi_offer.c and fuzz/exchange.c for reproducers.

- Export: the record's memory laid out as layout.c lays it out, a dlconform._ref.Forge over
  it, and the forge.c accounting (deleter calls, whether the capsule's destructor ran it).
- Producer: producer.c's object (one capsule handed out on every call, the call log and
  its stream rule, the old and strict variants).
- the exchange API tables of record byte 67, built with ctypes, with the XAPI-04 / XAPI-06
  judgement of xapi_offer.c on every call.
- exchange(): exchange.c's call of from_dlpack.

Where the twin differs from the C target:
- A table function cannot leave a Python exception set from ctypes: where the C function
  fails with BufferError or TypeError, this one returns -1 with none set, and counts it
  (Outcome.silent_failures). A consumer that passes that failure on raises SystemError here
  where it raises the C function's BufferError in the target: consumer_oracles judges it so.
- managed_tensor_allocator and managed_tensor_to_py_object_no_sync fail (-1) here.
- The deleter leaves the memory mapped, so a read after it goes unseen (ASan sees it). In the
  CUDA mode (fuzz/devmem.h) the device copy is given back after the last oracle, where the
  C deleter gives it back at once.
- A deleter called with a foreign pointer is not detected.
"""
import ctypes as C
import os
import mmap

from . import devmem
from . import record as R

_py = C.PyDLL(None)  # CPython's C API, own prototypes (pythonapi's are shared)
_py.PyCapsule_GetName.restype = C.c_char_p
_py.PyCapsule_GetName.argtypes = (C.c_void_p,)
_py.PyCapsule_GetPointer.restype = C.c_void_p
_py.PyCapsule_GetPointer.argtypes = (C.py_object, C.c_char_p)
_py.PyCapsule_SetName.argtypes = (C.py_object, C.c_char_p)
_py.PyCapsule_New.restype = C.py_object
_py.PyCapsule_New.argtypes = (C.c_void_p, C.c_char_p, C.c_void_p)
_py.PyCapsule_GetDestructor.restype = C.c_void_p
_py.PyCapsule_GetDestructor.argtypes = (C.py_object,)
_libc = C.CDLL(None, use_errno=True)
_libc.mprotect.argtypes = (C.c_void_p, C.c_size_t, C.c_int)

DESTRUCTOR = C.CFUNCTYPE(None, C.c_void_p)
_py.PyCapsule_SetDestructor.argtypes = (C.py_object, DESTRUCTOR)
CALL_DESTRUCTOR = C.PYFUNCTYPE(None, C.c_void_p)  # with the GIL held
PROT_NONE = 0
DANGLING = 0x1000  # below mmap_min_addr: never mapped, like layout.c's PROT_NONE reservation
UNCONSUMED = (b"dltensor", b"dltensor_versioned")
_hooks = []  # destructor hooks: a capsule may outlive its export (a consumer that leaks it)


def fill_pattern(size, seed):
    """layout.c's fill: byte i is (i * 131 + seed) & 0xff (period 256)."""
    period = bytes((i * 131 + seed) & 0xFF for i in range(256))
    return (period * (size // 256 + 1))[:size]


class Memory:
    """The buffer of a record planned "buffer", followed by a PROT_NONE page. address: the
    buffer's first byte; data = address + pad.
    - Read-only (FLG-02): on PROT_READ pages, placed as layout.c's alloc_guarded places it
      (a 64-byte aligned start, the end within 63 bytes of the guard).
    - Otherwise the end touches the guard, so a read past the end faults, where the C target
      has ASan see it to the byte."""

    def __init__(self, size, seed, readonly):
        page = mmap.PAGESIZE
        aligned = (size + 63) & ~63 if readonly else size
        rounded = (aligned + page - 1) // page * page
        self.map = mmap.mmap(-1, rounded + page)
        start = rounded - aligned
        self.map[start:start + size] = fill_pattern(size, seed)
        self._anchor = C.c_char.from_buffer(self.map)
        base = C.addressof(self._anchor)
        self.address = base + start
        _protect(base + rounded, page, PROT_NONE)
        # layout.c unmaps a read-only buffer at the first deleter call (a plain one goes back to
        # the heap, where only ASan sees a late read): the export's Forge revokes these pages then
        self.revoke = (base, rounded) if readonly else None
        if readonly:
            _protect(base, rounded, mmap.PROT_READ)


def _protect(address, size, prot):
    if _libc.mprotect(address, size, prot) != 0:
        raise OSError(C.get_errno(), "mprotect failed")


class Export:
    """forge.h's dlc_forged: the record's tensor behind capsules of one Forge. deleter_calls,
    has_deleter, used and destructor_deleted (a capsule died unconsumed and its destructor
    ran the deleter, CAP-05) mean what they mean there; base is the buffer's address (0
    without one), for aliasing."""

    def __init__(self, rec, p):
        from .. import _ref

        k = rec["kind"]
        self.rec, self.plan = rec, p
        self.memory, self.base, self.device = None, 0, None
        if p["mode"] == "buffer":
            self.memory = Memory(p["size"], rec["seed"], p["readonly"])
            self.base = self.memory.address
            if devmem.backs(rec, p):  # the same bytes on the device (fuzz/devmem.h), pending
                self.device = devmem.DeviceMemory(fill_pattern(p["size"], rec["seed"]), pending=True)
                self.base = self.device.address
            data = self.base + p["pad"]
        else:
            data = DANGLING if p["mode"] == "dangling" else "null"
        self.data = 0 if data == "null" else data
        self.versioned = R.versioned(rec)
        self.used = bool(k & R.KIND["used"])
        self.has_deleter = not k & R.KIND["deleter_null"]
        self.strides = None if k & R.KIND["strides_null"] else rec["strides"]
        args = dict(dtype=rec["dtype"], shape=rec["shape"], ndim=rec["ndim"], strides=self.strides,
                    byte_offset=rec["byte_offset"], versioned=self.versioned, version=rec["version"],
                    flags=rec["flags"], device=rec["device"], data=data,
                    shape_null=bool(k & R.KIND["shape_null"]), null_deleter=not self.has_deleter)
        if self.used:
            args["capsule_name"] = "used_dltensor_versioned" if self.versioned else "used_dltensor"
        if self.memory is not None and self.memory.revoke is not None and self.device is None:
            args["revoke"] = self.memory.revoke
        self.forge = _ref.Forge(**args)
        self.destructor_deleted = False

    def close(self):
        """Gives the device copy back (forge.c's dlc_forged_free; its deleter gives it back at
        the first call already)."""
        if self.device is not None:
            self.device.free()

    @property
    def deleter_calls(self):
        return self.forge.deleter_calls

    def capsule(self):
        """A new capsule of the export whose destructor notes when it deletes (forge.c's
        capsule_destructor: only an unconsumed name runs the deleter)."""
        cap = self.forge.capsule()
        original = _py.PyCapsule_GetDestructor(cap)
        call = CALL_DESTRUCTOR(original) if original else None

        def destructor(capsule):
            if _py.PyCapsule_GetName(capsule) in UNCONSUMED:
                self.destructor_deleted = True
                if call is not None:
                    call(capsule)

        hook = DESTRUCTOR(destructor)
        _hooks.append(hook)
        _py.PyCapsule_SetDestructor(cap, hook)
        return cap


# ---- the producer (fuzz/producer.c) -----------------------------------------------------

FWD_ABSENT, FWD_NONE, FWD_FALSE, FWD_TRUE = -1, 0, 1, 2


class Log:
    """dlc_producer_log: how the consumer called __dlpack__."""

    def __init__(self):
        self.calls = 0  # __dlpack__ calls
        self.refused_kw = 0  # old producer: calls refused for a keyword other than stream
        self.max_major = -1  # max_version[0] of the last call, -1 when not passed
        self.stream_clause, self.stream_msg = None, ""  # the first stream breach
        self.cpu_dl_device = False  # some call passed dl_device=(1, 0)
        self.copy_forwarded = FWD_ABSENT  # copy= of the first call that passed it
        self.cpu_ask_unguarded = False  # some call passed dl_device=(1, 0) without copy=False
        self.named_int, self.named = False, 0  # the last call's stream, where it was an int
        self.named_host = False  # the last call asked for dl_device=(1, 0)
        self.side = 0  # set by exchange(): the stream of the side-stream context it ran in
        self.unrenamed = False  # set by exchange(): the capsule handed out kept its unconsumed name
        self.kwargs = []  # every call's keywords, for the reproducer's output

    def copy(self):
        c = Log()
        c.__dict__.update(self.__dict__)
        return c


def _as_long(v):
    """PyLong_AsLong of v, with -1 for anything that is not an int."""
    try:
        return int(v.__index__()) if not isinstance(v, int) else int(v)
    except Exception:
        return -1


def _is_cpu_device(d):
    return isinstance(d, tuple) and len(d) == 2 and _as_long(d[0]) == R.CPU and _as_long(d[1]) == 0


class Producer:
    """producer.c's Producer: __dlpack__ hands out the one capsule it holds, whatever the
    keywords (or refuses: an old producer, VER-06; a strict one, DEV-05)."""

    def __init__(self, capsule, device, old=False, strict=False, order=None):
        self._capsule, self._device, self._old, self._strict = capsule, device, old, strict
        self._order = order  # data pending on a stream: devmem.order (dlc_producer_set_order)
        self.log = Log()

    def __dlpack_device__(self):
        return self._device

    def __dlpack__(self, *args, **kw):
        log = self.log
        log.calls += 1
        log.kwargs.append(dict(kw))
        if args:
            raise TypeError("__dlpack__ takes keyword arguments only")
        if self._old:
            for key in kw:
                if key != "stream":
                    log.refused_kw += 1
                    raise TypeError("__dlpack__() got an unexpected keyword argument %r" % key)
        self._log_call(kw)
        dl_device = kw.get("dl_device")
        if self._strict and dl_device is not None and dl_device != self._device:
            raise BufferError("cannot export to the requested dl_device")
        if self._order is not None:
            self._order(kw.get("stream"), _is_cpu_device(dl_device))
        return self._capsule

    def _stream_breach(self, kw):
        """(clause, value) of the stream rule this call breaks (producer.c, stream_breach)."""
        dev_type, log = self._device[0], self.log
        dl_device = kw.get("dl_device")
        cpu_request = dl_device is not None and _is_cpu_device(dl_device)
        stream = kw.get("stream")  # none passed is the default, None: not explicit either (STR-14)
        if stream is None:
            if dev_type == R.CUDA and dl_device is None and log.refused_kw == 0:
                return "STR-14", 0
            return None, 0
        value = 0
        if isinstance(stream, int):
            value = _as_long(stream) if -(1 << 63) <= stream < 1 << 63 else -1
            if dev_type == R.CUDA and value == 0:
                return "STR-08", value
            if dev_type == R.ROCM and value in (1, 2):
                return "STR-09", value
        if cpu_request:
            return "STR-12", value
        if dev_type == R.CPU:
            return "STR-10", value
        return None, value

    def _log_call(self, kw):
        log = self.log
        clause, value = self._stream_breach(kw)
        if clause is not None and log.stream_clause is None:
            stream = kw.get("stream")
            what = ("None (by passing none)" if "stream" not in kw else "None" if stream is None
                    else str(value) if isinstance(stream, int) else "a non-int")
            log.stream_clause = clause
            log.stream_msg = "consumer passed stream=%s to a producer on device type %d%s" % (
                what, self._device[0], " with dl_device" if kw.get("dl_device") is not None else "")
        if _is_cpu_device(kw.get("dl_device")):
            log.cpu_dl_device = True
            log.cpu_ask_unguarded |= kw.get("copy", None) is not False
        if "copy" in kw and log.copy_forwarded == FWD_ABSENT:
            c = kw["copy"]
            log.copy_forwarded = FWD_NONE if c is None else FWD_FALSE if c is False else FWD_TRUE
        stream = kw.get("stream")
        log.named_int = isinstance(stream, int) and not isinstance(stream, bool)
        log.named = (int(stream) if -(1 << 63) <= stream < 1 << 63 else -2) if log.named_int else 0
        log.named_host = _is_cpu_device(kw.get("dl_device"))
        log.max_major = -1
        mv = kw.get("max_version")
        if isinstance(mv, tuple) and len(mv) >= 1:
            log.max_major = _as_long(mv[0])


# ---- the exchange API tables (fuzz/xapi_offer.c) ----------------------------------------

ROLE_OK, ROLE_INSTANCE, ROLE_FOREIGN = range(3)
API_NAME, USED_NAME = b"dlpack_exchange_api", b"used_dltensor_versioned"


class Header(C.Structure):
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32), ("prev_api", C.c_void_p)]


ALLOC = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_void_p, C.c_void_p, C.c_void_p)
FROM = C.CFUNCTYPE(C.c_int, C.py_object, C.POINTER(C.c_void_p))
TO = C.CFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p))
DLT = C.CFUNCTYPE(C.c_int, C.py_object, C.c_void_p)
STREAM = C.CFUNCTYPE(C.c_int, C.c_int, C.c_int32, C.POINTER(C.c_void_p))


class Table(C.Structure):
    _fields_ = [("header", Header), ("alloc", ALLOC), ("from_py", FROM), ("to_py", TO),
                ("dltensor", DLT), ("stream", STREAM)]


class Xapi:
    """dlc_xapi_log and the oracles of the table functions, for the exchange in flight."""

    def __init__(self):
        self.offer, self.calls, self.handouts, self.views = -1, 0, 0, 0
        self.silent_failures = 0  # -1 returned where the C function sets an exception
        self.breaches = None  # the in-flight exchange's list of (clause, message)
        self.called = []  # (role, function) per call, for the reproducer's output

    def begin(self, offer, breaches):
        self.offer, self.breaches = offer, breaches
        self.calls = self.handouts = self.views = self.silent_failures = 0
        self.called = []

    def end(self):
        self.offer, self.breaches = -1, None

    def judge(self, role, fn):
        self.calls += 1
        self.called.append((("ok", "instance", "foreign")[role], fn))
        kind = self.offer & R.OFFER_KIND
        if role == ROLE_INSTANCE:
            self._fail("XAPI-04", "from_dlpack called %s of the exchange table an instance answers with, %s" % (
                fn, "not the one its type offers (the lookup is on the type)" if kind == 6
                else "though its type offers none (the lookup is on the type)"))
        elif role == ROLE_FOREIGN:
            major = 0 if kind == 3 and self.offer & R.OFFER_MAJOR0 else 2
            self._fail("XAPI-06", "from_dlpack called %s of an exchange table whose header major is %d, not 1"
                       % (fn, major))

    def _fail(self, clause, msg):
        if self.breaches is not None:
            self.breaches.append((clause, msg))


XAPI = Xapi()


def _exported(obj):
    """(capsule, DLManagedTensorVersioned address) of a producer's unconsumed versioned
    export, or None where xapi_offer.c's `exported` fails."""
    cap = obj._capsule if isinstance(obj, Producer) else None
    if cap is None or _py.PyCapsule_GetName(id(cap)) != b"dltensor_versioned":
        return None
    return cap, _py.PyCapsule_GetPointer(cap, b"dltensor_versioned")


def _judged_export(role, fn, obj, out):
    """XAPI.judge of a call of fn, then obj's export (_exported), or None: a failure the C
    function would raise, counted as silent."""
    XAPI.judge(role, fn)
    found = _exported(obj) if out else None
    if found is None:
        XAPI.silent_failures += 1
    return found


def _functions(role, null_dltensor=False):
    def from_py(obj, out):
        found = _judged_export(role, "managed_tensor_from_py_object_no_sync", obj, out)
        if found is None:
            return -1
        _py.PyCapsule_SetName(found[0], USED_NAME)  # the caller is the one owner now
        XAPI.handouts += 1
        out[0] = found[1]
        return 0

    def dltensor(obj, out):
        found = _judged_export(role, "dltensor_from_py_object_no_sync", obj, out)
        if found is None:
            return -1
        C.memmove(out, found[1] + 32, 48)  # dl_tensor: 48 bytes at offset 32, not owned
        XAPI.views += 1
        return 0

    def stream(device_type, device_id, out):
        XAPI.judge(role, "current_work_stream")
        if not out:
            return -1
        # xapi_offer.c's stream_impl: CUDA device 0 in the CUDA mode names the producer's own
        # stream, where its exports' bytes are pending (devmem.h); else NULL
        out[0] = devmem.work_stream() if device_type == R.CUDA and device_id == 0 else None
        return 0

    def unsupported(name):
        def fn(*args):
            XAPI.judge(role, name)
            return -1
        return fn

    return [ALLOC(unsupported("managed_tensor_allocator")), FROM(from_py),
            TO(unsupported("managed_tensor_to_py_object_no_sync")),
            DLT() if null_dltensor else DLT(dltensor), STREAM(stream)]


class Tables:
    """xapi_offer.c's static tables, made once per process (XAPI-05), and the producer class
    of each offer (the attribute is per type, XAPI-01)."""

    def __init__(self):
        self.held = []
        ok = self._table(ROLE_OK, 1, 3)
        self.capsules = {
            "ok": self._capsule(ok),
            "minor": self._capsule(self._table(ROLE_OK, 1, 99)),
            "null_dltensor": self._capsule(self._table(ROLE_OK, 1, 3, null_dltensor=True)),
            "instance": self._capsule(self._table(ROLE_INSTANCE, 1, 3)),
            "major2": self._capsule(self._table(ROLE_FOREIGN, 2, 0)),
            "major0": self._capsule(self._table(ROLE_FOREIGN, 0, 8)),
            "chained": self._capsule(self._table(ROLE_FOREIGN, 2, 0, prev=ok)),
        }
        self.classes = {}

    def _table(self, role, major, minor, null_dltensor=False, prev=None):
        fns = _functions(role, null_dltensor)
        t = Table(Header(major, minor, C.addressof(prev) if prev is not None else None), *fns)
        self.held.append((t, fns))
        return t

    def _capsule(self, table):
        return _py.PyCapsule_New(C.addressof(table), API_NAME, None)

    def producer_class(self, offer):
        """The producer class for record byte 67 (dlc_xapi_offer_type): (class, the capsule
        its instances answer with, or None)."""
        kind = offer & R.OFFER_KIND
        key = "major0" if kind == 3 and offer & R.OFFER_MAJOR0 else R.OFFERS[kind]
        on_type, on_instance = {
            "none": (None, None), "type": ("ok", None), "instance": (None, "instance"),
            "major": ("major2", None), "major0": ("major0", None), "null_dltensor": ("null_dltensor", None),
            "chained": ("chained", None), "shadowed": ("ok", "instance"), "minor": ("minor", None)}[key]
        if key not in self.classes:
            ns = {} if on_type is None else {"__dlpack_c_exchange_api__": self.capsules[on_type]}
            self.classes[key] = type("Producer" + key.title().replace("_", ""), (Producer,), ns)
        return self.classes[key], self.capsules[on_instance] if on_instance else None


_tables = None


def producer_for(rec, capsule, export=None):
    """The producer of an exchange (dlc_exchange): of the record's offer class, old or
    strict as its kw bits say, ordering its export's pending device bytes (devmem.order)."""
    global _tables
    if _tables is None:
        _tables = Tables()
    cls, instance_capsule = _tables.producer_class(rec["offer"])
    p = cls(capsule, rec["device"], old=bool(rec["kw"] & R.KW["old_producer"]),
            strict=bool(rec["kw"] & R.KW["strict_producer"]), order=pending_order(export))
    if instance_capsule is not None:  # instances answer with another table (XAPI-04)
        p.__dlpack_c_exchange_api__ = instance_capsule
    return p


_side = {}  # per consumer module: devmem.side_stream's answer


def _side_enter(rec):
    """dlc_devmem_side_enter for a record with kw side_stream in the CUDA mode: (the entered
    context, its stream), or (None, 0)."""
    if not rec["kw"] & R.KW["side_stream"] or devmem.mode() != "cuda":
        return None, 0
    consumer = os.environ.get("DLCONFORM_FUZZ_CONSUMER", "numpy")
    if consumer not in _side:
        try:
            _side[consumer] = devmem.side_stream(consumer)
        except Exception:  # the C target says so once and ignores the bit
            _side[consumer] = None
    if _side[consumer] is None:
        return None, 0
    factory, stream = _side[consumer]
    try:
        ctx = factory()
        ctx.__enter__()
    except Exception:
        return None, 0
    return ctx, stream


def pending_order(export):
    """devmem.order for a producer of export when its device bytes are pending, else None."""
    return devmem.order if export is not None and export.device is not None and export.device.pending else None


def _forget_frames(e):
    """Drops the tracebacks of e and its chain: the C target holds no frames, and a frame
    could keep the producer, and so the capsule, alive."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        e.__traceback__ = None
        e = e.__context__ or e.__cause__


class Outcome:
    """What one exchange gave: result (None on a refusal), error (the exception, or None),
    log (the producer's), and the table counts (calls, handouts, views, silent_failures,
    called)."""


def exchange(export, rec, copy, from_dlpack, breaches, say=None):
    """dlc_exchange: from_dlpack(producer[, copy=][, device=]) on a new producer of a new
    capsule of export; the producer is gone on return (unless the consumer keeps it). The
    table oracles append to breaches while the call is in flight."""
    producer = producer_for(rec, export.capsule(), export)
    kwargs = R.from_dlpack_kwargs(rec, copy)
    if say is not None:
        say("call: from_dlpack(producer%s)" % "".join(", %s=%r" % kv for kv in kwargs.items()))
        if R.offer_kind(rec) == 4:
            say("in flight: dltensor_from_py_object_no_sync is NULL, so a SIGSEGV before from_dlpack "
                "returns is XAPI-11")
    out = Outcome()
    ctx, side = _side_enter(rec)
    if say is not None and ctx is not None:
        say("inside: the consumer library's side-stream context (stream %d)" % side)
    XAPI.begin(rec["offer"], breaches)
    try:
        out.result, out.error = from_dlpack(producer, **kwargs), None
    except BaseException as e:  # the C target sees every class
        out.result, out.error = None, e
        _forget_frames(e)
    XAPI.end()
    if ctx is not None:
        ctx.__exit__(None, None, None)
    out.log = producer.log.copy()
    # dlc_exchange: the name of the capsule the producer handed out, still held by it (CAP-03)
    out.log.unrenamed = out.log.calls > 0 and _py.PyCapsule_GetName(id(producer._capsule)) in UNCONSUMED
    out.log.side = side
    out.calls, out.handouts, out.views, out.called = XAPI.calls, XAPI.handouts, XAPI.views, list(XAPI.called)
    out.silent_failures = XAPI.silent_failures
    del producer
    return out
