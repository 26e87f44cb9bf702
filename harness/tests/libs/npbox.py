"""npbox: a small array library whose storage is numpy arrays, with its own DLPack code in
ctypes (numpy's __dlpack__ and from_dlpack are not used).

    a = npbox.asarray([[1, 2], [3, 4]], dtype="float32")   # an Array over a numpy array
    b = npbox.from_dlpack(x)                               # a view of x's memory
    numpy.asarray(b)                                       # through __array_interface__

`from_dlpack(x, /, *, device=None, copy=None)` asks for a versioned capsule (a legacy one from
producers that take no max_version; with device='cpu', memory of another device is asked for
with dl_device=(kDLCPU, 0)), renames it used_*, and wraps the producer's memory in a
numpy array through `__array_interface__` (data + byte_offset, byte strides, READ_ONLY as a
read-only array). A small holder object is the array's base: it keeps the producer's tensor and
calls its deleter once when numpy lets go of the memory. copy=True copies into numpy memory and
gives the tensor back at once. Zero-size tensors become fresh empty arrays.

`Array.__dlpack__` exports the numpy array it holds: `data` at its first element, byte_offset 0,
strides in elements (refused with BufferError when a byte stride is not a whole number of
items), versioned 1.3 when asked for max_version >= (1, 0), else legacy (refused for read-only
arrays: a legacy capsule cannot say so). copy=True exports a copy flagged IS_COPIED.

Bugs can be planted with NPBOX_BUG=name[,name...]:
  ignore_offset   from_dlpack reads at `data`, leaving byte_offset out
  ignore_strides  from_dlpack takes every import for row-major (C-contiguous)
  null_strides    versioned (1.3) exports of C-contiguous arrays leave strides NULL
"""
import ctypes
import os

import numpy as np

from dlpack_structs import (check_cpu_export, DELETER, DLDataType, DLDevice, DLManagedTensor,
                            DLManagedTensorVersioned, DLPackVersion, export_for_import, FLAG_READ_ONLY, _GetPointer,
                            _IsValid, kDLCPU, new_capsule, _SetName)

__version__ = "0.2"

BUGS = set(filter(None, os.environ.get("NPBOX_BUG", "").split(",")))
FLAG_IS_COPIED = 2

#: numpy dtype char -> (DLPack code, bits) for the dtypes npbox exchanges
_TO_DL = {"?": (6, 8), "b": (0, 8), "h": (0, 16), "i": (0, 32), "l": (0, 64), "q": (0, 64),
          "B": (1, 8), "H": (1, 16), "I": (1, 32), "L": (1, 64), "Q": (1, 64),
          "e": (2, 16), "f": (2, 32), "d": (2, 64), "F": (5, 64), "D": (5, 128)}
_FROM_DL = {(6, 8): "?", (0, 8): "i1", (0, 16): "i2", (0, 32): "i4", (0, 64): "i8",
            (1, 8): "u1", (1, 16): "u2", (1, 32): "u4", (1, 64): "u8",
            (2, 16): "f2", (2, 32): "f4", (2, 64): "f8", (5, 64): "c8", (5, 128): "c16"}


class Array:
    """An npbox array: a numpy array (`.np`) with DLPack methods of npbox's own."""

    def __init__(self, a):
        self.np = a

    shape = property(lambda self: self.np.shape)
    dtype = property(lambda self: self.np.dtype)

    @property
    def __array_interface__(self):
        return self.np.__array_interface__

    def __repr__(self):
        return "npbox.Array(%r)" % (self.np,)

    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        check_cpu_export("npbox", stream, dl_device)
        a = self.np.copy() if copy is True else self.np
        return _export(a, readonly=not self.np.flags.writeable, copied=copy is True,
                       versioned=max_version is not None and tuple(max_version)[0] >= 1)


# ---------------------------------------------------------------------------- export

#: struct address -> (struct, shape/strides array, the numpy array exported), until the deleter
_LIVE = {}


@DELETER
def _deleter(address):
    _LIVE.pop(address, None)


def _export(a, readonly, copied, versioned):
    code = _TO_DL.get(a.dtype.char)
    if code is None or not a.dtype.isnative:
        raise BufferError("npbox: dtype %s cannot be exported" % a.dtype)
    if readonly and not versioned and not copied:
        raise BufferError("npbox: read-only arrays need max_version >= (1, 0)")
    item = a.dtype.itemsize
    if any(s % item for s in a.strides):
        raise BufferError("npbox: byte strides %r are not whole items" % (a.strides,))
    m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    nd = a.ndim
    dims = (ctypes.c_int64 * max(2 * nd, 1))(*a.shape, *(s // item for s in a.strides))
    t = m.dl_tensor
    t.data = a.ctypes.data if a.size else None
    t.device, t.ndim, t.dtype, t.byte_offset = DLDevice(kDLCPU, 0), nd, DLDataType(*code, 1), 0
    if nd:
        t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
        if not ("null_strides" in BUGS and versioned and a.flags.c_contiguous):
            t.strides = ctypes.cast(ctypes.addressof(dims) + 8 * nd, ctypes.POINTER(ctypes.c_int64))
    m.deleter = _deleter
    if versioned:
        m.version = DLPackVersion(1, 3)
        m.flags = (FLAG_READ_ONLY if readonly and not copied else 0) | (FLAG_IS_COPIED if copied else 0)
    _LIVE[ctypes.addressof(m)] = (m, dims, a)
    return new_capsule(m, versioned)


# ---------------------------------------------------------------------------- import
class _Import:
    """The base of an imported numpy array: its __array_interface__ describes the producer's
    memory, and it calls the producer's deleter once when it dies."""

    def __init__(self, ptr, deleter, interface):
        self._ptr, self._deleter, self.__array_interface__ = ptr, deleter, interface

    def release(self):
        deleter, self._deleter = self._deleter, None
        if deleter:
            deleter(self._ptr)

    def __del__(self):
        self.release()


def _take(cap):
    """(struct address, managed struct, readonly) of an unconsumed capsule, renamed used_*."""
    if _IsValid(cap, b"dltensor_versioned"):
        ptr = _GetPointer(cap, b"dltensor_versioned")
        m = DLManagedTensorVersioned.from_address(ptr)
        _SetName(cap, b"used_dltensor_versioned")
        if m.version.major != 1:
            if m.deleter:
                m.deleter(ptr)
            raise BufferError("npbox: DLPack major version %d is not supported" % m.version.major)
        return ptr, m, bool(m.flags & FLAG_READ_ONLY)
    if _IsValid(cap, b"dltensor"):
        ptr = _GetPointer(cap, b"dltensor")
        _SetName(cap, b"used_dltensor")
        return ptr, DLManagedTensor.from_address(ptr), False
    raise BufferError("npbox: not an unconsumed DLPack capsule")


def _interface(t, readonly):
    """The __array_interface__ of a DLTensor (BufferError for what npbox cannot hold)."""
    key = (t.dtype.code, t.dtype.bits)
    if t.dtype.lanes != 1 or key not in _FROM_DL:
        raise BufferError("npbox: dtype (%d, %d, %d) is not supported" % (key + (t.dtype.lanes,)))
    if t.device.device_type != kDLCPU:
        raise BufferError("npbox: only CPU memory can be imported")
    nd = t.ndim
    if nd < 0 or (nd and not t.shape):
        raise BufferError("npbox: malformed ndim/shape")
    dt = np.dtype(_FROM_DL[key])
    shape = tuple(int(t.shape[i]) for i in range(nd))
    if any(n < 0 for n in shape):
        raise BufferError("npbox: negative extent")
    strides = None
    if nd and t.strides and "ignore_strides" not in BUGS:
        strides = tuple(int(t.strides[i]) * dt.itemsize for i in range(nd))
    data = (t.data or 0) + (0 if "ignore_offset" in BUGS else t.byte_offset)
    return {"version": 3, "shape": shape, "typestr": dt.str, "strides": strides, "data": (data, readonly)}, dt


def from_dlpack(x, /, *, device=None, copy=None):
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise AttributeError("npbox: %s has no __dlpack__/__dlpack_device__" % type(x).__name__)
    if device is not None and device not in ("cpu", (kDLCPU, 0)):
        raise BufferError("npbox: only device='cpu' is supported")
    kw = {"max_version": (1, 3)}
    if tuple(x.__dlpack_device__()) != (kDLCPU, 0):
        if device is None:
            raise BufferError("npbox: only CPU memory can be imported; pass device='cpu' for a copy")
        kw["dl_device"] = (kDLCPU, 0)  # the producer copies to the CPU for us
        if copy is not None:
            kw["copy"] = copy
    cap = export_for_import("npbox", x, kw)
    ptr, m, readonly = _take(cap)
    try:
        interface, dt = _interface(m.dl_tensor, readonly)
    except BaseException:
        if m.deleter:
            m.deleter(ptr)
        raise
    holder = _Import(ptr, m.deleter, interface)
    if 0 in interface["shape"]:
        holder.release()
        return Array(np.empty(interface["shape"], dt))
    a = np.asarray(holder)
    if copy is True:
        a = a.copy()
        del holder  # the copy holds no reference to it: the deleter runs now
    return Array(a)


def asarray(obj, dtype=None):
    """An npbox Array of numpy.array(obj, dtype) (a copy)."""
    return Array(np.array(obj, dtype=dtype))
