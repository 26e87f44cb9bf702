"""Reading DLPack capsules, and consuming them as a consumer would, in ctypes.

- `inspect(capsule)`: the capsule's name, kind and fields, without consuming it;
- `extent(capsule)` and `layout_extent(...)`: the overflow-safe layout arithmetic of
  probes/check_extent.c (status, zero_size, numel, itemsize, lo, hi, row_major);
- `read_elements(capsule)`, `gather(address, shape, strides, itemsize)`, `elements(d)`: the
  logical row-major element bytes of a strided tensor, read after its extent was validated;
- `consume(capsule)`: a `Handle` that owns the tensor (the capsule renamed used_*);
- `instrument(capsule)`: a `Tracker` that counts the deleter calls of the capsule's struct;
- `rename(capsule, name)`.

Each gives what the C probe (dlconform._probe) gives for the same capsule: test_kit.py holds
the two to the same answers. Invariants the C probe keeps and this file keeps too:
- shape and strides are read only when 0 <= ndim <= MAX_NDIM (LAY-09);
- a used_* or unknown capsule is never dereferenced (CAP-04);
- a versioned struct of another major is read up to `flags` only (VER-08, VER-10);
- a deleter is called at most once per hand-out: a Tracker counts the calls beyond that
  without forwarding them (OWN-03), so a consumer that calls twice is seen, not crashed on.
"""
import ctypes
import threading

from . import abi
from .check import Unsupported

#: the largest ndim whose shape and strides are read (probes/probe/probe.h)
MAX_NDIM = 1024
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
#: the extent statuses of probes/check.h, in the order of their codes
EXTENT_STATUSES = ("ok", "bad_ndim", "null_shape", "neg_shape", "overflow", "bad_itemsize")
#: device types whose memory the host can read (probes/probe/read.c)
HOST_READABLE = (abi.DLDeviceType.kDLCPU, abi.DLDeviceType.kDLCUDAHost, abi.DLDeviceType.kDLROCMHost,
                 abi.DLDeviceType.kDLCUDAManaged)
#: device types whose memory is read through a CUDA runtime where kit.cuda finds one
RUNTIME_READ = (abi.DLDeviceType.kDLCUDA, abi.DLDeviceType.kDLCUDAManaged)
_KINDS = {abi.LEGACY: "legacy", abi.VERSIONED: "versioned", abi.USED_LEGACY: "used", abi.USED_VERSIONED: "used"}
_destructor_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(("PyCapsule_GetDestructor", ctypes.pythonapi))


def _read(capsule):
    """(name, kind, pointer, destructor address) of a capsule (probe_capsule_read)."""
    if not abi.is_capsule(capsule):
        raise TypeError("expected a PyCapsule, got %s" % type(capsule).__name__)
    name = abi.capsule_name(capsule)
    raw = abi.capsule_name_pointer(capsule)
    pointer = abi.capsule_pointer(capsule, None if not raw else ctypes.string_at(raw))
    return name, _KINDS.get(name, "unknown"), pointer or 0, _destructor_of(capsule) or 0


def _struct(pointer, kind):
    return (abi.DLManagedTensorVersioned if kind == "versioned" else abi.DLManagedTensor).from_address(pointer)


def tensor_fields(t):
    """data, device, ndim, dtype, shape, strides, byte_offset of a DLTensor (shape and strides
    None when NULL or ndim is outside [0, MAX_NDIM])."""
    readable = 0 <= t.ndim <= MAX_NDIM
    return {"data": t.data or 0, "device": (t.device.device_type, t.device.device_id), "ndim": t.ndim,
            "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
            "shape": abi.int64s(t.shape, t.ndim) if readable else None,
            "strides": abi.int64s(t.strides, t.ndim) if readable else None, "byte_offset": t.byte_offset}


def managed_fields(m, kind):
    """version, flags, manager_ctx, deleter, readable and the tensor's fields of a managed struct;
    a versioned struct of another major stops at `readable` (VER-08)."""
    out = {"version": None, "flags": None}
    if kind == "versioned":
        out.update(version=(m.version.major, m.version.minor), flags=m.flags)
    out.update(manager_ctx=m.manager_ctx or 0, deleter=abi.address(m.deleter),
               readable=kind == "legacy" or m.version.major == abi.DLPACK_VERSION[0])
    if out["readable"]:
        out.update(tensor_fields(m.dl_tensor))
    return out


def inspect(capsule):
    """The capsule's name, pointer, kind (legacy, versioned, used, unknown), destructor and, for a
    legacy or versioned one, its struct's fields (managed_fields), without consuming it."""
    name, kind, pointer, destructor = _read(capsule)
    out = {"name": name, "pointer": pointer, "kind": kind, "destructor": destructor}
    if kind in ("legacy", "versioned"):
        out.update(managed_fields(_struct(pointer, kind), kind))
    return out


def _tensor_of(capsule):
    name, kind, pointer, _ = _read(capsule)
    if kind not in ("legacy", "versioned"):
        raise ValueError("capsule named %s is %s: it is not dereferenced (CAP-04)" % (
            "NULL" if name is None else "'%s'" % name,
            "already consumed" if kind == "used" else "not a DLPack capsule"))
    return _readable_tensor(_struct(pointer, kind), kind)


def _readable_tensor(m, kind):
    if kind == "versioned" and m.version.major != abi.DLPACK_VERSION[0]:
        raise ValueError("versioned tensor has major version %d, this probe reads %d: the tensor fields must not be "
                         "read (VER-08)" % (m.version.major, abi.DLPACK_VERSION[0]))
    return m.dl_tensor


# ---------------------------------------------------------------------------- layout arithmetic
def _fits(v):
    return _INT64_MIN <= v <= _INT64_MAX


def layout_extent(ndim, shape, strides, dtype):
    """dlc_extent_of (probes/check_extent.c) of a layout: shape and strides are sequences or
    None, dtype is (code, bits, lanes). lo and hi are byte offsets from data + byte_offset, hi
    exclusive; on a failing status every field but status and itemsize is 0."""
    item = abi.itemsize(dtype)
    out = {"status": "ok", "zero_size": False, "numel": 0, "itemsize": item, "lo": 0, "hi": 0, "row_major": False}
    if ndim < 0 or ndim > MAX_NDIM:
        return dict(out, status="bad_ndim")
    if ndim > 0 and shape is None:
        return dict(out, status="null_shape")
    shape = tuple(shape or ())[:ndim]
    if any(n < 0 for n in shape):
        return dict(out, status="neg_shape")
    if item == 0:
        return dict(out, status="bad_itemsize")
    if 0 in shape:
        return dict(out, zero_size=True, row_major=strides is None or _row_major(shape, strides))
    numel = 1
    for n in shape:
        numel *= n
        if not _fits(numel):
            return dict(out, status="overflow")
    neg = pos = 0
    rm = 1
    for i in reversed(range(ndim)):
        off = (shape[i] - 1) * (strides[i] if strides is not None else rm)
        if not _fits(off):
            return dict(out, status="overflow")
        if off < 0:
            neg += off
        else:
            pos += off
        if not (_fits(neg) and _fits(pos)):
            return dict(out, status="overflow")
        rm *= shape[i]
    lo, hi = neg * item, pos * item
    if not (_fits(lo) and _fits(hi) and _fits(hi + item) and _fits(hi + item - lo)):
        return dict(out, status="overflow")
    return dict(out, numel=numel, lo=lo, hi=hi + item, row_major=strides is None or _row_major(shape, strides))


def _row_major(shape, strides):
    """dlc_is_row_major: strides equal the compact row-major ones at every dim of extent != 1."""
    s, overflowed = 1, False
    for i in reversed(range(len(shape))):
        if shape[i] != 1 and (overflowed or strides[i] != s):
            return False
        s *= max(shape[i], 1)
        overflowed = overflowed or not _fits(s)
    return True


def extent_of(t):
    return layout_extent(t.ndim, abi.int64s(t.shape, t.ndim) if 0 <= t.ndim <= MAX_NDIM else None,
                         abi.int64s(t.strides, t.ndim) if 0 <= t.ndim <= MAX_NDIM else None,
                         (t.dtype.code, t.dtype.bits, t.dtype.lanes))


def extent(capsule):
    """layout_extent() of the capsule's tensor."""
    return extent_of(_tensor_of(capsule))


# ---------------------------------------------------------------------------- elements
def _cuda_runtime(device_type):
    """The CUDA runtime that reads memory of this device type, or None (no runtime, or a device
    type it does not read). kit.cuda is imported here, so that importing the kit loads nothing."""
    if device_type not in RUNTIME_READ:
        return None
    from . import cuda

    return cuda.runtime()


def read_tensor(t):
    """The logical row-major element bytes of a DLTensor (probe_read_tensor). kDLCUDA and
    kDLCUDAManaged memory is read through the CUDA runtime when kit.cuda finds one (a synchronous
    copy of the extent to the host, then the same gather); without one, CUDA memory is not read
    and managed memory is read from the host, as the C probe does."""
    e = extent_of(t)
    if e["status"] != "ok":
        raise ValueError("cannot read elements: extent status %s (LAY-09)" % e["status"])
    if e["zero_size"] or e["numel"] == 0:
        return b""
    runtime = _cuda_runtime(t.device.device_type)
    if runtime is None and t.device.device_type not in HOST_READABLE:
        raise ValueError("cannot read elements on device type %d from the host" % t.device.device_type)
    if not t.data:
        raise ValueError("data is NULL for a non-empty tensor")
    base = t.data + t.byte_offset
    if base >= 1 << 64 or base + e["lo"] < 0 or base + e["hi"] > 1 << 64:
        raise ValueError("data + byte_offset + extent wraps the address space")
    shape = abi.int64s(t.shape, t.ndim) or ()
    strides = abi.int64s(t.strides, t.ndim)
    strides = abi.row_major(shape) if strides is None else strides
    if runtime is None:
        return gather_at(base, shape, strides, e["itemsize"])
    copy = _copy_extent(runtime, t.device.device_type, base + e["lo"], e["hi"] - e["lo"])
    return gather_at(ctypes.addressof(copy) - e["lo"], shape, strides, e["itemsize"])


def _copy_extent(runtime, device_type, address, nbytes):
    """The nbytes at `address` as a host buffer, copied by the runtime: device to host for
    kDLCUDA (a host address claimed as CUDA memory is the runtime's error), by the runtime's
    own reading of the address for managed memory. A runtime error is a ValueError, as every
    other unreadable tensor is."""
    from . import cuda

    kind = cuda.DEVICE_TO_HOST if device_type == abi.DLDeviceType.kDLCUDA else cuda.DEFAULT
    try:
        return runtime.copy_out(address, nbytes, kind)
    except cuda.CudaError as err:
        raise ValueError("cannot read elements on device type %d through the CUDA runtime: %s"
                         % (device_type, err)) from None


def gather_at(base, shape, strides, item):
    """The elements at `base` (data + byte_offset) of a validated layout, strides in elements."""
    if not shape:
        return ctypes.string_at(base, item)
    out = bytearray()
    index = [0] * len(shape)
    while True:
        out += ctypes.string_at(base + sum(i * s for i, s in zip(index, strides)) * item, item)
        d = len(shape) - 1
        while d >= 0 and index[d] + 1 >= shape[d]:
            index[d] = 0
            d -= 1
        if d < 0:
            return bytes(out)
        index[d] += 1


def read_elements(capsule):
    """The capsule's elements as logical row-major bytes (ValueError for an invalid layout,
    NULL data of a non-empty tensor, device memory, a used capsule or another major)."""
    return read_tensor(_tensor_of(capsule))


def read_storage(capsule, nbytes):
    """The `nbytes` of storage at the capsule's data + byte_offset, as they lie (the packed
    sub-byte elements DT-09 reads bit by bit): through the CUDA runtime for CUDA memory, from
    the host where the host reads the device's memory, else ValueError, as read_elements."""
    t = _tensor_of(capsule)
    if nbytes <= 0:
        return b""
    if not t.data:
        raise ValueError("data is NULL for a non-empty tensor")
    base = t.data + t.byte_offset
    if base + nbytes > 1 << 64:
        raise ValueError("data + byte_offset + %d bytes wraps the address space" % nbytes)
    runtime = _cuda_runtime(t.device.device_type)
    if runtime is not None:
        return bytes(_copy_extent(runtime, t.device.device_type, base, nbytes))
    if t.device.device_type not in HOST_READABLE:
        raise ValueError("cannot read storage on device type %d from the host" % t.device.device_type)
    return ctypes.string_at(base, nbytes)


def gather(address, shape, strides, itemsize):
    """The elements of a strided CPU tensor at `address` (strides in elements, None for row-major)."""
    if not isinstance(address, int):
        raise TypeError("address must be an int")
    if not 0 <= address < 1 << 64:
        raise ValueError("address out of range")
    if not 1 <= itemsize <= 0xFFFF:
        raise ValueError("itemsize must be in [1, 65535]")
    shape = tuple(int(n) for n in shape)
    if strides is not None and len(strides) != len(shape):
        raise ValueError("strides and shape differ in length")
    t = abi.DLTensor(data=address, ndim=len(shape), device=abi.DLDevice(1, 0), dtype=abi.DLDataType(1, 8, itemsize))
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    steps = None if strides is None else (ctypes.c_int64 * max(len(shape), 1))(*[int(s) for s in strides])
    t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
    t.strides = None if steps is None else ctypes.cast(steps, ctypes.POINTER(ctypes.c_int64))
    return read_tensor(t)


def elements(d):
    """The elements of a result described by `d` (a target's describe(): ptr, shape, strides in
    elements, itemsize, and where known its `device`), read from host memory. A result on a
    device the host cannot read is Unsupported, never read: on a GPU that read would be a
    segfault of dlconform's, recorded as the library's crash."""
    device = d.get("device")
    if device is not None and int(device[0]) not in HOST_READABLE:
        raise Unsupported("the result lives on device %r, which the host cannot read: its elements are not read "
                          "here" % (tuple(device),))
    if any(int(n) == 0 for n in d["shape"]):
        return b""
    return gather(int(d["ptr"]), d["shape"], d["strides"], int(d["itemsize"]))


# ---------------------------------------------------------------------------- names
#: the four names a capsule may be given; they live as long as the process (a capsule keeps
#: the pointer)
_STATIC_NAMES = {n: ctypes.c_char_p(n.encode()) for n in (abi.LEGACY, abi.VERSIONED) + abi.USED_NAMES}


def rename(capsule, name):
    """Sets the capsule's name to one of the four static DLPack names."""
    key = name.decode() if isinstance(name, bytes) else name
    if key not in _STATIC_NAMES:
        raise ValueError("not a DLPack capsule name: %r" % (name,))
    if abi.capsule_set_name(capsule, _STATIC_NAMES[key]) != 0:
        raise ValueError("PyCapsule_SetName failed")


# ---------------------------------------------------------------------------- deleters
#: calls a deleter with the GIL held, as the C probe does from Python
_call_deleter = ctypes.PYFUNCTYPE(None, ctypes.c_void_p)


def call_deleter(pointer, address, _prototype=_call_deleter):
    """Calls the deleter at `pointer` on the struct at `address`."""
    _prototype(pointer)(address)


class _Slot:
    """What the trampoline knows of one instrumented struct (probes/probe/tracker.c)."""

    def __init__(self, original):
        self.original, self.armed, self.calls, self.forwarded, self.log = original, 1, 0, 0, []


#: (struct address, versioned) -> _Slot of the live instrumented structs
_SLOTS = {}
_SLOTS_LOCK = threading.Lock()


def _trampoline(address, versioned, _slots=_SLOTS, _lock=_SLOTS_LOCK, _ident=threading.get_ident,
                _call=call_deleter):
    """The instrumented deleter: counts the call and forwards it to the original deleter unless
    every hand-out was already given back (a second call of one hand-out is OWN-03's breach:
    counted, not forwarded)."""
    with _lock:
        slot = _slots.get((address, versioned))
        if slot is None:
            return  # not ours any more: the original is unknown, so the struct leaks
        slot.calls += 1
        slot.log.append({"thread_id": _ident(), "gil_held": None, "py_initialized": True})
        forward = slot.forwarded < slot.armed
        if forward:
            slot.forwarded += 1
        original = slot.original
    if forward and original:
        _call(original, address)


#: the two trampolines, kept for the life of the process (a struct may call one at exit)
_TRAMPOLINES = (abi.keep_forever(abi.Deleter(lambda a, _t=_trampoline: _t(a, False))),
                abi.keep_forever(abi.Deleter(lambda a, _t=_trampoline: _t(a, True))))


class Tracker:
    """instrument(): the struct's deleter swapped for a counting trampoline. `calls` (every
    call), `forwarded` (passed to the original deleter: at most `armed`, one per instrument()
    of the struct), `original_null`, `kind`, `pointer`, `log` (per call: thread_id;
    gil_held is None, the kit cannot tell)."""

    def __init__(self, capsule):
        name, kind, pointer, _ = _read(capsule)
        if kind not in ("legacy", "versioned"):
            raise ValueError("cannot instrument a capsule named %s (%s, CAP-04)" % (name or "NULL", kind))
        versioned = kind == "versioned"
        m = _struct(pointer, kind)
        trampoline = _TRAMPOLINES[versioned]
        key = (pointer, versioned)
        with _SLOTS_LOCK:
            slot = _SLOTS.get(key)
            ours = abi.address(m.deleter) == abi.address(trampoline)
            if slot is not None and ours:
                slot.armed += 1  # the same live struct handed out again (a cached export)
            elif ours:
                raise RuntimeError("struct carries an untracked trampoline")
            else:
                slot = _SLOTS[key] = _Slot(abi.address(m.deleter))
                m.deleter = trampoline
        self.kind, self.pointer, self._slot = kind, pointer, slot
        self.original_null = not slot.original

    calls = property(lambda self: self._slot.calls)
    forwarded = property(lambda self: self._slot.forwarded)
    armed = property(lambda self: self._slot.armed)
    log = property(lambda self: list(self._slot.log[:16]))


instrument = Tracker


class Handle:
    """consume(): the capsule renamed used_*, its tensor owned here. release() calls the
    deleter once (a NULL one is skipped, OWN-01; True when one ran), reading it from the struct
    at release time; dropping the Handle releases."""

    def __init__(self, capsule=None, *, versioned_at=None):
        if capsule is None:  # a tensor an exchange table handed out: versioned, no capsule
            self.kind, self.pointer, self.name, self.destructor = "versioned", versioned_at, None, 0
        else:
            self.name, self.kind, self.pointer, self.destructor = _read(capsule)
            if self.kind not in ("legacy", "versioned"):
                raise ValueError("cannot consume a capsule named %s (%s, CAP-04)" % (self.name or "NULL", self.kind))
        self._m = _struct(self.pointer, self.kind)
        self.released = self.stolen = self.deleter_called = False
        if capsule is not None:
            rename(capsule, "used_" + self.name)

    def _live(self):
        if self.released:
            raise ValueError("the tensor was stolen (XAPI-17)" if self.stolen else "the handle was released")
        return self._m

    def inspect(self):
        m = self._live()
        return dict({"name": self.name, "pointer": self.pointer, "kind": self.kind, "destructor": self.destructor},
                    **managed_fields(m, self.kind))

    def read_elements(self):
        return read_tensor(_readable_tensor(self._live(), self.kind))

    def extent(self):
        return extent_of(_readable_tensor(self._live(), self.kind))

    def steal(self):
        """Ownership goes to a callee without a deleter call (XAPI-17)."""
        self.released = self.stolen = True

    def release(self, _address=abi.address, _call=call_deleter):
        # bound as defaults: a Handle alive at interpreter exit releases after globals are cleared
        if self.released:
            return False
        self.released = True
        deleter = _address(self._m.deleter)
        if not deleter:
            return False
        _call(deleter, self.pointer)
        self.deleter_called = True
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()
        return False

    def __del__(self):
        self.release()


consume = Handle
