"""numpy: producer (ndarray.__dlpack__) and consumer (numpy.from_dlpack)."""
from ._util import index, index_text, keywords_of, version_tuple
from .base import LibraryTarget
from .dtypes import STANDARD_DTYPES, row_major_strides

NUMPY_DTYPES = tuple(d for d in STANDARD_DTYPES if d not in ("bfloat16", "complex32"))


class NumpyTarget(LibraryTarget):
    library = "numpy"
    np = property(lambda self: self.module)

    def offers(self, np):
        return hasattr(np.ndarray, "__dlpack__"), hasattr(np, "from_dlpack")

    def dtypes(self):
        return [d for d in NUMPY_DTYPES if hasattr(self.np, d if d != "bool" else "bool_")]

    def _dtype(self, name):
        return self.np.dtype("bool" if name == "bool" else name)

    def make(self, dtype, shape, values):
        np = self.np
        arr = np.frombuffer(bytes(values), dtype=self._dtype(dtype))
        return arr.reshape(tuple(shape)).copy()

    def transpose(self, x, perm):
        return x.transpose(tuple(perm))

    def slice(self, x, dim, start, stop, step=1):
        return x[index(x.ndim, dim, slice(start, stop, step))]

    def flip(self, x, dim):
        return self.np.flip(x, dim)

    def readonly(self, x):
        v = x.view()
        v.setflags(write=False)
        return v

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

    def repro_setup(self):
        return super().repro_setup() + ["import numpy as np"]

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        return ["%s = np.frombuffer(%s, dtype=%r).reshape(%r).copy()" % (var, bytes_literal(values), dtype, tuple(shape))]

    def repro_view(self, op, x, v, src, dst):
        if op[0] == "transpose":
            return "%s = %s.transpose(%r)" % (dst, src, tuple(op[1]))
        if op[0] == "slice":
            return "%s = %s[%s]" % (dst, src, index_text(x.ndim, *op[1:]))
        return "%s = np.flip(%s, %d)" % (dst, src, op[1])

    def repro_readonly(self, src="x", var="ro"):
        return "%s = %s.view(); %s.setflags(write=False)" % (var, src, var)

    def repro_from_dlpack(self, arg="p"):
        return "np.from_dlpack(%s)" % arg

    def repro_describe(self, var="y"):
        return ("{'ptr': %(v)s.__array_interface__['data'][0], 'shape': %(v)s.shape, 'strides': tuple(s // %(v)s.itemsize "
                "for s in %(v)s.strides) if %(v)s.itemsize else (0,) * %(v)s.ndim, 'itemsize': %(v)s.itemsize, "
                "'readonly': not %(v)s.flags.writeable}" % {"v": var})

    def repro_byteswapped(self, src="x", var="y"):
        return ["%s = %s.astype(%s.dtype.newbyteorder())" % (var, src, src)]
