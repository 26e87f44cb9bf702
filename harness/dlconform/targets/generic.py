"""A generic target: any importable module with `from_dlpack`.

Its tensors are the kit's host tensors (dlconform.kit.HostTensor, a correct producer written in
Python) imported through `module.from_dlpack`; views are taken on the host tensor before
importing. The value oracle is a side table keyed by id() that keeps both the imported object
and its host tensor alive. Nothing here needs dlconform's C extensions, so a finding's script
stands alone with the library beside it.
"""
import ctypes
import importlib

from . import _views
from ._util import keywords_of
from .base import Target, TargetError
from . import dtypes as _dtypes
from .dtypes import EXTENDED_FLOATS, STANDARD_DTYPES, row_major_strides
from ..kit import HostTensor


class _Py_buffer(ctypes.Structure):
    _fields_ = [
        ("buf", ctypes.c_void_p), ("obj", ctypes.py_object), ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t), ("readonly", ctypes.c_int), ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p), ("shape", ctypes.POINTER(ctypes.c_ssize_t)),
        ("strides", ctypes.POINTER(ctypes.c_ssize_t)), ("suboffsets", ctypes.POINTER(ctypes.c_ssize_t)),
        ("internal", ctypes.c_void_p),
    ]


_PyBUF_RECORDS_RO = 0x0010 | 0x0008 | 0x0004  # STRIDES | ND | FORMAT

# Private prototypes: the function objects of ctypes.pythonapi are shared by the whole process.
_get_buffer = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_Py_buffer), ctypes.c_int)(
    ("PyObject_GetBuffer", ctypes.pythonapi))
_release_buffer = ctypes.PYFUNCTYPE(None, ctypes.POINTER(_Py_buffer))(("PyBuffer_Release", ctypes.pythonapi))


def buffer_info(obj):
    """Address, shape, byte strides, itemsize and readonly of an object's buffer (PEP 3118)."""
    view = _Py_buffer()
    if _get_buffer(obj, ctypes.byref(view), _PyBUF_RECORDS_RO) != 0:
        raise TypeError("no buffer")
    try:
        nd = view.ndim
        shape = (tuple(view.shape[i] for i in range(nd)) if view.shape
                 else ((view.len // max(view.itemsize, 1),) if nd else ()))
        strides = tuple(view.strides[i] for i in range(nd)) if view.strides else None
        return {"ptr": view.buf or 0, "shape": shape, "byte_strides": strides,
                "itemsize": view.itemsize, "readonly": bool(view.readonly)}
    finally:
        _release_buffer(ctypes.byref(view))


class GenericTarget(Target):
    def __init__(self, name, module=None):
        super().__init__(name)
        if module is None:
            try:
                module = importlib.import_module(name)
            except Exception as e:
                raise TargetError("cannot import module %r (%s)" % (name, type(e).__name__))
        if not callable(getattr(module, "from_dlpack", None)):
            raise TargetError("module %r has no from_dlpack" % name)
        self.module = module
        self.library = module.__name__
        self._table = {}
        self._dtypes = None
        roles = {"consumer"}
        try:
            probe = module.from_dlpack(HostTensor("float32", (2,)))
            if hasattr(probe, "__dlpack__"):
                roles.add("producer")
        except Exception:
            pass
        self.roles = frozenset(roles)

    def versions(self):
        top = self.library.split(".")[0]
        try:
            from importlib import metadata

            return {top: metadata.version(top)}
        except Exception:
            return {top: str(getattr(self.module, "__version__", "unknown"))}

    def dtypes(self):
        """The DLPack dtypes (standard, float8, float6 and float4) whose import the library takes."""
        if self._dtypes is None:
            ok = []
            for name in STANDARD_DTYPES + EXTENDED_FLOATS:
                try:
                    self.module.from_dlpack(HostTensor(name, (1,)))
                except Exception:
                    continue
                ok.append(name)
            self._dtypes = ok
        return list(self._dtypes)

    # ---- import host tensors and remember them
    def _import(self, host):
        y = self.module.from_dlpack(host)
        self._table[id(y)] = (y, host)
        return y

    def _ref_of(self, x):
        entry = self._table.get(id(x))
        if entry is None or entry[0] is not x:
            raise TargetError("%s: this object was not made by the target" % self.name)
        return entry[1]

    def make(self, dtype, shape, values):
        return self._import(HostTensor(dtype, tuple(shape), bytes(values)))

    def _view(self, x, geometry):
        r = self._ref_of(x)
        shape, strides, offset = geometry
        return self._import(r.view(shape, strides, r.byte_offset + offset * r.itemsize))

    def transpose(self, x, perm):
        r = self._ref_of(x)
        return self._view(x, _views.transpose(r.shape, r.strides, perm))

    def slice(self, x, dim, start, stop, step=1):
        r = self._ref_of(x)
        return self._view(x, _views.slice_(r.shape, r.strides, dim, start, stop, step))

    def flip(self, x, dim):
        r = self._ref_of(x)
        return self._view(x, _views.flip(r.shape, r.strides, dim))

    def readonly(self, x):
        r = self._ref_of(x)
        try:
            return self._import(HostTensor(r.dtype, r.shape, r.tobytes(), readonly=True))
        except Exception:
            return None

    def expected(self, x):
        return self._ref_of(x).tobytes()

    def from_dlpack(self, obj, **kw):
        return self.module.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        kws = keywords_of(self.module.from_dlpack)
        return kws if kws is not None else frozenset()

    def describe(self, y):
        ai = getattr(y, "__array_interface__", None)
        if isinstance(ai, dict) and "data" in ai:
            ptr, ro = ai["data"]
            shape = tuple(ai["shape"])
            itemsize = int(ai["typestr"][2:]) if ai.get("typestr") else 1
            st = ai.get("strides")
            strides = row_major_strides(shape) if st is None else tuple(s // itemsize for s in st)
            return {"ptr": ptr, "shape": shape, "strides": strides, "itemsize": itemsize, "readonly": bool(ro)}
        try:
            info = buffer_info(y)
        except TypeError:
            info = None
        if info is not None:
            itemsize = info["itemsize"]
            st = info["byte_strides"]
            strides = row_major_strides(info["shape"]) if st is None else tuple(s // itemsize for s in st)
            return {"ptr": info["ptr"], "shape": info["shape"], "strides": strides,
                    "itemsize": itemsize, "readonly": info["readonly"]}
        if hasattr(y, "__dlpack__"):
            from .. import kit

            try:
                cap = y.__dlpack__(max_version=(1, 3))
            except TypeError:
                cap = y.__dlpack__()
            d = kit.inspect(cap)
            size = _dtypes.itemsize(tuple(d["dtype"]))
            shape = tuple(d["shape"] or ())
            strides = tuple(d["strides"]) if d.get("strides") is not None else row_major_strides(shape)
            flags = d.get("flags") or 0
            return {"ptr": (d["data"] or 0) + d["byte_offset"], "shape": shape, "strides": strides,
                    "itemsize": size, "readonly": bool(flags & 1)}
        raise TypeError("%s: cannot describe %s (no __array_interface__, buffer or __dlpack__)"
                        % (self.name, type(y).__name__))
