"""numpy: producer (ndarray.__dlpack__) and consumer (numpy.from_dlpack)."""
from ._util import index, keywords_of, version_tuple
from .base import Target, TargetError

NUMPY_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "complex64", "complex128",
)


class NumpyTarget(Target):
    name = "numpy"
    library = "numpy"

    def __init__(self, name=None):
        super().__init__(name or "numpy")
        try:
            import numpy
        except ImportError as e:
            raise TargetError("cannot import module 'numpy' (%s)" % type(e).__name__)
        self.np = numpy
        roles = set()
        if hasattr(numpy.ndarray, "__dlpack__"):
            roles.add("producer")
        if hasattr(numpy, "from_dlpack"):
            roles.add("consumer")
        self.roles = frozenset(roles)

    def available(self):
        if not self.roles:
            return False, "numpy %s has no DLPack support" % self.np.__version__
        return True, ""

    def versions(self):
        return {"numpy": self.np.__version__}

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
            from .base import row_major_strides

            strides = row_major_strides(shape)
        else:
            strides = tuple(s // itemsize if itemsize else 0 for s in ai["strides"])
        ptr, readonly = ai["data"]
        return {"ptr": ptr, "shape": shape, "strides": strides, "itemsize": itemsize, "readonly": bool(readonly)}

    def repro_setup(self):
        return ["import numpy as np"]

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        return ["%s = np.frombuffer(%s, dtype=%r).reshape(%r).copy()" % (var, bytes_literal(values), dtype, tuple(shape))]
