"""pyarrow: producer only (pyarrow.Array and pyarrow.Tensor have __dlpack__; pyarrow has no
from_dlpack). 1-d tensors are pyarrow arrays (the documented DLPack path, no nulls); other
shapes are pyarrow.Tensor objects made from numpy. Views: 1-d step-1 slices (Array.slice)."""
from .base import LibraryTarget, import_library
from .dtypes import STANDARD_DTYPES

PA_DTYPES = tuple(d for d in STANDARD_DTYPES if d not in ("bool", "bfloat16") and not d.startswith("complex"))


class PyarrowTarget(LibraryTarget):
    library = "pyarrow"
    pa = property(lambda self: self.module)

    def offers(self, pa):
        self.np = import_library("numpy")  # make() goes through numpy arrays
        return hasattr(pa.Array, "__dlpack__"), False

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
