"""tvm_ffi: producer (tvm_ffi.Tensor.__dlpack__) and consumer (tvm_ffi.from_dlpack).

tvm_ffi has no array constructors of its own: `make` imports a dlconform._ref tensor with
tvm_ffi.from_dlpack, so the tensor under test is a tvm_ffi.Tensor that owns the memory through
DLPack. It has no view operations: transpose and slice import a _ref view of the tensor's own
export."""
from . import _inline
from .base import LibraryTarget
from .dtypes import DTYPES, STANDARD_DTYPES

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
        from .. import _probe

        return _probe.read_elements(x.__dlpack__())

    def from_dlpack(self, obj, **kw):
        return self.tvm.from_dlpack(obj, **kw)

    def describe(self, y):
        """Read through y's own export (tvm_ffi tensors have no data-pointer attribute)."""
        from .. import _probe

        info = _probe.inspect(y.__dlpack__(max_version=(1, 3)))
        return {"ptr": (info["data"] or 0) + info["byte_offset"], "shape": tuple(info["shape"] or ()),
                "strides": tuple(info["strides"] or ()), "itemsize": max(1, info["dtype"][1] * info["dtype"][2] // 8),
                "readonly": bool((info.get("flags") or 0) & 1),
                # the DLDataType the tvm_ffi tensor holds (it keeps the imported one as is)
                "dtype": tuple(info["dtype"])}

    # ---- reproducers: tvm_ffi and ctypes only. tvm_ffi has no constructors and no views, so
    # the setup lines define _tvm_from (and the capsule reader _dlp_fields, targets/_inline.py):
    # a tensor imported from a versioned capsule laid out as make() and the views import them
    # from _ref (256-byte aligned data, strides never NULL for ndim > 0, NULL shape and strides
    # for ndim 0, NULL data when zero-size, version 1.3, flags 0), whose deleter lets go of the
    # memory and the tensor it views.
    def repro_setup(self):
        return ["import tvm_ffi"] + _inline.lines(_inline.READER) + _inline.lines(TVM_HELPERS)

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        return ["%s = _tvm_make(%r, %r, %s)" % (var, DTYPES[dtype], tuple(shape), bytes_literal(values))]

    def repro_view(self, op, x, v, src, dst):
        """`dst` over `src`'s memory with v's shape and strides, as _view makes it: the same
        data pointer, byte_offset moved to v's first element."""
        if v is None:
            return "%s = None  # tvm_ffi has no %s view of this tensor" % (dst, op[0])
        d, base = self.describe(v), self.describe(x)
        return "%s = _tvm_view(%s, %r, %r, %d)" % (dst, src, d["shape"], d["strides"], d["ptr"] - base["ptr"])

    def repro_readonly(self, src="x", var="ro"):
        return "%s = None  # tvm_ffi tensors have no read-only views" % var

    def repro_from_dlpack(self, arg="p"):
        return "tvm_ffi.from_dlpack(%s)" % arg

    def repro_describe(self, var="y"):
        return "_tvm_describe(%s)" % var

    def repro_unexportable(self, var="u"):
        return ["%s = None  # every tvm_ffi tensor exports" % var]

    def repro_sparse(self, var="s"):
        return ["%s = None  # tvm_ffi has no sparse tensors" % var]

    def repro_byteswapped(self, src="x", var="y"):
        return ["%s = None  # tvm_ffi has no byte-swapped tensors" % var]


#: the reproducers' tvm_ffi tensors (after _inline.READER). _tvm_from(dtype, shape, strides,
#: data, byte_offset, owner) imports a DLManagedTensorVersioned over `data` that keeps `owner`
#: alive until its deleter runs; the deleter's trampoline is never freed (a tensor may be
#: released as the interpreter exits). _tvm_make copies element bytes into a fresh 256-byte
#: aligned buffer; _tvm_view views x's own export; _tvm_describe is describe().
TVM_HELPERS = '''_tvm_live = {}
def _tvm_release(address, live=_tvm_live):
    live.pop(address, None)
_tvm_deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_tvm_release)
ctypes.pythonapi.Py_IncRef(ctypes.py_object(_tvm_deleter))
_tvm_name = ctypes.c_char_p(b'dltensor_versioned')
_tvm_capsule = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ('PyCapsule_New', ctypes.pythonapi))
def _tvm_from(dtype, shape, strides, data, byte_offset, owner):
    m = _dlp_Versioned(major=1, minor=3, flags=0)
    dims = (ctypes.c_int64 * max(2 * len(shape), 1))(*shape, *strides)
    t = m.dl_tensor
    t.data, t.device_type, t.device_id, t.ndim = data, 1, 0, len(shape)
    t.code, t.bits, t.lanes = dtype
    t.byte_offset = byte_offset
    if shape:
        t.shape, t.strides = ctypes.addressof(dims), ctypes.addressof(dims) + 8 * len(shape)
    m.deleter = ctypes.cast(_tvm_deleter, ctypes.c_void_p).value
    _tvm_live[ctypes.addressof(m)] = (m, dims, owner)
    return tvm_ffi.from_dlpack(_tvm_capsule(ctypes.addressof(m), _tvm_name, None))
def _tvm_make(dtype, shape, values):
    raw = ctypes.create_string_buffer(max(len(values), 1) + 256)
    data = (ctypes.addressof(raw) + 255) & ~255
    ctypes.memmove(data, values, len(values))
    empty = any(n == 0 for n in shape)
    return _tvm_from(dtype, shape, _dlp_row_major(shape), None if empty else data, 0, raw)
def _tvm_view(x, shape, strides, offset):
    i = _dlp_fields(x.__dlpack__(max_version=(1, 3)))
    empty = any(n == 0 for n in shape)
    return _tvm_from(i['dtype'], shape, strides, None if empty else i['data'] or None, i['byte_offset'] + offset, x)
def _tvm_describe(y):
    i = _dlp_fields(y.__dlpack__(max_version=(1, 3)))
    return {'ptr': (i['data'] or 0) + i['byte_offset'], 'shape': tuple(i['shape'] or ()),
            'strides': tuple(i['strides'] or ()), 'itemsize': max(1, i['dtype'][1] * i['dtype'][2] // 8),
            'readonly': bool((i['flags'] or 0) & 1), 'dtype': tuple(i['dtype'])}'''
