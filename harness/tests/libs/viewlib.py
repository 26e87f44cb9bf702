"""viewlib: a pure-Python (ctypes) DLPack consumer and producer that views unless asked to copy.

`from_dlpack(x)` asks for a versioned capsule (a legacy one from producers that take no
max_version), renames it used_*, and returns an `Array` that views the producer's memory and
keeps the producer's tensor until the Array dies (then it calls the deleter once). An Array
exports itself again through `__dlpack__`: a new managed struct per call over the same memory
(the same data pointer, byte_offset, shape and strides), versioned 1.3 with the READ_ONLY flag
of its import when asked for max_version >= (1, 0), else legacy (refused with BufferError for
read-only data). copy=True (in `from_dlpack` and in `__dlpack__`) copies the elements' span
into memory of its own, with the same shape and strides; a versioned export of such a copy
carries IS_COPIED. It imports the dtypes whose element size it knows (whole bytes) and refuses
the others. It has no `__array_interface__` and no buffer: it describes itself only through
DLPack.

Bugs can be planted with VIEWLIB_BUG=name[,name...]:
  drop_offset    re-exports leave byte_offset out (0) and keep the data pointer
  drop_readonly  versioned re-exports never carry READ_ONLY
  abort_negative_strides  from_dlpack aborts the process on a negative stride (as torch 1.13's
                 did: an uncaught C++ exception)
"""
import ctypes
import os

from dlpack_structs import (check_cpu_export, DELETER, DLDataType, DLDevice, DLManagedTensor,
                            DLManagedTensorVersioned, DLPackVersion, FLAG_READ_ONLY, _GetPointer, _IsValid, kDLCPU,
                            new_capsule, _SetName)

__version__ = "1.0"

BUGS = set(filter(None, os.environ.get("VIEWLIB_BUG", "").split(",")))

FLAG_IS_COPIED = 2
#: dtype codes with whole-byte elements: int, uint, float, bfloat, complex, bool, the float8s
_CODES = {0, 1, 2, 4, 5, 6, *range(7, 15)}

#: struct address -> (the struct, its shape/strides array, the Array it views): alive until
#: the deleter runs (the consumer's call, or the destructor of a capsule nobody consumed)
_EXPORTED = {}


@DELETER
def _exported_deleter(address):
    _EXPORTED.pop(address, None)


class Array:
    """A view of an imported tensor: `data`, `byte_offset`, `shape`, `strides` (elements),
    `dtype` (code, bits, lanes), `readonly`."""

    def __init__(self, ptr, managed, t, readonly):
        self._ptr, self._deleter = ptr, managed.deleter
        nd = t.ndim
        self.shape = tuple(int(t.shape[i]) for i in range(nd))
        if nd and t.strides:
            self.strides = tuple(int(t.strides[i]) for i in range(nd))
        else:
            out, step = [], 1
            for n in reversed(self.shape):
                out.append(step)
                step *= max(n, 1)
            self.strides = tuple(reversed(out))
        self.data, self.byte_offset = t.data or 0, int(t.byte_offset)
        self.dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        self.readonly, self.copied = bool(readonly), False

    def __del__(self):
        if self._deleter:
            self._deleter(self._ptr)
            self._deleter = None

    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        check_cpu_export("viewlib", stream, dl_device)
        if copy is True:
            return _copy(self).__dlpack__(max_version=max_version)
        versioned = max_version is not None and max_version[0] >= 1
        if self.readonly and not versioned:
            raise BufferError("viewlib: read-only data needs max_version >= (1, 0)")
        m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        nd = len(self.shape)
        dims = (ctypes.c_int64 * max(2 * nd, 1))(*self.shape, *self.strides)
        t = m.dl_tensor
        t.data, t.device, t.ndim = self.data or None, DLDevice(kDLCPU, 0), nd
        t.dtype = DLDataType(*self.dtype)
        if nd:
            t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
            t.strides = ctypes.cast(ctypes.addressof(dims) + 8 * nd, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = 0 if "drop_offset" in BUGS else self.byte_offset
        m.deleter = _exported_deleter
        if versioned:
            m.version = DLPackVersion(1, 3)
            m.flags = FLAG_READ_ONLY if self.readonly and "drop_readonly" not in BUGS else 0
            m.flags |= FLAG_IS_COPIED if self.copied else 0
        _EXPORTED[ctypes.addressof(m)] = (m, dims, self)
        return new_capsule(m, versioned)


def _copy(a):
    """A writable Array over a copy of `a`'s elements in memory of its own (256-byte aligned),
    with `a`'s shape and strides: the span from the lowest to the highest element is copied."""
    item = a.dtype[1] * a.dtype[2] // 8
    ends = [(n - 1) * s * item for n, s in zip(a.shape, a.strides)] if all(a.shape) else None
    low = sum(e for e in ends if e < 0) if ends is not None else 0
    size = sum(e for e in ends if e > 0) - low + item if ends is not None else 0
    buf = (ctypes.c_char * (size + 256))()
    start = -(-ctypes.addressof(buf) // 256) * 256
    if size:
        ctypes.memmove(start, a.data + a.byte_offset + low, size)
    b = object.__new__(Array)
    b._ptr, b._deleter, b._buf = None, None, buf
    b.shape, b.strides, b.dtype = a.shape, a.strides, a.dtype
    b.data, b.byte_offset, b.readonly, b.copied = start, -low, False, True
    return b


def from_dlpack(x, /, *, device=None, copy=None):
    if device is not None and device not in ("cpu", (kDLCPU, 0)):
        raise BufferError("viewlib: CPU memory only")
    if tuple(x.__dlpack_device__()) != (kDLCPU, 0):
        raise BufferError("viewlib: CPU memory only")
    try:
        cap = x.__dlpack__(max_version=(1, 3))
    except TypeError:
        cap = x.__dlpack__()
    if _IsValid(cap, b"dltensor_versioned"):
        ptr = _GetPointer(cap, b"dltensor_versioned")
        m = DLManagedTensorVersioned.from_address(ptr)
        if m.version.major != 1:
            raise BufferError("viewlib: unsupported DLPack major version %d" % m.version.major)
        _SetName(cap, b"used_dltensor_versioned")
        readonly = m.flags & FLAG_READ_ONLY
    elif _IsValid(cap, b"dltensor"):
        ptr = _GetPointer(cap, b"dltensor")
        m = DLManagedTensor.from_address(ptr)
        _SetName(cap, b"used_dltensor")
        readonly = False
    else:
        raise BufferError("viewlib: not an unconsumed DLPack capsule")
    dtype = m.dl_tensor.dtype
    why = None
    if m.dl_tensor.device.device_type != kDLCPU:
        why = "CPU memory only"
    elif dtype.code not in _CODES or dtype.bits % 8 or not dtype.bits or (dtype.code >= 6 and dtype.bits != 8):
        why = "cannot interpret dtype (%d, %d, %d)" % (dtype.code, dtype.bits, dtype.lanes)
    if why:
        if m.deleter:
            m.deleter(ptr)
        raise BufferError("viewlib: " + why)
    if "abort_negative_strides" in BUGS and m.dl_tensor.strides and any(
            m.dl_tensor.strides[i] < 0 for i in range(m.dl_tensor.ndim)):
        os.abort()
    a = Array(ptr, m, m.dl_tensor, readonly)
    return _copy(a) if copy is True else a
