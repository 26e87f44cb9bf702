"""tinyarr: a tiny array library a maintainer might write, pure Python with ctypes: 1-D and 2-D
float32 and int32 arrays over a ctypes buffer, with a DLPack producer and consumer of its own.
It has no 0-d arrays and no other dtype, and refuses to import them (BufferError), as DT-12's
reading and LAY-11 let it: dlconform must not read those refusals as breaches of the clauses
whose cases happen to use such tensors (harness/tests/test_new_user_libs.py).

Planted bugs (TINYARR_BUG, read at call time):
  readonly_noflag   a versioned export of a read-only array without READ_ONLY (FLG-02)
  byte_strides      exported strides count bytes (LAY-05)
  double_delete     the consumer calls the producer's deleter twice (OWN-03)
  none_versioned    __dlpack__(max_version=None) returns a versioned capsule (VER-02)
  valueerror_device ValueError instead of BufferError for a device it cannot import (DEV-07)
  ignore_offset     the consumer ignores byte_offset (LAY-03)
"""
import ctypes
import math
import os
import struct
import threading

__version__ = "0.1.0"


def _bug(name):
    return os.environ.get("TINYARR_BUG", "") == name


# ----------------------------------------------------------------------------- DLPack ABI
# dlpack.h's structs, as the test libraries declare them once (harness/tests/libs/dlpack_structs.py)
from dlpack_structs import DELETER as _DELETER, DLManagedTensor, DLManagedTensorVersioned  # noqa: E402

DLPACK_VERSION = (1, 3)
FLAG_READ_ONLY = 1
FLAG_IS_COPIED = 2
kDLCPU = 1

_DTYPES = {"float32": (2, 32, 1, "f"), "int32": (0, 32, 1, "i")}
_BY_CODE = {(c, b, l): name for name, (c, b, l, _) in _DTYPES.items()}

# capsule names: module-level bytes objects, never freed (static storage, CAP-09)
_N_LEGACY = ctypes.c_char_p(b"dltensor")
_N_VERSIONED = ctypes.c_char_p(b"dltensor_versioned")
_N_USED_LEGACY = ctypes.c_char_p(b"used_dltensor")
_N_USED_VERSIONED = ctypes.c_char_p(b"used_dltensor_versioned")

_api = ctypes.pythonapi
_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _DESTRUCTOR)(
    ("PyCapsule_New", _api))
_capsule_is_valid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", _api))
_capsule_get_pointer_raw = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_get_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
_capsule_get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))

# ----------------------------------------------------------------------------- exports' lifetime
_live = {}  # address of the managed struct -> what it keeps alive
_live_lock = threading.Lock()


def _deleter_impl(addr):
    with _live_lock:
        _live.pop(addr, None)


_deleter = _DELETER(_deleter_impl)


def _destructor_impl(cap):
    # the capsule is being destroyed: free the tensor only if nobody consumed it (CAP-05/06)
    for name, kind in ((_N_LEGACY, DLManagedTensor), (_N_VERSIONED, DLManagedTensorVersioned)):
        if _capsule_is_valid(cap, name):
            ptr = _capsule_get_pointer_raw(cap, name)
            if ptr:
                m = kind.from_address(ptr)
                if m.deleter:
                    m.deleter(ptr)
            return


_destructor = _DESTRUCTOR(_destructor_impl)


# ----------------------------------------------------------------------------- the array
class Device:
    def __init__(self, kind="cpu"):
        self.kind = kind

    def __repr__(self):
        return "Device(%r)" % self.kind

    def __eq__(self, other):
        return isinstance(other, Device) and other.kind == self.kind

    __hash__ = object.__hash__


CPU = Device("cpu")


def _alloc(nbytes):
    """A buffer whose first byte is 256-byte aligned: (keeper, address)."""
    buf = ctypes.create_string_buffer(max(nbytes, 1) + 256)
    base = ctypes.addressof(buf)
    return buf, (base + 255) & ~255


class Array:
    """A strided 1-D or 2-D array of float32 or int32. Strides are in elements."""

    def __init__(self, keep, base, offset, dtype, shape, strides, readonly=False):
        if dtype not in _DTYPES:
            raise TypeError("tinyarr: unsupported dtype %r" % (dtype,))
        if len(shape) not in (1, 2):
            raise ValueError("tinyarr: only 1-D and 2-D arrays")
        self._keep = keep          # whatever keeps the memory alive
        self._base = base          # address of the allocation (or the imported data pointer)
        self._offset = offset      # bytes from _base to the first element
        self.dtype = dtype
        self.shape = tuple(int(n) for n in shape)
        self.strides = tuple(int(s) for s in strides)
        self.readonly = bool(readonly)

    # ---- basics
    itemsize = 4

    ndim = property(lambda self: len(self.shape))
    size = property(lambda self: math.prod(self.shape))

    @property
    def address(self):
        return self._base + self._offset

    @property
    def device(self):
        return CPU

    def _fmt(self):
        return _DTYPES[self.dtype][3]

    def _index_addr(self, idx):
        if not isinstance(idx, tuple):
            idx = (idx,)
        if len(idx) != self.ndim:
            raise IndexError("tinyarr: need %d indices" % self.ndim)
        off = 0
        for i, n, s in zip(idx, self.shape, self.strides):
            if i < 0:
                i += n
            if not 0 <= i < n:
                raise IndexError("index out of range")
            off += i * s
        return self.address + off * 4

    def __getitem__(self, idx):
        return struct.unpack(self._fmt(), ctypes.string_at(self._index_addr(idx), 4))[0]

    def __setitem__(self, idx, value):
        if self.readonly:
            raise ValueError("tinyarr: array is read-only")
        ctypes.memmove(self._index_addr(idx), struct.pack(self._fmt(), value), 4)

    def _indices(self):
        if self.ndim == 1:
            return [(i,) for i in range(self.shape[0])]
        return [(i, j) for i in range(self.shape[0]) for j in range(self.shape[1])]

    def tobytes(self):
        return b"".join(ctypes.string_at(self._index_addr(ix), 4) for ix in self._indices())

    def tolist(self):
        if self.ndim == 1:
            return [self[i] for i in range(self.shape[0])]
        return [[self[i, j] for j in range(self.shape[1])] for i in range(self.shape[0])]

    def __len__(self):
        return self.shape[0]

    def __repr__(self):
        return "tinyarr.Array(%r, dtype=%s)" % (self.tolist(), self.dtype)

    # ---- views
    @property
    def T(self):
        return self.transpose()

    def transpose(self):
        return Array(self._keep, self._base, self._offset, self.dtype, self.shape[::-1], self.strides[::-1],
                     self.readonly)

    def as_readonly(self):
        return Array(self._keep, self._base, self._offset, self.dtype, self.shape, self.strides, True)

    def sliced(self, dim, start, stop, step=1):
        r = range(*slice(start, stop, step).indices(self.shape[dim]))
        shape = list(self.shape)
        strides = list(self.strides)
        offset = self._offset
        if len(r):
            offset += r.start * self.strides[dim] * 4
        shape[dim] = len(r)
        strides[dim] = self.strides[dim] * step
        return Array(self._keep, self._base, offset, self.dtype, shape, strides, self.readonly)

    def copy(self):
        return frombuffer(self.tobytes(), self.dtype, self.shape)

    # ---- numpy-style interface (for readers other than DLPack)
    @property
    def __array_interface__(self):
        return {"version": 3, "shape": self.shape, "typestr": "<f4" if self.dtype == "float32" else "<i4",
                "data": (self.address, self.readonly), "strides": tuple(s * 4 for s in self.strides)}

    # ---- DLPack producer
    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None:
            if isinstance(stream, bool) or not isinstance(stream, int):
                raise TypeError("tinyarr: stream must be None or an int, got %r" % (type(stream).__name__,))
            raise BufferError("tinyarr: CPU arrays take no stream (stream=None only)")
        versioned = False
        if max_version is not None:
            if (not isinstance(max_version, tuple) or len(max_version) != 2
                    or not all(isinstance(v, int) and not isinstance(v, bool) for v in max_version)):
                raise TypeError("tinyarr: max_version must be a (major, minor) tuple of ints")
            versioned = max_version[0] >= 1
        elif _bug("none_versioned"):
            versioned = True
        if dl_device is not None:
            if (not isinstance(dl_device, tuple) or len(dl_device) != 2
                    or not all(isinstance(v, int) for v in dl_device)):
                raise BufferError("tinyarr: dl_device must be a (device_type, device_id) pair")
            if tuple(dl_device) != (kDLCPU, 0):
                raise BufferError("tinyarr: cannot export to device %r" % (dl_device,))
        if copy is not None and not isinstance(copy, bool):
            raise TypeError("tinyarr: copy must be True, False or None")

        src = self
        copied = False
        if copy:
            src = self.copy()
            copied = True
        if src.readonly and not versioned and not copied:
            raise BufferError("tinyarr: a read-only array cannot be exported in a legacy capsule "
                              "(it cannot carry the READ_ONLY flag); ask for max_version >= (1, 0)")

        ndim = src.ndim
        shape = (ctypes.c_int64 * ndim)(*src.shape)
        mult = 4 if _bug("byte_strides") else 1
        strides = (ctypes.c_int64 * ndim)(*(s * mult for s in src.strides))
        if versioned:
            m = DLManagedTensorVersioned()
            minor = DLPACK_VERSION[1]
            if max_version[0] == DLPACK_VERSION[0] if max_version else False:
                minor = min(max_version[1], DLPACK_VERSION[1])
            m.version.major = DLPACK_VERSION[0]
            m.version.minor = minor
            flags = 0
            if src.readonly and not copied and not _bug("readonly_noflag"):
                flags |= FLAG_READ_ONLY
            if copied:
                flags |= FLAG_IS_COPIED
            m.flags = flags
        else:
            m = DLManagedTensor()
        t = m.dl_tensor
        size = src.size
        t.data = src._base if size else None
        t.byte_offset = src._offset if size else 0
        t.device.device_type = kDLCPU
        t.device.device_id = 0
        t.ndim = ndim
        code, bits, lanes, _ = _DTYPES[src.dtype]
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        t.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        m.manager_ctx = None
        m.deleter = _deleter
        addr = ctypes.addressof(m)
        with _live_lock:
            _live[addr] = (m, shape, strides, src)
        return _capsule_new(addr, _N_VERSIONED if versioned else _N_LEGACY, _destructor)


# ----------------------------------------------------------------------------- constructors
def frombuffer(data, dtype="float32", shape=None):
    data = bytes(data)
    if shape is None:
        shape = (len(data) // 4,)
    shape = tuple(shape)
    n = 1
    for s in shape:
        n *= s
    if n * 4 != len(data):
        raise ValueError("tinyarr: %d bytes for shape %s" % (len(data), shape))
    buf, base = _alloc(len(data))
    ctypes.memmove(base, data, len(data))
    strides = (shape[1], 1) if len(shape) == 2 else (1,)
    return Array(buf, base, 0, dtype, shape, strides)


def asarray(values, dtype="float32"):
    fmt = _DTYPES[dtype][3]
    if values and isinstance(values[0], (list, tuple)):
        rows, cols = len(values), len(values[0])
        flat = [v for row in values for v in row]
        return frombuffer(struct.pack("<%d%s" % (len(flat), fmt), *flat), dtype, (rows, cols))
    return frombuffer(struct.pack("<%d%s" % (len(values), fmt), *values), dtype, (len(values),))


def zeros(shape, dtype="float32"):
    if isinstance(shape, int):
        shape = (shape,)
    n = 1
    for s in shape:
        n *= s
    return frombuffer(bytes(4 * n), dtype, shape)


# ----------------------------------------------------------------------------- DLPack consumer
class _Import:
    """Holds an imported managed tensor; calls its deleter once when the last view dies."""

    def __init__(self, ptr, kind, capsule_name):
        self.ptr = ptr
        self.kind = kind
        self.name = capsule_name
        self.done = False

    def release(self):
        if self.done:
            return
        self.done = True
        m = self.kind.from_address(self.ptr)
        if m.deleter:
            m.deleter(self.ptr)
            if _bug("double_delete"):
                m.deleter(self.ptr)

    def __del__(self):
        self.release()


def _check_device_arg(device):
    """True when `device` asks for the CPU (None means: wherever x is)."""
    if device is None:
        return False
    if device == CPU or device == "cpu" or device == (kDLCPU, 0):
        return True
    raise BufferError("tinyarr: cannot place an array on device %r (tinyarr has the CPU only)" % (device,))


def from_dlpack(x, /, *, device=None, copy=None):
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("tinyarr: copy must be True, False or None")
    want_cpu = _check_device_arg(device)
    dev = x.__dlpack_device__()      # AttributeError passes through for objects without DLPack
    dev_type, dev_id = int(dev[0]), int(dev[1])
    dl_device = None
    if dev_type != kDLCPU:
        if want_cpu or copy:
            if copy is False:
                raise ValueError("tinyarr: a copy to the CPU is needed but copy=False")
            dl_device = (kDLCPU, 0)
        else:
            err = ValueError if _bug("valueerror_device") else BufferError
            raise err("tinyarr: cannot import memory of device (%d, %d); pass device='cpu' to copy it"
                      % (dev_type, dev_id))
    kw = {"stream": None, "max_version": DLPACK_VERSION}
    if dl_device is not None:
        kw["dl_device"] = dl_device
    if copy is not None:
        kw["copy"] = copy
    try:
        cap = x.__dlpack__(**kw)
    except TypeError:
        if dl_device is not None:
            raise
        # an older producer that does not know the newer keywords (VER-06)
        cap = x.__dlpack__(stream=None)
        kw = {}
    return _from_capsule(cap, copy=copy, producer_copied_asked=("copy" in kw))


def _from_capsule(cap, copy=None, producer_copied_asked=False):
    if type(cap).__name__ != "PyCapsule":
        raise TypeError("tinyarr: __dlpack__ returned %s, not a PyCapsule" % type(cap).__name__)
    name = _capsule_get_name(cap)
    if name == b"dltensor_versioned":
        ptr = _capsule_get_pointer(cap, _N_VERSIONED)
        m = DLManagedTensorVersioned.from_address(ptr)
        if m.version.major != DLPACK_VERSION[0]:
            # VER-08: read nothing else; the capsule (not renamed) runs the deleter when it dies
            raise BufferError("tinyarr: DLPack major version %d is not supported" % m.version.major)
        kind, used, flags = DLManagedTensorVersioned, _N_USED_VERSIONED, m.flags
    elif name == b"dltensor":
        ptr = _capsule_get_pointer(cap, _N_LEGACY)
        m = DLManagedTensor.from_address(ptr)
        kind, used, flags = DLManagedTensor, _N_USED_LEGACY, 0
    elif name is not None and name.startswith(b"used_"):
        raise BufferError("tinyarr: this capsule was consumed already (%s)" % name.decode())
    else:
        raise BufferError("tinyarr: not a DLPack capsule (name %r)" % name)
    if not ptr:
        raise BufferError("tinyarr: capsule holds NULL")
    t = m.dl_tensor
    if t.device.device_type != kDLCPU:
        err = ValueError if _bug("valueerror_device") else BufferError
        raise err("tinyarr: cannot import memory of device type %d" % t.device.device_type)
    dtype = _BY_CODE.get((t.dtype.code, t.dtype.bits, t.dtype.lanes))
    if dtype is None:
        raise BufferError("tinyarr: unsupported dtype (code %d, bits %d, lanes %d)"
                          % (t.dtype.code, t.dtype.bits, t.dtype.lanes))
    ndim = t.ndim
    if ndim not in (1, 2):
        raise BufferError("tinyarr: only 1-D and 2-D arrays can be imported (ndim %d)" % ndim)
    if not t.shape:
        raise BufferError("tinyarr: NULL shape")
    shape = tuple(t.shape[i] for i in range(ndim))
    if any(n < 0 for n in shape):
        raise BufferError("tinyarr: negative extent in shape %s" % (shape,))
    if t.strides:
        strides = tuple(t.strides[i] for i in range(ndim))
    else:
        strides = (shape[1], 1) if ndim == 2 else (1,)
    size = 1
    for n in shape:
        size *= n
    if size and not t.data:
        raise BufferError("tinyarr: NULL data for a non-empty tensor")
    # overflow guard: the byte span must fit in int64
    if size:
        lo = hi = 0
        for n, s in zip(shape, strides):
            ext = (n - 1) * s
            if ext < 0:
                lo += ext
            else:
                hi += ext
        if max(abs(lo), hi) * 4 + t.byte_offset >= 2 ** 62:
            raise BufferError("tinyarr: tensor spans more memory than addressable")
    offset = 0 if _bug("ignore_offset") else t.byte_offset
    readonly = bool(flags & FLAG_READ_ONLY)
    data = t.data or 0

    # take ownership
    if _capsule_set_name(cap, used) != 0:
        raise BufferError("tinyarr: cannot rename the capsule")
    keeper = _Import(ptr, kind, used.value)
    arr = Array(keeper, data, offset, dtype, shape, strides, readonly)
    if copy:
        already = producer_copied_asked and (flags & FLAG_IS_COPIED)
        if not already:
            out = arr.copy()
            keeper.release()
            return out
    return arr
