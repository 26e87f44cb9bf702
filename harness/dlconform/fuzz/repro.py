"""Fuzz record (format 2, fuzz/README.md) -> a self-contained Python reproducer.

`python3 -m dlconform fuzz-repro FILE [--target numpy] [--finding "CLAUSE: message"]` prints a
script that rebuilds the fuzz target's export without the fuzzer: the same DLTensor through
`dlconform._ref.Forge` over a buffer laid out as fuzz/layout.c lays it out (size, pad, fill
`(i * 131 + seed) & 0xff`, PROT_READ pages for a READ_ONLY record), the same producer
behaviour as fuzz/producer.c (one capsule, handed out on every `__dlpack__` call, an old
producer raising TypeError for new keywords), the same keywords as the consumer target,
then the consumer's `from_dlpack` and the checks for the finding's clause. A record that
offers a C exchange API table (byte 67, fuzz/xapi_offer.c) gets the same tables built with
ctypes (their functions hand out fresh versioned capsules of the same Forge: one owner per
hand-out, so the deleter count still means what it means in the target), on the type, the
instance or both, and the XAPI-04 / XAPI-06 checks on which tables the consumer called.

The memory plan uses check's own extent arithmetic through `dlconform._probe.extent`, so
the Python side never re-implements it. Invariant: decode() accepts any bytes, like
dlc_rec_decode (missing bytes read as 0, extra bytes are ignored).
"""
import struct

HEADER = 68
CAP = 1 << 20
KIND = {"versioned": 0x01, "strides_null": 0x02, "shape_null": 0x04, "deleter_null": 0x08,
        "data_null": 0x10, "dangling": 0x20, "used": 0x40}
# byte 67 (record.h DLC_OFFER_*): kind in bits 0..2, bit 3 the major-0 variant of "major"
OFFERS = ("none", "type", "instance", "major", "null_dltensor", "chained", "shadowed", "minor")
KW = {"max_version": 0x01, "copy": 0x02, "dl_device": 0x04, "stream": 0x08, "old_producer": 0x10,
      "strict_producer": 0x20}
CONSUMERS = {"numpy": ("import numpy", "numpy.from_dlpack"),
             "torch": ("import torch.utils.dlpack", "torch.utils.dlpack.from_dlpack"),
             "ref": ("from dlconform import _ref as ref_consumer", "ref_consumer.from_dlpack")}
MUST_REFUSE = {"CAP-04", "VER-08", "LAY-09", "LAY-10", "DT-10", "VER-09", "LAY-01"}
DANGLING = 0x1000  # below mmap_min_addr: never mapped, like the target's PROT_NONE pointer


def decode(data):
    """dict of the record's fields, exactly as dlc_rec_decode reads them."""
    b = bytes(data[:HEADER]).ljust(HEADER, b"\0")
    (fmt, kind, ndim, code, bits, kw, lanes, dev_type, dev_id, vmaj, vmin, flags, off, mv_maj,
     mv_min, kdev_type, kdev_id, stream, copy, stream_kind, seed, offer) = struct.unpack(
        "<BBbBBBHiiIIQQiiiiqBBBB", b)
    n = max(ndim, 0)
    tail = bytes(data[HEADER:HEADER + 16 * n]).ljust(16 * n, b"\0")
    shape = struct.unpack("<%dq" % n, tail[:8 * n]) if n else ()
    strides = struct.unpack("<%dq" % n, tail[8 * n:]) if n else ()
    return dict(format=fmt, kind=kind, ndim=ndim, dtype=(code, bits, lanes), device=(dev_type, dev_id),
                version=(vmaj, vmin), flags=flags, byte_offset=off, kw=kw, max_version=(mv_maj, mv_min),
                kw_device=(kdev_type, kdev_id), stream=stream, copy=copy % 3, stream_kind=stream_kind % 3,
                seed=seed, offer=offer, shape=tuple(shape), strides=tuple(strides))


def apply_offer(rec):
    """dlc_rec_apply_offer: an offered export is versioned (the table hands out
    DLManagedTensorVersioned only). Returns rec, changed in place."""
    if rec["offer"] & 7:
        rec["kind"] |= KIND["versioned"]
    return rec


def plan(rec):
    """The memory plan of fuzz/layout.c: dict mode ("buffer", "null", "dangling"), pad, size,
    readonly, and the extent from check (dlconform._probe.extent)."""
    from .. import _probe, _ref

    k = rec["kind"]
    meta = _ref.Forge(dtype=rec["dtype"], shape=rec["shape"], ndim=rec["ndim"], data="null",
                      strides=None if k & KIND["strides_null"] else rec["strides"],
                      shape_null=bool(k & KIND["shape_null"]), byte_offset=rec["byte_offset"],
                      versioned=False, device=rec["device"])
    ext = _probe.extent(meta.capsule())
    p = {"ext": ext, "pad": 0, "size": 0,
         "readonly": bool(k & KIND["versioned"]) and bool(rec["flags"] & 1)}
    unsized = "dangling" if k & KIND["dangling"] else "null"
    if k & KIND["data_null"]:
        p["mode"] = "null"
    elif ext["status"] != "ok":
        p["mode"] = unsized
    else:
        off = rec["byte_offset"]
        pad = max(0, -ext["lo"] - off)
        size = max(1, pad + off + ext["hi"])
        p.update(mode="buffer" if size <= CAP else unsized, pad=pad, size=size if size <= CAP else 0)
    return p


def too_big_to_copy(p):
    """As fuzz/target_consumer.c: a copy would read dangling data or allocate past the cap."""
    ext = p["ext"]
    return ext["status"] == "ok" and (p["mode"] == "dangling" or ext["numel"] * ext["itemsize"] > CAP)


def copy_passed(rec, p):
    """The copy value the consumer target passes (None/False/True), or "absent"."""
    if not rec["kw"] & KW["copy"]:
        return "absent"
    if rec["copy"] == 2 and too_big_to_copy(p):
        return "absent"
    return (None, False, True)[rec["copy"]]


def _kwargs(rec, p):
    kw = {}
    c = copy_passed(rec, p)
    if c != "absent":
        kw["copy"] = c
    giant = rec["device"][0] != 1 and too_big_to_copy(p)  # drop_giant_copies in fuzz/target_consumer.c
    if rec["kw"] & KW["dl_device"] and not giant:  # as fuzz/exchange.c: the CPU by name, other pairs as they are
        kw["device"] = "cpu" if rec["kw_device"] == (1, 0) else rec["kw_device"]
    return kw


def consumer_lines(target):
    if target in CONSUMERS:
        return CONSUMERS[target]
    return ("import importlib\nconsumer = importlib.import_module(%r)" % target, "consumer.from_dlpack")


def checks(clause, offer=0, kw=None):
    """Lines checking the finding's clause after the import (`y`, `err`, `p`, `forge`)."""
    if clause == "VER-08" and offer:  # a bare dltensor_from_py_object_no_sync view carries no version
        return ["assert y is None or (views and not owned and not p.calls), "
                "'VER-08: the consumer accepted an export it must refuse'"]
    if clause in MUST_REFUSE:
        return ["assert y is None, %r" % (clause + ": the consumer accepted an export it must refuse")]
    if clause in ("OWN-03", "CAP-03", "CAP-04"):
        return ["if y is not None:",
                "    assert forge.deleter_calls == 0, 'OWN-03: deleter ran while the result lives'",
                "del y",
                "gc.collect()",
                "want = 0 if %r else 1" % bool(clause == "CAP-04"),
                "assert forge.deleter_calls == want, 'OWN-03: deleter ran %d times' % forge.deleter_calls"]
    if clause in ("EXC", "DEV-07", "CPY-08"):
        allowed = "(BufferError,)" if clause != "EXC" else "(BufferError, TypeError, ValueError, MemoryError)"
        return ["assert err is None or isinstance(err, %s), %r %% type(err).__name__" % (
            allowed, clause + ": refused with %s")]
    if clause == "DEV-06":  # as fuzz/consumer_oracles.c: a refusal without asking for the host
        return ["assert err is None or any(c.get('dl_device') == (1, 0) for c in p.answered), "
                "\"DEV-06: from_dlpack(device='cpu') refused without asking the producer for dl_device=(1, 0)\""]
    if clause == "CPY-07" and (kw or {}).get("copy") is False:
        return ["fwd = [c['copy'] for c in p.answered if 'copy' in c]",
                "assert not fwd or fwd[0] is False, \"CPY-07: from_dlpack(device='cpu', copy=False) forwarded "
                "copy=%r\" % fwd[0]"]
    if clause == "VER-06":
        return ["assert not (y is None and p.calls and all(set(c) - {'stream'} for c in p.calls)), "
                "'VER-06: no retry without the new keywords'"]
    if clause.startswith("STR-"):
        return ["for c in p.calls:", "    print('stream passed:', c.get('stream', '<absent>'), 'dl_device:', "
                "c.get('dl_device'))", "# %s: see the rule in suites/clauses.json" % clause]
    return ["if y is not None:", "    print('result:', describe(y))",
            "    print('export: data+byte_offset = %#x, strides (elements) =' % (forge.buffer_address "
            "+ BYTE_OFFSET), STRIDES)"]


TEMPLATE = '''\
# dlconform fuzz reproducer, record format 2: {name}
# finding: {finding}
# run: PYTHONPATH=harness /usr/bin/python3 THIS_FILE   (needs dlconform._ref built: make build)
import ctypes
import gc
import mmap
import sys
import traceback

from dlconform import _ref
{consumer_import}

SIZE, PAD, SEED, READONLY, MODE = {size}, {pad}, {seed}, {readonly}, {mode!r}
BYTE_OFFSET, STRIDES = {byte_offset}, {strides!r}
if MODE == "buffer":  # fuzz/layout.c: byte i = (i * 131 + seed) & 0xff, data = buffer + pad
    page = mmap.PAGESIZE
    mem = mmap.mmap(-1, (SIZE + page - 1) // page * page)
    mem[:SIZE] = bytes((i * 131 + SEED) & 0xFF for i in range(SIZE))
    base = ctypes.addressof(ctypes.c_char.from_buffer(mem))
    if READONLY:  # FLG-02: a READ_ONLY export sits on PROT_READ pages
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        assert libc.mprotect(base, len(mem), mmap.PROT_READ) == 0
    data = base + PAD
else:
    data = {dangling} if MODE == "dangling" else "null"
forge = _ref.Forge({forge_args}, data=data)
{offer_block}

class Producer:  # fuzz/producer.c: one capsule, handed out on every call; logs the keywords
    def __init__(self, device, old, strict=False):
        self.device, self.old, self.strict, self.calls, self.cap = device, old, strict, [], None
        self.answered = []  # the calls past the old-producer refusal (the target's log)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, *args, **kw):
        self.calls.append(dict(kw))
        if args:
            raise TypeError("__dlpack__ takes keyword arguments only")
        if self.old and set(kw) - {{"stream"}}:  # VER-06: an old producer
            raise TypeError("__dlpack__() got an unexpected keyword argument %r" % sorted(set(kw) - {{"stream"}})[0])
        self.answered.append(dict(kw))
        if self.strict and kw.get("dl_device") not in (None, self.device):  # DEV-05
            raise BufferError("cannot export to the requested dl_device")
        if self.cap is None:
            self.cap = forge.capsule()
        return self.cap


def describe(y):
    if hasattr(y, "__array_interface__"):
        return {{"ptr": hex(y.__array_interface__["data"][0]), "byte_strides": y.strides, "shape": y.shape,
                "writeable": y.flags.writeable}}
    if hasattr(y, "data_ptr") and callable(y.data_ptr):
        return {{"ptr": hex(y.data_ptr()), "strides": y.stride(), "shape": tuple(y.shape)}}
    return {{k: getattr(y, k, None) for k in ("data_ptr", "byte_offset", "strides", "shape", "readonly")}}


{offer_producer}p = {producer_class}({device!r}, old={old}, strict={strict})
{instance_offer}y = err = None
try:
    y = {from_dlpack}(p{kwargs})
    print("accepted:", type(y).__name__)
except Exception as e:
    err = e
    print("refused:", type(e).__name__, e)
print("__dlpack__ calls:", p.calls)
{offer_checks}{checks}
print("done: the finding did not show; the crash or assertion above is the finding otherwise")
'''


OFFER_BLOCK = '''
# fuzz/xapi_offer.c: the exchange API tables of offer {offer_name!r} (record byte 67 = {offer:#04x})
C = ctypes
api = C.pythonapi
api.PyCapsule_GetPointer.restype = C.c_void_p
api.PyCapsule_GetPointer.argtypes = (C.py_object, C.c_char_p)
api.PyCapsule_SetName.argtypes = (C.py_object, C.c_char_p)
api.PyCapsule_New.restype = C.py_object
api.PyCapsule_New.argtypes = (C.c_void_p, C.c_char_p, C.c_void_p)
API_NAME, NAME, USED = b"dlpack_exchange_api", b"dltensor_versioned", b"used_dltensor_versioned"
USED_RECORD = {used_record}  # a used_* record: nothing to hand out (the target: BufferError)


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


calls = {{"ok": [], "instance": [], "foreign": []}}  # which tables the consumer called
held = []  # tables and their callbacks, alive until the end
owned = []  # capsules handed out (renamed used_*: the consumer owns their tensors)
views = []  # capsules behind dltensor_from_py_object_no_sync views (kept alive here)


def make_table(role, major, minor, null_dltensor=False, prev=None):
    def from_py(obj, out):  # a fresh export of the same memory, owned by the caller
        calls[role].append("managed_tensor_from_py_object_no_sync")
        if USED_RECORD:
            return -1
        cap = forge.capsule()
        out[0] = api.PyCapsule_GetPointer(cap, NAME)
        api.PyCapsule_SetName(cap, USED)
        owned.append(cap)
        return 0

    def dltensor(obj, out):  # DLManagedTensorVersioned.dl_tensor: 48 bytes at offset 32
        calls[role].append("dltensor_from_py_object_no_sync")
        if USED_RECORD:
            return -1
        cap = forge.capsule()
        views.append(cap)
        C.memmove(out, api.PyCapsule_GetPointer(cap, NAME) + 32, 48)
        return 0

    def stream(device_type, device_id, out):
        calls[role].append("current_work_stream")
        out[0] = None
        return 0

    def unsupported(*args):  # allocator, to_py: the target's work; not reproduced here
        calls[role].append("allocator or to_py")
        return -1

    fns = [ALLOC(unsupported), FROM(from_py), TO(unsupported), DLT() if null_dltensor else DLT(dltensor),
           STREAM(stream)]
    t = Table(Header(major, minor, C.addressof(prev) if prev is not None else None), *fns)
    held.append((t, fns))
    return t


def capsule_of(table):
    return api.PyCapsule_New(C.addressof(table), API_NAME, None)


OK = make_table("ok", 1, 3)
TYPE_TABLE, INSTANCE_TABLE = {{  # (on the type, on the instance only)
    "type": lambda: (OK, None),
    "instance": lambda: (None, make_table("instance", 1, 3)),
    "major": lambda: (make_table("foreign", {foreign_major}, 0), None),
    "null_dltensor": lambda: (make_table("ok", 1, 3, null_dltensor=True), None),
    "chained": lambda: (make_table("foreign", 2, 0, prev=OK), None),
    "shadowed": lambda: (OK, make_table("instance", 1, 3)),
    "minor": lambda: (make_table("ok", 1, 99), None),
}}[{offer_name!r}]()
if {offer_name!r} == "null_dltensor":  # XAPI-11: a consumer that calls the NULL pointer dies here
    import faulthandler
    faulthandler.enable()
    print("dltensor_from_py_object_no_sync is NULL: a SIGSEGV in from_dlpack is XAPI-11")
'''

OFFER_PRODUCER = '''

class OfferingProducer(Producer):  # the target's producer type for this offer
    pass


if TYPE_TABLE is not None:
    OfferingProducer.__dlpack_c_exchange_api__ = capsule_of(TYPE_TABLE)
'''

OFFER_CHECKS = '''print("exchange API calls:", calls)


def address(y):
    if hasattr(y, "__array_interface__"):
        return y.__array_interface__["data"][0]
    d = getattr(y, "data_ptr", None)
    d = d() if callable(d) else d
    return d + (getattr(y, "byte_offset", 0) or 0) if isinstance(d, int) else None


if y is not None and views and not owned and not p.calls and MODE == "buffer":
    a = address(y)
    assert a is None or not base <= a < base + SIZE, "XAPI-15: the result views a dltensor_from_py_object_no_sync " \\
        "view past the call"
assert not calls["instance"], "XAPI-04: the consumer used the table an instance offers: %r" % calls["instance"]
assert not calls["foreign"], "XAPI-06: the consumer used a table of a foreign header major: %r" % calls["foreign"]
'''


def offer_parts(rec):
    """(offer_block, producer class, instance line, offer checks) for the template."""
    kind = rec["offer"] & 7
    if not kind:
        return "", "Producer", "", ""
    name = OFFERS[kind]
    block = OFFER_BLOCK.format(offer_name=name, offer=rec["offer"], used_record=bool(rec["kind"] & KIND["used"]),
                               foreign_major=0 if rec["offer"] & 8 else 2)
    inst = ("if INSTANCE_TABLE is not None:  # on the instance only (XAPI-04)\n"
            "    p.__dlpack_c_exchange_api__ = capsule_of(INSTANCE_TABLE)\n")
    return block, "OfferingProducer", inst, OFFER_CHECKS


def reproducer(data, target="numpy", finding="", name="input"):
    """The reproducer script (str) for one fuzz input."""
    rec = apply_offer(decode(data))
    p = plan(rec)
    k = rec["kind"]
    versioned = bool(k & KIND["versioned"])
    forge_args = ["dtype=%r" % (rec["dtype"],), "shape=%r" % (rec["shape"],), "ndim=%d" % rec["ndim"],
                  "strides=%r" % (None if k & KIND["strides_null"] else rec["strides"],),
                  "byte_offset=%d" % rec["byte_offset"], "versioned=%r" % versioned,
                  "version=%r" % (rec["version"],), "flags=%d" % rec["flags"], "device=%r" % (rec["device"],)]
    if k & KIND["shape_null"]:
        forge_args.append("shape_null=True")
    if k & KIND["deleter_null"]:
        forge_args.append("null_deleter=True")
    if k & KIND["used"]:
        forge_args.append("capsule_name=%r" % ("used_dltensor_versioned" if versioned else "used_dltensor"))
    kw = _kwargs(rec, p)
    clause = finding.split(":", 1)[0].strip() if finding else ""
    imp, call = consumer_lines(target)
    block, cls, inst, offer_checks = offer_parts(rec)
    return TEMPLATE.format(
        offer_block=block, offer_producer=OFFER_PRODUCER if block else "", producer_class=cls,
        instance_offer=inst, offer_checks=offer_checks,
        name=name, finding=finding or "(none recorded)", consumer_import=imp, size=p["size"], pad=p["pad"],
        seed=rec["seed"], readonly=p["readonly"], mode=p["mode"], byte_offset=rec["byte_offset"],
        strides=None if k & KIND["strides_null"] else rec["strides"], dangling=hex(DANGLING),
        forge_args=",\n                   ".join(forge_args), device=rec["device"],
        old=bool(rec["kw"] & KW["old_producer"]), strict=bool(rec["kw"] & KW["strict_producer"]), from_dlpack=call,
        kwargs="".join(", %s=%r" % (k2, v) for k2, v in kw.items()),
        checks="\n".join(checks(clause, rec["offer"] & 7, kw)))


def main(argv):
    import argparse

    ap = argparse.ArgumentParser(prog="dlconform fuzz-repro",
                                 description="print a Python reproducer for a fuzz input (record format 2)")
    ap.add_argument("file")
    ap.add_argument("--target", default=None, help="consumer (default: the file name's prefix, else numpy)")
    ap.add_argument("--finding", default="", help='"CLAUSE: message" to check for')
    args = ap.parse_args(argv)
    import os

    base = os.path.basename(args.file)
    if args.target and args.target.startswith("producer-") or (not args.target and base.startswith("producer-")):
        name = (args.target or base).split("-")[1]
        print(producer_reproducer(open(args.file, "rb").read(), name, args.finding, base), end="")
        return 0
    target = args.target or base.split("-", 1)[0]
    if target in ("crash", "leak", "timeout", "oom", "validator", ""):
        target = "numpy"
    with open(args.file, "rb") as f:
        data = f.read()
    print(reproducer(data, target, args.finding, os.path.basename(args.file)), end="")
    return 0


PRODUCER_TEMPLATE = '''\
# dlconform fuzz reproducer (producer target), record format 2: {name}
# finding: {finding}
# run: PYTHONPATH=harness /usr/bin/python3 THIS_FILE
from dlconform import _probe
from dlconform.fuzz import producer_views

# fuzz/target_producer.c's view parameters for this record
made = producer_views.build({producer!r}, {dtype_index}, {shape!r}, {strides!r}, {offset}, {readonly}, {seed})
assert made is not None, "the producer cannot express this view (the target skips it)"
x, expected, itemsize, base, nbytes = made
print("view:", type(x).__name__, getattr(x, "shape", None))
try:
    cap = x.__dlpack__({kwargs})
except Exception as e:  # a defined non-CPU dl_device the producer cannot handle: BufferError
    dev05 = "DEV-05: dl_device=%r refused with %s, not BufferError" % ({dl_device!r}, type(e).__name__)
    assert not {foreign} or isinstance(e, (BufferError, TypeError)), dev05
    # the classes fuzz/target_producer.c allows (a refused stream: any but SystemError)
    if isinstance(e, (BufferError, TypeError, ValueError, MemoryError)) or ({odd_stream} and not isinstance(e, SystemError)):
        print("refused with %s: %s; no finding" % (type(e).__name__, e))
        raise SystemExit(0)
    raise
assert {stream!r} is None, "STR-10/STR-02: a CPU tensor was exported with stream=%r" % ({stream!r},)
assert {dl_device!r} in (None, (1, 0)), "DEV-05: exported for dl_device=%r" % ({dl_device!r},)
info = _probe.inspect(cap)
print("capsule:", info["name"], "flags", info.get("flags"), "shape", info.get("shape"), "strides", info.get("strides"),
      "byte_offset", info.get("byte_offset"))
if info["name"] == "dltensor_versioned":  # READ_ONLY 1, IS_COPIED 2 (a copy may drop READ_ONLY)
    assert not {copy_true} or info["flags"] & 2, "FLG-04: copy=True exported without IS_COPIED"
    assert not {readonly} or info["flags"] & 3, "FLG-02: a read-only view exported without READ_ONLY"
print("check:", _probe.check(cap))
got = _probe.read_elements(cap)
assert got == expected, "SEM-01: the values read through the export differ from the view's"
print("done: the finding did not show; the exception or assertion above is the finding otherwise")
'''

DTYPE_KEYS = ((6, 8), (0, 8), (0, 16), (0, 32), (0, 64), (1, 8), (1, 16), (1, 32), (1, 64), (2, 32), (2, 64),
              (5, 64), (5, 128))


def producer_reproducer(data, producer="numpy", finding="", name="input"):
    """Reproducer for an input of the producer target (fuzz/target_producer.c's mapping)."""
    rec = decode(data)
    code, bits, _lanes = rec["dtype"]
    idx = DTYPE_KEYS.index((code, bits)) if (code, bits) in DTYPE_KEYS else (code + bits) % 13
    nd = (rec["ndim"] & 0xFF) % 5
    shape = tuple((rec["shape"][i] if i < len(rec["shape"]) else 0) % (1 << 64) % 5 for i in range(nd))
    strides = tuple(_c_mod(rec["strides"][i] if i < len(rec["strides"]) else 0, 9) for i in range(nd))
    kw = {}
    if rec["kw"] & KW["max_version"]:
        kw["max_version"] = rec["max_version"]
    if rec["kw"] & KW["copy"]:
        kw["copy"] = (None, False, True)[rec["copy"]]
    if rec["kw"] & KW["dl_device"]:
        kw["dl_device"] = rec["kw_device"]
    if rec["kw"] & KW["stream"]:
        kw["stream"] = (None, rec["stream"], "stream")[rec["stream_kind"]]
    return PRODUCER_TEMPLATE.format(
        name=name, finding=finding or "(none recorded)", producer=producer, dtype_index=idx, shape=shape,
        strides=strides, offset=rec["byte_offset"] % 64, readonly=rec["flags"] & 1, seed=rec["seed"],
        kwargs=", ".join("%s=%r" % kv for kv in kw.items()), stream=kw.get("stream"), dl_device=kw.get("dl_device"),
        copy_true=kw.get("copy") is True, foreign=_foreign_device(kw),
        odd_stream=kw.get("stream") is not None)


# DLDeviceType values of DLPack 1.3 other than kDLCPU (probes/check_validate.c)
NON_CPU_DEVICES = {2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18}


def _foreign_device(kw):
    """Whether the producer target judges a refusal's class as DEV-05 (its foreign_device):
    a defined non-CPU dl_device with an id >= 0, and no stream other than None asked."""
    dev = kw.get("dl_device")
    return dev is not None and dev[0] in NON_CPU_DEVICES and dev[1] >= 0 and kw.get("stream") is None


def _c_mod(a, m):
    """C's a % m for int64 a (the sign follows a)."""
    r = abs(a) % m
    return -r if a < 0 else r
