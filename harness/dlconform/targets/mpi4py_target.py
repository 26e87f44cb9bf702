"""mpi4py: consumer only, through buffer import. `from_dlpack(obj)` is `MPI.buffer(obj)`:
mpi4py asks `obj.__dlpack__` for the tensor (it prefers DLPack to the buffer protocol only
for objects without the latter, so the suite hands it DLPack-only objects) and exposes the
memory as a flat, contiguous byte buffer; it accepts only C-contiguous tensors.

A flat buffer has no shape: `describe` gives the shape, strides and itemsize the capsule
announced (recorded by `from_dlpack` from the capsule before mpi4py consumed it: mpi4py
accepts any dense layout and exposes it in memory order) with the buffer's own address, so
value checks read exactly the bytes mpi4py exposes; when `nbytes` disagrees with that shape
the flat byte count is reported instead. The buffer keeps no element type (`format` is "B",
`itemsize` 1, whatever the capsule's dtype): `describe` says so with "dtype": "bytes", so the
dtype checks judge mpi4py as a byte-buffer consumer (it forms no elements; it sizes the buffer
with the header's GetDataSize formula)."""
from .base import LibraryTarget, import_library
from .dtypes import numel, row_major_strides


class _Announced:
    """Wraps a producer: forwards both DLPack methods and notes what the capsule says."""

    def __init__(self, obj):
        self._obj = obj
        self.info = None

    def __dlpack_device__(self):
        return self._obj.__dlpack_device__()

    def __dlpack__(self, *args, **kw):
        from .. import kit

        cap = self._obj.__dlpack__(*args, **kw)
        try:
            self.info = kit.inspect(cap)
        except Exception:  # a capsule the probe cannot read is mpi4py's to judge
            self.info = None
        return cap


class Mpi4pyTarget(LibraryTarget):
    library = "mpi4py"
    lacks = "MPI.buffer"

    def __init__(self, name=None):
        super().__init__(name)
        # id(buffer) -> what its capsule announced, for the last imports (MPI.buffer takes no
        # weak references, and a strong one would keep the import, and its deleter, alive)
        self._announced = {}

    def offers(self, mpi4py):
        self.MPI = import_library("mpi4py.MPI")
        return False, hasattr(self.MPI, "buffer")

    def from_dlpack(self, obj, **kw):
        if kw:
            raise TypeError("mpi4py's buffer import takes no keywords (%s)" % ", ".join(kw))
        wrapped = _Announced(obj)
        buf = self.MPI.buffer(wrapped)
        if len(self._announced) >= 64:
            self._announced.clear()
        self._announced[id(buf)] = (wrapped.info, buf.address, buf.nbytes)
        return buf

    def describe(self, y):
        info, address, nbytes = self._announced.get(id(y), (None, None, None))
        if (address, nbytes) != (y.address, y.nbytes):  # another buffer reused the id
            info = None
        nbytes = y.nbytes
        # MPI.buffer is untyped memory: format "B", itemsize 1 for any capsule dtype
        untyped = getattr(y, "format", "B") == "B" and getattr(y, "itemsize", 1) == 1
        dtype = "bytes" if untyped else None
        if info and info.get("dtype") and (info.get("shape") is not None or info.get("ndim") == 0):
            code, bits, lanes = info["dtype"]
            itemsize = max(1, (bits * lanes + 7) // 8)
            shape = tuple(info["shape"] or ())
            # the buffer is the tensor's memory in memory order: its strides are the capsule's
            # (a dense layout, C- or otherwise ordered, starts at the lowest address)
            strides = tuple(info["strides"]) if info.get("strides") and len(info["strides"]) == len(shape) \
                else row_major_strides(shape)
            if numel(shape) * itemsize == nbytes and all(s >= 0 for s in strides):
                return {"ptr": y.address, "shape": shape, "strides": strides,
                        "itemsize": itemsize, "readonly": bool(y.readonly), "dtype": dtype}
        return {"ptr": y.address, "shape": (nbytes,), "strides": (1,), "itemsize": 1, "readonly": bool(y.readonly),
                "dtype": dtype}
