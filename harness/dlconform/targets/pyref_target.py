"""pyref: the pure-Python reference (dlconform.pyref), optionally with a built-in fault on.

What `ref` is to the C path, pyref is to the generic one: a producer and a consumer written
in Python with ctypes, as a small library would be. It has no C exchange API.
"""
from .base import Target, TargetError


class PyrefTarget(Target):
    name = "pyref"
    library = "dlconform.pyref"
    roles = frozenset({"producer", "consumer"})

    def __init__(self, name=None, fault=None):
        super().__init__(name or ("pyref:fault=%s" % fault if fault else "pyref"))
        from .. import pyref

        self.pyref = pyref
        self.fault = fault
        if fault and fault not in pyref.FAULTS:
            raise TargetError("unknown pyref fault %r (known: %s)" % (fault, ", ".join(sorted(pyref.FAULTS))))
        pyref.set_fault(fault)

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

    def expected(self, x):
        return x.tobytes()

    def from_dlpack(self, obj, **kw):
        return self.pyref.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        return frozenset({"device", "copy"})

    def describe(self, y):
        return {"ptr": y.address, "shape": y.shape, "strides": y.strides, "itemsize": y.itemsize,
                "readonly": y.readonly, "dtype": y.dl_dtype}

    def repro_setup(self):
        lines = ["from dlconform import pyref"]
        if self.fault:
            lines.append("pyref.set_fault(%r)" % self.fault)
        return lines

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        return ["%s = pyref.frombuffer(%s, %r, %r)" % (var, bytes_literal(values), dtype, tuple(shape))]

    def native_layout(self, x):
        return tuple(x.shape), tuple(x.strides), x.address

    def repro_view(self, op, x, v, src, dst):
        if op[0] == "transpose":
            return "%s = %s.transpose(%r)" % (dst, src, tuple(op[1]))
        if op[0] == "slice":
            _, dim, start, stop, step = op
            index = ["slice(None)"] * len(x.shape)
            index[dim] = "slice(%r, %r, %r)" % (start, stop, step)
            return "%s = %s[(%s,)]" % (dst, src, ", ".join(index))
        return "%s = %s.flip(%d)" % (dst, src, op[1])

    def repro_readonly(self, src="x", var="ro"):
        return "%s = %s.as_readonly()" % (var, src)

    def repro_from_dlpack(self, arg="p"):
        return "pyref.from_dlpack(%s)" % arg

    def repro_describe(self, var="y"):
        return ("{'ptr': %(v)s.address, 'shape': %(v)s.shape, 'strides': %(v)s.strides, 'itemsize': %(v)s.itemsize, "
                "'readonly': %(v)s.readonly, 'dtype': %(v)s.dl_dtype}" % {"v": var})
