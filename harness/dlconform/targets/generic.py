"""A generic target: any importable module with `from_dlpack`.

Its tensors are reference tensors imported through `module.from_dlpack`; views are taken on the
reference tensor before importing. The value oracle is a side table keyed by id() that keeps
both the imported object and its reference tensor alive.
"""
import ctypes
import importlib

from . import _inline
from . import _views
from ._util import keywords_of
from .base import Target, TargetError
from . import dtypes as _dtypes
from .dtypes import row_major_strides
from .ref import _import_ref


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
        shape = tuple(view.shape[i] for i in range(nd)) if view.shape else ((view.len // max(view.itemsize, 1),) if nd else ())
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
        self._ref = _import_ref()
        self._table = {}
        self._dtypes = None
        roles = {"consumer"}
        try:
            probe = module.from_dlpack(self._ref.Tensor("float32", (2,)))
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
        if self._dtypes is None:
            from .ref import ref_dtypes

            names = ref_dtypes(self._ref)
            ok = []
            for name in names:
                try:
                    self.module.from_dlpack(self._ref.Tensor(name, (1,)))
                except Exception:
                    continue
                ok.append(name)
            self._dtypes = ok
        return list(self._dtypes)

    # ---- import ref tensors and remember them
    def _import(self, ref_tensor):
        y = self.module.from_dlpack(ref_tensor)
        self._table[id(y)] = (y, ref_tensor)
        return y

    def _ref_of(self, x):
        entry = self._table.get(id(x))
        if entry is None or entry[0] is not x:
            raise TargetError("%s: this object was not made by the target" % self.name)
        return entry[1]

    def make(self, dtype, shape, values):
        return self._import(self._ref.Tensor(dtype, tuple(shape), data=bytes(values)))

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
            return self._import(self._ref.Tensor(r.dtype, tuple(r.shape), data=r.tobytes(), readonly=True))
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
            from .. import _probe

            try:
                cap = y.__dlpack__(max_version=(1, 3))
            except TypeError:
                cap = y.__dlpack__()
            d = _probe.inspect(cap)
            size = _dtypes.itemsize(tuple(d["dtype"]))
            shape = tuple(d["shape"] or ())
            strides = tuple(d["strides"]) if d.get("strides") is not None else row_major_strides(shape)
            flags = d.get("flags") or 0
            return {"ptr": (d["data"] or 0) + d["byte_offset"], "shape": shape, "strides": strides,
                    "itemsize": size, "readonly": bool(flags & 1)}
        raise TypeError("%s: cannot describe %s (no __array_interface__, buffer or __dlpack__)"
                        % (self.name, type(y).__name__))

    # ---- reproducers: the module, Python and ctypes only (dlconform/producers.py, which a
    # standalone script inlines after the kit, and _ref.Forge, the kit's there). A tensor is
    # what make() and the views import: a producer over forged capsules holding what the ref
    # tensor would export (the same dtype, shape, row-major strides, NULL data when zero-size
    # (LAY-04), NULL shape and strides for ndim 0), negotiating legacy or versioned as it does;
    # a view is a forge over the same memory as its base with the ref view's shape, strides
    # (elements) and byte_offset. The setup lines define describe() as _gen_describe.
    def repro_setup(self):
        return (["from dlconform.producers import RecordingProducer, forges", "import importlib",
                 "_gen_mod = importlib.import_module(%r)" % self.library]
                + _inline.lines(_inline.READER) + _inline.lines(GEN_HELPERS))

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        return ["%s = _gen_make(%r, %r, %s)" % (var, _dtypes.DTYPES[dtype], tuple(shape), bytes_literal(values))]

    def repro_view(self, op, x, v, src, dst):
        r = self._ref_of(v)
        return "%s = _gen_view(%s, %r, %r, %d)" % (dst, src, tuple(r.shape), tuple(r.strides), r.byte_offset)

    def repro_readonly(self, src="x", var="ro"):
        return "%s = _gen_readonly(%s)" % (var, src)

    def repro_from_dlpack(self, arg="p"):
        return "_gen_mod.from_dlpack(%s)" % arg

    def repro_describe(self, var="y"):
        return "_gen_describe(%s)" % var

    def repro_unexportable(self, var="u"):
        return ["%s = None  # the generic target makes no unexportable tensors" % var]

    def repro_sparse(self, var="s"):
        return ["%s = None  # the generic target makes no sparse tensors" % var]

    def repro_byteswapped(self, src="x", var="y"):
        return ["%s = None  # the generic target makes no byte-swapped tensors" % var]


#: the reproducers' tensors and describe() (after _inline.READER, RecordingProducer and forges).
#: _gen_made maps id(tensor) to (tensor, producer, dtype, data address, byte_offset, shape,
#: strides), keeping both alive as the adapter's side table does: the imported tensor views the
#: producer's memory. _gen_make is make(), _gen_view _view(), _gen_readonly readonly(): a
#: compact copy of x's elements (_gen_gather, row-major) whose versioned export carries
#: READ_ONLY (FLG-02) and whose legacy export raises ref's BufferError. As ref's, an export
#: asked for copy=True is a compact row-major copy in memory of its own, flagged IS_COPIED when
#: versioned and never READ_ONLY (CPY-01..03). _gen_describe is GenericTarget.describe:
#: __array_interface__, else the PEP 3118 buffer, else the fields of a re-export's capsule.
GEN_HELPERS = '''_gen_made = {}
def _gen_gather(dtype, shape, strides, data, byte_offset):
    size, count = max(1, (dtype[1] * dtype[2] + 7) // 8), 1
    for n in shape:
        count *= n
    values = []
    for i in range(count):
        at, rest = 0, i
        for n, s in zip(reversed(shape), reversed(strides)):
            at, rest = at + (rest % n) * s, rest // n
        values.append(ctypes.string_at(data + byte_offset + at * size, size))
    return b''.join(values)
class _gen_Producer(RecordingProducer):
    readonly = False
    def __dlpack__(self, *args, **kw):
        cap = RecordingProducer.__dlpack__(self, *args, **kw)
        if kw.get('copy') is True:
            i = _dlp_fields(cap)
            shape = tuple(i['shape'] or ())
            empty = any(n == 0 for n in shape)
            fill = b'' if empty else _gen_gather(i['dtype'], shape, i['strides'] or _dlp_row_major(shape),
                                                 i['data'], i['byte_offset'])
            f = _ref.Forge(dtype=i['dtype'], shape=shape, strides=_dlp_row_major(shape) if shape else None,
                           data='null' if empty else 'alloc', fill=fill, shape_null=not shape,
                           versioned=self.last_kind == 'versioned', flags=2)
            self.copies = getattr(self, 'copies', []) + [f]
            return f.capsule()
        if self.readonly and self.last_kind == 'legacy':
            raise BufferError('a read-only tensor needs the READ_ONLY flag: ask for max_version >= (1, 0)')
        return cap
class _gen_ReadOnly(_gen_Producer):
    readonly = True
def _gen_import(dtype, shape, strides, data, byte_offset, fill=None, readonly=False):
    empty = any(n == 0 for n in shape)
    kw = dict(dtype=dtype, shape=shape, strides=strides if shape else None, byte_offset=byte_offset,
              shape_null=not shape, flags=1 if readonly else 0)
    kw['data'] = 'null' if empty else 'alloc' if fill is not None else data or 'null'
    if fill is not None:
        kw['fill'] = fill
    p = (_gen_ReadOnly if readonly else _gen_Producer)(forges(**kw))
    y = _gen_mod.from_dlpack(p)
    if fill is not None and not empty and p.last_kind is not None:
        data = p.forges[p.last_kind].buffer_address
    _gen_made[id(y)] = (y, p, dtype, data, byte_offset, shape, strides)
    return y
def _gen_make(dtype, shape, values, readonly=False):
    return _gen_import(dtype, shape, _dlp_row_major(shape), None, 0, fill=values, readonly=readonly)
def _gen_view(x, shape, strides, byte_offset):
    _, _, dtype, data, _, _, _ = _gen_made[id(x)]
    return _gen_import(dtype, shape, strides, data, byte_offset)
def _gen_readonly(x):
    try:
        _, _, dtype, data, byte_offset, shape, strides = _gen_made[id(x)]
        return _gen_make(dtype, shape, _gen_gather(dtype, shape, strides, data, byte_offset), readonly=True)
    except Exception:
        return None
class _gen_Py_buffer(ctypes.Structure):
    _fields_ = [('buf', ctypes.c_void_p), ('obj', ctypes.py_object), ('len', ctypes.c_ssize_t),
                ('itemsize', ctypes.c_ssize_t), ('readonly', ctypes.c_int), ('ndim', ctypes.c_int),
                ('format', ctypes.c_char_p), ('shape', ctypes.POINTER(ctypes.c_ssize_t)),
                ('strides', ctypes.POINTER(ctypes.c_ssize_t)), ('suboffsets', ctypes.POINTER(ctypes.c_ssize_t)),
                ('internal', ctypes.c_void_p)]
_gen_get_buffer = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_gen_Py_buffer), ctypes.c_int)(
    ('PyObject_GetBuffer', ctypes.pythonapi))
_gen_release_buffer = ctypes.PYFUNCTYPE(None, ctypes.POINTER(_gen_Py_buffer))(('PyBuffer_Release', ctypes.pythonapi))
def _gen_describe(y):
    ai = getattr(y, '__array_interface__', None)
    if isinstance(ai, dict) and 'data' in ai:
        ptr, ro = ai['data']
        shape = tuple(ai['shape'])
        itemsize = int(ai['typestr'][2:]) if ai.get('typestr') else 1
        st = ai.get('strides')
        strides = _dlp_row_major(shape) if st is None else tuple(s // itemsize for s in st)
        return {'ptr': ptr, 'shape': shape, 'strides': strides, 'itemsize': itemsize, 'readonly': bool(ro)}
    view = _gen_Py_buffer()
    try:
        got = _gen_get_buffer(y, ctypes.byref(view), 0x1c) == 0
    except TypeError:
        got = False
    if got:
        try:
            nd, itemsize = view.ndim, view.itemsize
            shape = (tuple(view.shape[i] for i in range(nd)) if view.shape
                     else ((view.len // max(itemsize, 1),) if nd else ()))
            st = tuple(view.strides[i] for i in range(nd)) if view.strides else None
            strides = _dlp_row_major(shape) if st is None else tuple(s // itemsize for s in st)
            return {'ptr': view.buf or 0, 'shape': shape, 'strides': strides, 'itemsize': itemsize,
                    'readonly': bool(view.readonly)}
        finally:
            _gen_release_buffer(ctypes.byref(view))
    if hasattr(y, '__dlpack__'):
        try:
            cap = y.__dlpack__(max_version=(1, 3))
        except TypeError:
            cap = y.__dlpack__()
        d = _dlp_fields(cap)
        shape = tuple(d['shape'] or ())
        strides = tuple(d['strides']) if d.get('strides') is not None else _dlp_row_major(shape)
        return {'ptr': (d['data'] or 0) + d['byte_offset'], 'shape': shape, 'strides': strides,
                'itemsize': (d['dtype'][1] * d['dtype'][2] + 7) // 8, 'readonly': bool((d.get('flags') or 0) & 1)}
    raise TypeError('cannot describe %s (no __array_interface__, buffer or __dlpack__)' % type(y).__name__)'''
