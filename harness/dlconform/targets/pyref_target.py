"""pyref: the pure-Python reference (dlconform.pyref), optionally with a built-in fault on.

What `ref` is to the C path, pyref is to the generic one: a producer and a consumer written
in Python with ctypes, as a small library would be. It has no C exchange API.
"""
from .base import ReferenceTarget


class PyrefTarget(ReferenceTarget):
    name = "pyref"
    library = "dlconform.pyref"

    def __init__(self, name=None, fault=None, role=None):
        """`fault`: one of pyref.FAULTS; `role`: producer or consumer (ReferenceTarget)."""
        from .. import pyref

        self.pyref = pyref
        super().__init__(pyref, pyref.FAULTS, name, fault, role)
        if not fault:
            pyref.set_fault(None)  # pyref's faults are per process: a clean target turns them off

    def versions(self):
        return {"dlconform.pyref": self.pyref.__version__}

    def dtypes(self):
        return list(self.pyref.DTYPES)

    def discover_dtypes(self):
        """pyref's element types, as pyref lists them; all are DLPack types."""
        return {name: (name, self.pyref.zeros((1,), name).itemsize) for name in self.pyref.DTYPES}

    def make(self, dtype, shape, values):
        return self.pyref.frombuffer(values, dtype, tuple(shape))

    def transpose(self, x, perm):
        return x.transpose(tuple(perm))

    def slice(self, x, dim, start, stop, step=1):
        index = [slice(None)] * x.ndim
        index[dim] = slice(start, stop, step)
        return x[tuple(index)]

    def flip(self, x, dim):
        return x.flip(dim)

    def readonly(self, x):
        return x.as_readonly()

    def describe(self, y):
        return {"ptr": y.address, "shape": y.shape, "strides": y.strides, "itemsize": y.itemsize,
                "readonly": y.readonly, "dtype": y.dl_dtype}

    def native_layout(self, x):
        return tuple(x.shape), tuple(x.strides), x.address
