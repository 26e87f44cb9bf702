"""numpy: producer (ndarray.__dlpack__) and consumer (numpy.from_dlpack)."""
from ._util import NumpyLikeViews, keywords_of, version_tuple
from .base import LibraryTarget
from .dtypes import DTYPES, by_dlpack_order, row_major_strides

#: a sized stand-in for each flexible or generic kind numpy has (its scalar types have none)
_SIZED = {"S": "S4", "U": "U1", "V": "V4", "M": "datetime64[s]", "m": "timedelta64[s]"}


class NumpyTarget(NumpyLikeViews, LibraryTarget):
    library = "numpy"
    np = property(lambda self: self.module)

    def offers(self, np):
        return hasattr(np.ndarray, "__dlpack__"), hasattr(np, "from_dlpack")

    _found = None  # discover_dtypes(), once asked

    def discover_dtypes(self):
        """numpy's scalar types (np.sctypeDict): booleans, integers, IEEE floats and complex
        map to DLPack; longdouble, clongdouble, datetime, timedelta, bytes, str, void and
        object have no DLPack type."""
        if self._found is None:
            np = self.np
            found = {}
            for scalar in set(np.sctypeDict.values()):
                dt = np.dtype(scalar)
                dt = np.dtype(_SIZED[dt.kind]) if dt.kind in _SIZED else dt
                name = "bool" if dt.kind == "b" else dt.name
                dlpack = name if name in DTYPES and dt.kind in "biufc" and dt.isnative else None
                found[str(dt) if dt.kind in _SIZED else name] = (dlpack, dt.itemsize)
            self._found = dict(sorted(found.items(), key=lambda kv: by_dlpack_order(*kv)))
        return dict(self._found)

    def dtypes(self):
        return [d for d, (dlpack, _) in self.discover_dtypes().items() if dlpack]

    def _dtype(self, name):
        return self.np.dtype("bool" if name == "bool" else name)

    def make(self, dtype, shape, values):
        np = self.np
        if self._dtype(dtype).kind == "O":
            return np.full(tuple(shape), None, dtype=object)  # objects are not bytes
        arr = np.frombuffer(bytes(values), dtype=self._dtype(dtype))
        return arr.reshape(tuple(shape)).copy()

    def readonly(self, x):
        v = x.view()
        v.setflags(write=False)
        return v

    def readonly_ways(self, x):
        """A view with the write flag cleared, an array over an immutable bytes object, a
        broadcast view and an as_strided view made unwritable."""
        np = self.np
        ways = [
            ("a view with setflags(write=False)", self.readonly(x)),
            ("np.frombuffer over bytes", np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)),
            ("np.broadcast_to", np.broadcast_to(x, x.shape)),
            ("as_strided(writeable=False)", np.lib.stride_tricks.as_strided(x, writeable=False)),
        ]
        return [w for w in ways if not w[1].flags.writeable]

    def expected(self, x):
        return x.tobytes(order="C")

    def from_dlpack(self, obj, **kw):
        return self.np.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        if "consumer" not in self.roles:
            return frozenset()
        kws = keywords_of(self.np.from_dlpack)
        if kws is None:
            kws = frozenset({"device", "copy"}) if version_tuple(self.np.__version__) >= (2, 1) else frozenset()
        return kws

    def describe(self, y):
        ai = y.__array_interface__
        itemsize = y.dtype.itemsize
        shape = tuple(ai["shape"])
        if ai.get("strides") is None:
            strides = row_major_strides(shape)
        else:
            strides = tuple(s // itemsize if itemsize else 0 for s in ai["strides"])
        ptr, readonly = ai["data"]
        return {"ptr": ptr, "shape": shape, "strides": strides, "itemsize": itemsize, "readonly": bool(readonly)}

    def native_layout(self, x):
        it = x.dtype.itemsize
        return tuple(x.shape), tuple(s // it for s in x.strides), x.__array_interface__["data"][0]

    def dtype_kind(self, y):
        return y.dtype.kind

    def byteswapped(self, x):
        return x.astype(x.dtype.newbyteorder())
