"""nanobind: nb::ndarray as consumer (its type caster) and producer (its nb::ndarray export).

nanobind is a C++ binding layer, not a Python library: what is under test is what any
extension built with it does. The glue module `dlconform._nanobind` (probes/nanobind/module.cpp,
built by `make build` where Debian's nanobind-dev is installed) is one such extension.

Which behaviour is whose:
- nanobind's: everything the suites check. The consumer side is nanobind's caster for an
  `nb::ndarray<>` argument (`take`): it calls `__dlpack__(max_version=...)`, retries without
  keywords on TypeError, falls back to the buffer protocol, accepts a bare capsule, renames the
  capsule it keeps and rejects what it cannot take with a TypeError from overload resolution.
  The producer side is the `nanobind.nb_ndarray` object an `nb::ndarray<nb::array_api>` return
  value becomes: its `__dlpack__`, `__dlpack_device__`, capsule names, versions, flags and
  deleters.
- the glue's: which memory a view covers (an address, shape, strides and dtype it passes
  through unchecked, computed here from the tensor's own export), and read-only as a
  compile-time choice (`view_ro`: `nb::ndarray<nb::array_api, nb::ro>`). Memory is the glue's
  `Buffer` (CPU only: the glue has no device memory, so device checks skip).
"""
from .base import Target, TargetError
from .dtypes import DTYPES, STANDARD_DTYPES, SUBBYTE, row_major_strides

GLUE = "dlconform._nanobind"


def _glue():
    """dlconform._nanobind, or a TargetError that says how it is built."""
    try:
        from .. import _nanobind
        return _nanobind
    except ImportError as e:
        raise TargetError("cannot import module %r (%s; `make build` builds it where nanobind-dev "
                          "is installed)" % (GLUE, type(e).__name__))


class NanobindTarget(Target):
    name = library = "nanobind"
    roles = frozenset({"producer", "consumer"})

    def __init__(self, name=None):
        super().__init__(name or "nanobind")
        self.nb = _glue()

    def versions(self):
        return {"nanobind": ".".join(str(n) for n in self.nb.NANOBIND_VERSION)}

    def dtypes(self):
        return list(STANDARD_DTYPES)

    def _code(self, dtype):
        """(code, bits, lanes) of a dtype name, as dlpack.h's table has it (kit.abi: the reference
        tensor spells each the same; asking it made a standalone script need dlconform._ref)."""
        if dtype not in DTYPES:
            raise TargetError("nanobind: no dtype %r" % (dtype,))
        return tuple(DTYPES[dtype])

    # ---- producer
    def make(self, dtype, shape, values):
        if dtype in SUBBYTE:
            # nanobind has no sub-byte element type of its own: the glue would only pass bytes
            # laid out by us, and DT-09 would judge the glue, not nanobind
            raise TargetError("nanobind makes no %s tensors of its own" % dtype)
        buf = self.nb.Buffer(bytes(values))
        return self.nb.view(buf, buf.address, list(shape), list(row_major_strides(shape)), *self._code(dtype))

    def _geometry(self, x):
        from .. import kit

        info = kit.inspect(x.__dlpack__(max_version=(1, 3)))
        shape = tuple(info["shape"] or ())
        strides = tuple(info["strides"]) if info["strides"] is not None else row_major_strides(shape)
        return info, shape, strides

    def _view(self, x, geometry, readonly=False):
        info, _, _ = self._geometry(x)
        shape, strides, offset = geometry
        item = max(1, info["dtype"][1] * info["dtype"][2] // 8)
        address = (info["data"] or 0) + info["byte_offset"] + offset * item
        make = self.nb.view_ro if readonly else self.nb.view
        return make(x, address, list(shape), list(strides), *info["dtype"])

    def transpose(self, x, perm):
        from . import _views

        _, shape, strides = self._geometry(x)
        return self._view(x, _views.transpose(shape, strides, perm))

    def slice(self, x, dim, start, stop, step=1):
        from . import _views

        _, shape, strides = self._geometry(x)
        return self._view(x, _views.slice_(shape, strides, dim, start, stop, step))

    def flip(self, x, dim):
        from . import _views

        _, shape, strides = self._geometry(x)
        return self._view(x, _views.flip(shape, strides, dim))

    def readonly(self, x):
        _, shape, strides = self._geometry(x)
        return self._view(x, (shape, strides, 0), readonly=True)

    def expected(self, x):
        from .. import kit

        return kit.read_elements(x.__dlpack__())

    # ---- consumer
    def from_dlpack(self, obj, **kw):
        """nanobind's caster takes no keywords: consumer_keywords() is empty, so none come."""
        return self.nb.take(obj, **kw)

    def describe(self, y):
        code, bits, lanes = y.dtype
        # an nb::ndarray<> argument is writable: nanobind's caster refuses READ_ONLY capsules for it
        return {"ptr": y.data, "shape": tuple(y.shape), "strides": tuple(y.strides),
                "itemsize": max(1, bits * lanes // 8), "readonly": False, "dtype": (code, bits, lanes)}
