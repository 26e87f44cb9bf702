"""Array: a strided CPU array over memory that pyref owns or imported.

Invariants:
  - element i of a view lies at address + sum(i_k * strides_k) * itemsize, where address =
    data + offset is the first element; strides count elements (LAY-05);
  - `_owner` keeps the memory alive: the ctypes buffer pyref allocated, or the import that
    calls the producer's deleter when it dies;
  - zero-size arrays hold no memory (data 0);
  - owned buffers start 256-byte aligned (LAY-01) and views keep data there, moving offset.
"""
import ctypes
import itertools
import math
import operator

from . import _dtypes, _faults
from ..kit.abi import DLDeviceType
from ._producer import export

ALIGN = 256
#: the most dimensions an array may have (imports with more are refused)
MAX_NDIM = 64


numel = math.prod


def row_major_strides(shape):
    """Element strides of a compact row-major array (an extent of 0 steps as 1)."""
    if not shape:
        return ()
    steps = itertools.accumulate(reversed([max(n, 1) for n in shape[1:]]), operator.mul, initial=1)
    return tuple(reversed(list(steps)))


def allocate(nbytes):
    """(owner, aligned address) of nbytes of zeroed memory; (None, 0) when nbytes is 0."""
    if nbytes == 0:
        return None, 0
    buf = (ctypes.c_ubyte * (nbytes + ALIGN - 1))()
    return buf, -(-ctypes.addressof(buf) // ALIGN) * ALIGN


def gather(address, shape, strides, itemsize):
    """The elements at `address` (the first one) with element `strides`, as row-major bytes."""
    if numel(shape) == 0:
        return b""
    if not shape:
        return ctypes.string_at(address, itemsize)
    *outer, inner = shape
    step = strides[-1] * itemsize
    out = bytearray()
    for index in itertools.product(*(range(n) for n in outer)):
        row = address + sum(i * s for i, s in zip(index, strides)) * itemsize
        if step == itemsize or inner == 1:
            out += ctypes.string_at(row, inner * itemsize)
        else:
            for j in range(inner):
                out += ctypes.string_at(row + j * step, itemsize)
    return bytes(out)


def compact(dtype, shape, content):
    """A new writable row-major Array of `content` (row-major element bytes)."""
    nbytes = numel(shape) * dtype.itemsize
    if len(content) != nbytes:
        raise ValueError("%d bytes given for %d elements of %s (%d bytes)" % (len(content), numel(shape),
                                                                             dtype.name, nbytes))
    owner, data = allocate(nbytes)
    if nbytes:
        ctypes.memmove(data, bytes(content), nbytes)
    return Array._over(owner, data, 0, dtype, shape, row_major_strides(shape), False)


def _index(i, n, what):
    if not isinstance(i, int) or isinstance(i, bool):
        raise TypeError("%s must be an int, not %s" % (what, type(i).__name__))
    if not -n <= i < n:
        raise IndexError("%s %d is out of range for extent %d" % (what, i, n))
    return i % n


class Array:
    """A strided CPU array. Build one with pyref.frombuffer, pyref.zeros or pyref.from_dlpack."""

    __slots__ = ("_owner", "_data", "_offset", "_dtype", "_shape", "_strides", "_readonly", "__weakref__")

    def __init__(self, *args, **kwargs):
        raise TypeError("use pyref.frombuffer, pyref.zeros or pyref.from_dlpack to make an Array")

    @classmethod
    def _over(cls, owner, data, offset, dtype, shape, strides, readonly):
        self = object.__new__(cls)
        self._owner = owner
        self._data = data if numel(shape) else 0
        self._offset = offset if numel(shape) else 0
        self._dtype = dtype
        self._shape = tuple(shape)
        self._strides = tuple(strides)
        self._readonly = bool(readonly)
        return self

    def _view(self, shape, strides, first, readonly=None):
        """A view sharing memory; `first` is the element offset of its first element."""
        ro = self._readonly if readonly is None else readonly
        return Array._over(self._owner, self._data, self._offset + first * self.itemsize, self._dtype, shape,
                           strides, ro)

    # ---- description
    dtype = property(lambda self: self._dtype.name, doc="the element type's name, e.g. 'float32'")
    dl_dtype = property(lambda self: (int(self._dtype.code), self._dtype.bits, self._dtype.lanes),
                        doc="the element type as DLPack's (code, bits, lanes)")
    shape = property(lambda self: self._shape)
    strides = property(lambda self: self._strides, doc="strides in elements")
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: numel(self._shape))
    itemsize = property(lambda self: self._dtype.itemsize)
    readonly = property(lambda self: self._readonly)
    device = property(lambda self: "cpu")
    dl_device = property(lambda self: (DLDeviceType.kDLCPU, 0))
    address = property(lambda self: self._data + self._offset if self.size else 0,
                       doc="the address of the first element (0 for an empty array)")

    @property
    def dl_data(self):
        """(data, byte_offset) as a DLTensor holds them: (0, 0) for an empty array (LAY-04); the
        offset is never negative, so a view whose first element lies below data (a flipped
        import) moves data there."""
        if self._offset < 0:
            return self._data + self._offset, 0
        return self._data, self._offset

    def __repr__(self):
        return "pyref.Array(dtype=%r, shape=%r, strides=%r%s)" % (self.dtype, self._shape, self._strides,
                                                                  ", readonly=True" if self._readonly else "")

    def tobytes(self):
        """The elements in row-major order."""
        return gather(self.address, self._shape, self._strides, self.itemsize)

    def copy(self):
        """A writable row-major copy in new memory."""
        return compact(self._dtype, self._shape, self.tobytes())

    # ---- views
    def transpose(self, *axes):
        if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
            axes = tuple(axes[0])
        axes = axes or tuple(reversed(range(self.ndim)))
        if sorted(axes) != list(range(self.ndim)):
            raise ValueError("axes %r are not a permutation of %d dimensions" % (axes, self.ndim))
        return self._view(tuple(self._shape[a] for a in axes), tuple(self._strides[a] for a in axes), 0)

    T = property(transpose)

    def flip(self, axis):
        axis = _index(axis, self.ndim, "axis")
        n = self._shape[axis]
        strides = list(self._strides)
        strides[axis] = -strides[axis]
        return self._view(self._shape, strides, (n - 1) * self._strides[axis] if n else 0)

    def as_readonly(self):
        """A read-only view of the same memory."""
        return self._view(self._shape, self._strides, 0, readonly=True)

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > self.ndim:
            raise IndexError("%d indices for %d dimensions" % (len(key), self.ndim))
        shape, strides, first = [], [], 0
        for dim, k in enumerate(key + (slice(None),) * (self.ndim - len(key))):
            n, s = self._shape[dim], self._strides[dim]
            if isinstance(k, slice):
                start, stop, step = k.indices(n)
                length = len(range(start, stop, step))
                shape.append(length)
                strides.append(s * step)
                first += start * s if length else 0
            else:
                first += _index(k, n, "index") * s
        return self._view(shape, strides, first)

    # ---- DLPack
    @property
    def __dlpack_device__(self):
        """The bound method that answers (kDLCPU, 0); absent under the no_dlpack_device fault."""
        if _faults.active("no_dlpack_device"):
            raise AttributeError("'Array' object has no attribute '__dlpack_device__'")
        return self._dlpack_device

    def _dlpack_device(self):
        device = (DLDeviceType.kDLCPU, 0)
        return list(device) if _faults.active("device_list") else device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        return export(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


def frombuffer(buffer, dtype="float32", shape=None, *, readonly=False):
    """A new array holding a copy of `buffer` (row-major element bytes) as `shape`."""
    dt = _dtypes.dtype(dtype)
    content = bytes(buffer)
    if shape is None:
        if len(content) % dt.itemsize:
            raise ValueError("%d bytes are not a whole number of %s elements" % (len(content), dt.name))
        shape = (len(content) // dt.itemsize,)
    shape = _shape(shape)
    x = compact(dt, shape, content)
    return x.as_readonly() if readonly else x


def zeros(shape, dtype="float32"):
    dt = _dtypes.dtype(dtype)
    shape = _shape(shape)
    return compact(dt, shape, bytes(numel(shape) * dt.itemsize))


def flip(x, axis):
    return x.flip(axis)


def _shape(shape):
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    if len(shape) > MAX_NDIM:
        raise ValueError("at most %d dimensions" % MAX_NDIM)
    for n in shape:
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise ValueError("extents must be non-negative ints, not %r" % (n,))
    return shape
