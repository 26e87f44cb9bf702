"""tvm_ffi: producer (tvm_ffi.Tensor.__dlpack__) and consumer (tvm_ffi.from_dlpack).

tvm_ffi has no array constructors of its own: `make` imports a dlconform._ref tensor with
tvm_ffi.from_dlpack, so the tensor under test is a tvm_ffi.Tensor that owns the memory through
DLPack. It has no view operations: transpose and slice import a _ref view of the tensor's own
export."""
from .base import LibraryTarget
from .dtypes import STANDARD_DTYPES

TVM_DTYPES = tuple(d for d in STANDARD_DTYPES if not d.startswith("complex"))


class TvmFfiTarget(LibraryTarget):
    library = "tvm_ffi"
    tvm = property(lambda self: self.module)

    def offers(self, tvm_ffi):
        return hasattr(getattr(tvm_ffi, "Tensor", None), "__dlpack__"), hasattr(tvm_ffi, "from_dlpack")

    def dtypes(self):
        return list(TVM_DTYPES)

    def _source(self, dtype, shape, values):
        from .. import _ref

        return _ref.Tensor(dtype, tuple(shape), data=bytes(values))

    def make(self, dtype, shape, values):
        return self.tvm.from_dlpack(self._source(dtype, shape, values))

    def _view(self, x, geometry):
        """A strided tvm_ffi tensor over x's memory: x goes through the reference consumer,
        which views it, then the view is imported back; the capsules keep the memory alive."""
        from .. import _ref

        r = _ref.from_dlpack(x)
        shape, strides, offset = geometry
        return self.tvm.from_dlpack(r.view(shape, strides, r.byte_offset + offset * r.itemsize))

    def transpose(self, x, perm):
        from . import _views
        from .. import _ref

        r = _ref.from_dlpack(x)
        return self._view(x, _views.transpose(r.shape, r.strides, perm))

    def slice(self, x, dim, start, stop, step=1):
        from . import _views
        from .. import _ref

        if step is not None and step < 0:
            return None
        r = _ref.from_dlpack(x)
        return self._view(x, _views.slice_(r.shape, r.strides, dim, start, stop, step))

    def expected(self, x):
        from .. import kit

        return kit.read_elements(x.__dlpack__())

    def from_dlpack(self, obj, **kw):
        return self.tvm.from_dlpack(obj, **kw)

    def describe(self, y):
        """Read through y's own export (tvm_ffi tensors have no data-pointer attribute)."""
        from .. import kit

        info = kit.inspect(y.__dlpack__(max_version=(1, 3)))
        return {"ptr": (info["data"] or 0) + info["byte_offset"], "shape": tuple(info["shape"] or ()),
                "strides": tuple(info["strides"] or ()), "itemsize": max(1, info["dtype"][1] * info["dtype"][2] // 8),
                "readonly": bool((info.get("flags") or 0) & 1),
                # the DLDataType the tvm_ffi tensor holds (it keeps the imported one as is)
                "dtype": tuple(info["dtype"])}
