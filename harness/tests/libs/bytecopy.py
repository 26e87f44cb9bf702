"""bytecopy: a consumer-only DLPack importer that copies the elements into a bytearray.

`from_dlpack(x, /, *, device=None, copy=None)` asks for a versioned capsule (falling back to
legacy for old producers), copies the elements in row-major order into a fresh bytearray,
gives the tensor back to its producer at once (deleter), and returns a `Copy`: the bytearray
plus shape and dtype, readable through `__array_interface__` (so numpy can view it).

It always copies, so `copy=False` raises ValueError. No numpy needed.

Bugs can be planted with BYTECOPY_BUG=name[,name...].
"""
import ctypes
import os
import sys

from dlpack_structs import (DLManagedTensor, DLManagedTensorVersioned, export_for_import, _GetPointer, _IsValid,
                            kDLCPU, _SetName)

__version__ = "1.0"

BUGS = set(filter(None, os.environ.get("BYTECOPY_BUG", "").split(",")))


# (code, bits) -> array-interface type string (native byte order)
_E = "<" if sys.byteorder == "little" else ">"
_TYPESTR = {
    (6, 8): "|b1",
    (0, 8): "|i1", (0, 16): _E + "i2", (0, 32): _E + "i4", (0, 64): _E + "i8",
    (1, 8): "|u1", (1, 16): _E + "u2", (1, 32): _E + "u4", (1, 64): _E + "u8",
    (2, 16): _E + "f2", (2, 32): _E + "f4", (2, 64): _E + "f8",
    (5, 64): _E + "c8", (5, 128): _E + "c16",
}


class Copy:
    """An owned copy: `data` (bytearray, row-major elements), `shape`, `dtype` (code, bits, lanes)."""

    def __init__(self, data, shape, dtype):
        self.data = data
        self.shape = shape
        self.dtype = dtype
        self._cbuf = (ctypes.c_char * len(data)).from_buffer(data) if len(data) else (ctypes.c_char * 1)()

    @property
    def __array_interface__(self):
        return {
            "version": 3,
            "shape": self.shape,
            "typestr": _TYPESTR[self.dtype[:2]],
            "data": (ctypes.addressof(self._cbuf), False),
            "strides": None,
        }

    def __repr__(self):
        return "bytecopy.Copy(shape=%r, dtype=%r, %d bytes)" % (self.shape, self.dtype, len(self.data))


def _release(ptr, deleter):
    if deleter:
        deleter(ptr)
        if "double_delete" in BUGS:
            deleter(ptr)


def _copy_out(t):
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if lanes != 1 or (code, bits) not in _TYPESTR:
        raise BufferError("bytecopy: unsupported dtype (%d, %d, %d)" % (code, bits, lanes))
    if t.device.device_type != kDLCPU:
        raise BufferError("bytecopy: only CPU memory can be copied")
    nd = t.ndim
    if nd < 0 or (nd and not t.shape):
        raise BufferError("bytecopy: malformed ndim/shape")
    shape = tuple(int(t.shape[i]) for i in range(nd))
    if any(s < 0 for s in shape):
        raise BufferError("bytecopy: negative extent")
    if nd and t.strides:
        strides = tuple(int(t.strides[i]) for i in range(nd))
    else:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
    if "ignore_strides" in BUGS:
        strides, acc = [], 1
        for s in reversed(shape):
            strides.append(acc)
            acc *= s
        strides = tuple(reversed(strides))
    item = bits // 8
    size = 1
    for s in shape:
        size *= s
    if size * item > 2 ** 40:
        raise BufferError("bytecopy: tensor too large to copy")
    if size:
        span = sum(abs(st) * (s - 1) for s, st in zip(shape, strides)) * item
        if span >= 2 ** 62:
            raise BufferError("bytecopy: tensor spans too many bytes")
        if not t.data:
            raise BufferError("bytecopy: NULL data")
    out = bytearray(size * item)
    base = (t.data or 0) + t.byte_offset
    if size:
        # copy the innermost dimension run by run when it is contiguous
        idx = [0] * nd
        pos = 0
        for _ in range(size):
            off = 0
            for i, st in zip(idx, strides):
                off += i * st
            out[pos:pos + item] = ctypes.string_at(base + off * item, item)
            pos += item
            for d in reversed(range(nd)):
                idx[d] += 1
                if idx[d] < shape[d]:
                    break
                idx[d] = 0
    return Copy(out, shape, (code, bits, lanes))


def from_dlpack(x, /, *, device=None, copy=None):
    if copy is False:
        if "wrong_exc" in BUGS:
            raise RuntimeError("bytecopy always copies")
        raise ValueError("bytecopy always copies; copy=False cannot be honoured")
    if device is not None and device != "cpu" and device != (kDLCPU, 0):
        raise BufferError("bytecopy: only device='cpu' is supported")
    if not hasattr(x, "__dlpack__") or not hasattr(x, "__dlpack_device__"):
        raise AttributeError("bytecopy: %s has no __dlpack__/__dlpack_device__" % type(x).__name__)
    dev = x.__dlpack_device__()
    kw = {"max_version": (1, 3)}
    if int(dev[0]) != kDLCPU:
        if device is None:
            raise BufferError("bytecopy: cannot read device %r memory; pass device='cpu'" % (tuple(dev),))
        kw["dl_device"] = (kDLCPU, 0)
    cap = export_for_import("bytecopy", x, kw)
    if _IsValid(cap, b"dltensor_versioned"):
        ptr = _GetPointer(cap, b"dltensor_versioned")
        if "no_rename" not in BUGS:
            _SetName(cap, b"used_dltensor_versioned")
        m = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensorVersioned)).contents
        if m.version.major != 1 and "ignore_major" not in BUGS:
            _release(ptr, m.deleter)
            raise BufferError("bytecopy: unsupported DLPack major version %d" % m.version.major)
    elif _IsValid(cap, b"dltensor"):
        ptr = _GetPointer(cap, b"dltensor")
        if "no_rename" not in BUGS:
            _SetName(cap, b"used_dltensor")
        m = ctypes.cast(ptr, ctypes.POINTER(DLManagedTensor)).contents
    else:
        raise BufferError("bytecopy: not an unconsumed DLPack capsule")
    try:
        return _copy_out(m.dl_tensor)
    finally:
        _release(ptr, m.deleter)
