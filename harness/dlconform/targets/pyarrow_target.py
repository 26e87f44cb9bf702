"""pyarrow: producer only (pyarrow.Array and pyarrow.Tensor have __dlpack__; pyarrow has no
from_dlpack). 1-d tensors are pyarrow arrays (the documented DLPack path, no nulls); other
shapes are pyarrow.Tensor objects made from numpy. Views: 1-d step-1 slices (Array.slice)."""
from .base import Target, TargetError

PA_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "float32", "float64")


class PyarrowTarget(Target):
    name = "pyarrow"
    library = "pyarrow"

    def __init__(self, name=None):
        super().__init__(name or "pyarrow")
        try:
            import numpy
            import pyarrow
        except Exception as e:  # noqa: BLE001
            raise TargetError("cannot import module 'pyarrow' with numpy (%s)" % type(e).__name__)
        self.pa = pyarrow
        self.np = numpy
        self.roles = frozenset({"producer"} if hasattr(pyarrow.Array, "__dlpack__") else ())

    def available(self):
        if not self.roles:
            return False, "pyarrow %s has no DLPack support" % self.pa.__version__
        return True, ""

    def versions(self):
        return {"pyarrow": self.pa.__version__, "numpy": self.np.__version__}

    def dtypes(self):
        return list(PA_DTYPES)

    def make(self, dtype, shape, values):
        arr = self.np.frombuffer(bytes(values), dtype=dtype).reshape(tuple(shape)).copy()
        if len(shape) == 1:
            return self.pa.array(arr)
        return self.pa.Tensor.from_numpy(arr)

    def slice(self, x, dim, start, stop, step=1):
        if not isinstance(x, self.pa.Array) or step not in (None, 1):
            return None
        start = start or 0
        stop = len(x) if stop is None else min(stop, len(x))
        return x.slice(start, max(stop - start, 0))

    def expected(self, x):
        if isinstance(x, self.pa.Array):
            return x.to_numpy(zero_copy_only=False).tobytes()
        return x.to_numpy().tobytes(order="C")

    def describe(self, y):
        raise NotImplementedError("pyarrow is not a consumer")

    def repro_setup(self):
        return ["import numpy as np", "import pyarrow as pa"]

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        src = "np.frombuffer(%s, dtype=%r).reshape(%r).copy()" % (bytes_literal(values), dtype, tuple(shape))
        if len(shape) == 1:
            return ["%s = pa.array(%s)" % (var, src)]
        return ["%s = pa.Tensor.from_numpy(%s)" % (var, src)]
