"""viewlib: a pure-Python (ctypes) DLPack consumer and producer that views, never copies.

`from_dlpack(x)` asks for a versioned capsule (a legacy one from producers that take no
max_version), renames it used_*, and returns an `Array` that views the producer's memory and
keeps the producer's tensor until the Array dies (then it calls the deleter once). An Array
exports itself again through `__dlpack__`: a new managed struct per call over the same memory
(the same data pointer, byte_offset, shape and strides), versioned 1.3 with the READ_ONLY flag
of its import when asked for max_version >= (1, 0), else legacy (refused with BufferError for
read-only data). It has no `__array_interface__` and no buffer: it describes itself only
through DLPack.

Bugs can be planted with VIEWLIB_BUG=name[,name...]:
  drop_offset    re-exports leave byte_offset out (0) and keep the data pointer
  drop_readonly  versioned re-exports never carry READ_ONLY
"""
import ctypes
import os

from dlpack_structs import (check_cpu_export, DELETER, DLDataType, DLDevice, DLManagedTensor,
                            DLManagedTensorVersioned, DLPackVersion, FLAG_READ_ONLY, _GetPointer, _IsValid, kDLCPU,
                            _SetName)

__version__ = "1.0"

BUGS = set(filter(None, os.environ.get("VIEWLIB_BUG", "").split(",")))

_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))

#: struct address -> (the struct, its shape/strides array, the Array it views): alive until
#: the deleter runs (the consumer's call, or the destructor of a capsule nobody consumed)
_EXPORTED = {}


@DELETER
def _exported_deleter(address):
    _EXPORTED.pop(address, None)


_IsValidAt = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_PointerAt = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destroy(capsule):
    for name in (b"dltensor_versioned", b"dltensor"):
        if _IsValidAt(capsule, name):
            _exported_deleter(_PointerAt(capsule, name))


_NAMES = {True: ctypes.c_char_p(b"dltensor_versioned"), False: ctypes.c_char_p(b"dltensor")}


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
        self.readonly = bool(readonly)

    def __del__(self):
        if self._deleter:
            self._deleter(self._ptr)
            self._deleter = None

    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        check_cpu_export("viewlib", stream, dl_device)
        if copy is True:
            raise BufferError("viewlib: cannot export a copy")
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
        _EXPORTED[ctypes.addressof(m)] = (m, dims, self)
        return _New(ctypes.addressof(m), _NAMES[versioned], ctypes.cast(_destroy, ctypes.c_void_p))


def from_dlpack(x, /, *, device=None, copy=None):
    if copy is True:
        raise BufferError("viewlib: never copies")
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
    if m.dl_tensor.device.device_type != kDLCPU:
        if m.deleter:
            m.deleter(ptr)
        raise BufferError("viewlib: CPU memory only")
    return Array(ptr, m, m.dl_tensor, readonly)
