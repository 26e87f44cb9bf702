"""outlib: a producer-only array library in pure Python (ctypes): it makes tensors and exports
them through DLPack, and imports nothing (no from_dlpack).

    t = outlib.make((2, 3), "float32", data=b"...")   # owned ctypes memory, row-major
    t.transpose(1, 0); t.narrow(0, 1, 2, step=1); t.flip(0); t.as_readonly()   # views
    t.tobytes()                                       # the elements, row-major

A tensor is (buffer (256-byte aligned), shape, strides in elements, offset in elements, dtype, readonly); views
share the buffer. `__dlpack__` exports a new managed struct per call: `data` is the buffer's
start and `byte_offset` the view's offset in bytes; versioned 1.3 when the consumer asks for
max_version >= (1, 0) (READ_ONLY for read-only views, IS_COPIED for copy=True), legacy
otherwise (refused with BufferError for read-only views: legacy capsules cannot say so). The
struct and what it points at stay alive until its deleter runs; a capsule nobody consumed frees
its struct in the capsule's destructor.

Bugs can be planted with OUTLIB_BUG=name[,name...]:
  byte_strides   strides are exported in bytes, not elements
  drop_readonly  versioned exports of read-only views never carry READ_ONLY
  no_destructor  capsules get no destructor: an unconsumed capsule never frees its tensor
"""
import ctypes
import os

from dlpack_structs import (capsule_destructor, check_cpu_export, contiguous_strides, DELETER, DLDataType, DLDevice,
                            DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, FLAG_READ_ONLY, kDLCPU,
                            new_capsule)

__version__ = "0.1"

BUGS = set(filter(None, os.environ.get("OUTLIB_BUG", "").split(",")))
FLAG_IS_COPIED = 2

#: name -> (DLPack code, bits)
DTYPES = {
    "bool": (6, 8), "int8": (0, 8), "int16": (0, 16), "int32": (0, 32), "int64": (0, 64),
    "uint8": (1, 8), "uint16": (1, 16), "uint32": (1, 32), "uint64": (1, 64),
    "float16": (2, 16), "float32": (2, 32), "float64": (2, 64), "bfloat16": (4, 16),
    "complex64": (5, 64), "complex128": (5, 128),
}


#: struct address -> (struct, shape/strides array, the tensor it exports): until the deleter runs
_LIVE = {}


@DELETER
def _deleter(address):
    _LIVE.pop(address, None)


class Tensor:
    def __init__(self, buf, shape, strides, offset, dtype, readonly=False):
        # buf: (ctypes buffer, the address of its first 256-byte aligned byte), as dlpack.h asks of `data`
        self._buf, self.shape, self.strides, self.offset = buf, tuple(shape), tuple(strides), offset
        self.dtype, self.readonly = dtype, readonly
        self.itemsize = max(DTYPES[dtype][1] // 8, 1)

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    # ---- views
    def transpose(self, *perm):
        perm = perm or tuple(reversed(range(self.ndim)))
        return Tensor(self._buf, [self.shape[p] for p in perm], [self.strides[p] for p in perm], self.offset,
                      self.dtype, self.readonly)

    def narrow(self, dim, start, stop, step=1):
        start, stop, step = slice(start, stop, step).indices(self.shape[dim])
        n = len(range(start, stop, step))
        shape, strides = list(self.shape), list(self.strides)
        offset = self.offset + (start * strides[dim] if n else 0)
        shape[dim], strides[dim] = n, strides[dim] * step
        return Tensor(self._buf, shape, strides, offset, self.dtype, self.readonly)

    def flip(self, dim):
        shape, strides = list(self.shape), list(self.strides)
        offset = self.offset + (shape[dim] - 1) * strides[dim] if shape[dim] else self.offset
        strides[dim] = -strides[dim]
        return Tensor(self._buf, shape, strides, offset, self.dtype, self.readonly)

    def as_readonly(self):
        return Tensor(self._buf, self.shape, self.strides, self.offset, self.dtype, True)

    def copy(self):
        return make(self.shape, self.dtype, self.tobytes())

    def tobytes(self):
        out = bytearray()
        if not self.size:
            return bytes(out)
        base, item = self._buf[1], self.itemsize
        idx = [0] * self.ndim
        for _ in range(self.size):
            off = self.offset + sum(i * s for i, s in zip(idx, self.strides))
            out += ctypes.string_at(base + off * item, item)
            for d in reversed(range(self.ndim)):
                idx[d] += 1
                if idx[d] < self.shape[d]:
                    break
                idx[d] = 0
        return bytes(out)

    def __repr__(self):
        return "outlib.Tensor(shape=%r, dtype=%r%s)" % (self.shape, self.dtype, ", readonly" if self.readonly else "")

    # ---- DLPack
    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        check_cpu_export("outlib", stream, dl_device)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        src = self.copy() if copy is True else self
        if self.readonly and not versioned and copy is not True:
            raise BufferError("outlib: read-only data needs a versioned capsule (max_version >= (1, 0))")
        m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
        nd = src.ndim
        item = src.itemsize
        strides = [s * item for s in src.strides] if "byte_strides" in BUGS else list(src.strides)
        dims = (ctypes.c_int64 * max(2 * nd, 1))(*src.shape, *strides)
        t = m.dl_tensor
        t.data = src._buf[1] if src.size else None
        t.device, t.ndim = DLDevice(kDLCPU, 0), nd
        t.dtype = DLDataType(*DTYPES[src.dtype], 1)
        if nd:
            t.shape = ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64))
            t.strides = ctypes.cast(ctypes.addressof(dims) + 8 * nd, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = src.offset * item if src.size else 0
        m.deleter = _deleter
        if versioned:
            m.version = DLPackVersion(1, 3)
            flags = 0
            if src.readonly and "drop_readonly" not in BUGS:
                flags |= FLAG_READ_ONLY
            if copy is True:
                flags |= FLAG_IS_COPIED
            m.flags = flags
        _LIVE[ctypes.addressof(m)] = (m, dims, src)
        return new_capsule(m, versioned, None if "no_destructor" in BUGS else capsule_destructor)


def make(shape, dtype="float32", data=None):
    """A new row-major tensor of `shape` and `dtype`, zeroed or holding `data` (row-major bytes)."""
    if dtype not in DTYPES:
        raise TypeError("outlib: unknown dtype %r" % (dtype,))
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("outlib: negative extent")
    t = Tensor(None, shape, contiguous_strides(shape), 0, dtype)
    nbytes = t.size * t.itemsize
    buf = (ctypes.c_ubyte * (nbytes + 255))()
    base = (ctypes.addressof(buf) + 255) & ~255
    if data is not None:
        data = bytes(data)
        if len(data) != nbytes:
            raise ValueError("outlib: %d bytes given for %d" % (len(data), nbytes))
        ctypes.memmove(base, data, nbytes)
    t._buf = (buf, base)
    return t
