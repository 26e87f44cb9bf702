"""The standalone kit: what a bug report's reproducer uses in place of dlconform.

A pure-Python subset of dlconform's `_ref.Forge`, `_probe.inspect/extent/read_elements` and
`_probe.consume/instrument/rename`, built on ctypes with the structs of dlpack.h v1.3 (LP64
layout). A report inlines this file as it is, after dlconform/snippet.py (whose elements() it
reads with), and dlconform/producers.py after it where the reproducer uses those producers
(they forge with the kit's `_ref.Forge`), so a reproducer body runs on it unchanged and never
imports dlconform; only when imported as a module does it take elements() from
dlconform.snippet.
"""
import ctypes
import types


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _Tensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32), ("dtype", _DType),
                ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


#: void (*deleter)(DLManagedTensor[Versioned] *self)
_Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Managed(ctypes.Structure):
    _fields_ = [("dl_tensor", _Tensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class _ManagedVersioned(ctypes.Structure):
    _fields_ = [("version", _Version), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _Tensor)]


# Private function objects: the process under test keeps its own ctypes.pythonapi prototypes.
_api = ctypes.pythonapi
_Destructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, _Destructor)(
    ("PyCapsule_New", _api))
_name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(("PyCapsule_GetName", _api))
_pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_GetPointer", _api))
#: where a PyCapsule keeps its pointer and its name, after PyObject_HEAD (CPython 3, LP64). A
#: destructor reads them there: it may run with an exception pending, which a C-API call made
#: through ctypes would raise as its own.
_CAPSULE_POINTER, _CAPSULE_NAME = 2 * ctypes.sizeof(ctypes.c_void_p), 3 * ctypes.sizeof(ctypes.c_void_p)

LEGACY, VERSIONED = b"dltensor", b"dltensor_versioned"

_err_occurred = ctypes.PYFUNCTYPE(ctypes.c_void_p)(("PyErr_Occurred", _api))
#: exceptions that were pending when a kit callback (deleter, destructor) began. CPython would
#: turn one into an unraisable SystemError as the callback returns, and the consumer that set
#: it would seem to fail without an exception: the callback takes it here instead, and the
#: script's attempt() gives it back to the refusal it belongs to.
LOST = []


#: Kit callbacks bind what they use as default arguments: a library may call a deleter or a
#: destructor while the interpreter shuts down, after the script's globals are cleared.
def _take_pending(_occurred=_err_occurred, _lost=LOST):
    """Moves an exception pending at a callback's start into LOST (a Python-API call through
    ctypes raises what is pending once it returns)."""
    try:
        _occurred()
    except BaseException as e:  # noqa: BLE001 - whatever the consumer had set
        _lost.append(e)


def _itemsize(dtype):
    return (dtype[1] * dtype[2] + 7) // 8


def _row_major(shape):
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))


def _extent(shape, strides, itemsize):
    """{"status", "zero_size", "numel", "itemsize", "lo", "hi", "row_major"} of a layout, in
    bytes from data + byte_offset (hi exclusive)."""
    out = {"status": "ok", "zero_size": False, "numel": 0, "itemsize": itemsize, "lo": 0, "hi": 0, "row_major": True}
    if shape is None:
        return dict(out, status="null_shape")
    if any(n < 0 for n in shape):
        return dict(out, status="neg_shape")
    if itemsize <= 0:
        return dict(out, status="bad_itemsize")
    strides = _row_major(shape) if strides is None else tuple(strides)
    numel = 1
    for n in shape:
        numel *= n
    if numel == 0:
        return dict(out, zero_size=True)
    lo = sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0) * itemsize
    hi = (sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0) + 1) * itemsize
    if not (-(1 << 63) <= lo and hi < (1 << 63)) or numel >= (1 << 63):
        return dict(out, status="overflow")
    row = all(s == r for n, s, r in zip(shape, strides, _row_major(shape)) if n > 1)
    return dict(out, numel=numel, lo=lo, hi=hi, row_major=row)


try:
    elements  # a standalone script inlines dlconform/snippet.py before this file
except NameError:  # imported as dlconform.bugreport.kit, next to dlconform.snippet
    from ..snippet import describe, detach, elements


def _gather(address, shape, strides, itemsize):
    """The logical row-major element bytes at `address` (snippet.elements())."""
    return elements({"ptr": address, "shape": shape, "itemsize": itemsize,
                     "strides": _row_major(shape) if strides is None else strides})


class Forge:
    """Capsules with any metadata (dlconform's `_ref.Forge`, the subset reproducers use): a
    fresh managed struct per capsule(), a deleter that counts its calls (`deleter_calls`), the
    standard capsule destructor (it calls the deleter of an unconsumed capsule)."""

    def __init__(self, *, dtype=(2, 32, 1), shape=(4,), strides=None, byte_offset=0, data="alloc", fill=None,
                 buffer_size=None, versioned=True, version=(1, 3), flags=0, device=(1, 0), null_deleter=False,
                 ndim=None, shape_null=False, capsule_name=None, manager_ctx=None):
        self.dtype, self.shape, self.strides = tuple(dtype), tuple(shape), None if strides is None else tuple(strides)
        self.byte_offset, self.versioned, self.version, self.flags = byte_offset, versioned, tuple(version), flags
        self.device, self.null_deleter, self.ndim, self.shape_null = tuple(device), null_deleter, ndim, shape_null
        self.capsule_name = capsule_name.encode() if isinstance(capsule_name, str) else capsule_name
        self.manager_ctx = manager_ctx
        self.deleter_calls = self.capsules_made = 0
        self.log = []
        self._live = {}  # struct address -> the ctypes objects it points into, kept while the forge lives
        size = buffer_size
        if data != "alloc":  # the tensor's data is elsewhere: no buffer of its extent, as in ref's Forge
            size = 0
        elif size is None:
            ext = _extent(self.shape, self.strides, _itemsize(self.dtype))
            size = (ext["hi"] if ext["status"] == "ok" else 0) + byte_offset
        self.buffer_size = max(int(size), 1)
        self._raw = ctypes.create_string_buffer(self.buffer_size + 256)
        self.buffer_address = (ctypes.addressof(self._raw) + 255) & ~255
        fill = bytes(i & 0xFF for i in range(self.buffer_size)) if fill is None else bytes(fill)
        ctypes.memmove(self.buffer_address, fill, min(len(fill), self.buffer_size))
        self.buffer = (ctypes.c_uint8 * self.buffer_size).from_address(self.buffer_address)
        self.data = {"alloc": self.buffer_address, "null": None}.get(data, data)
        self._deleter = _Deleter(self._on_delete)
        self._destructor = _Destructor(self._on_destroy)

    def _on_delete(self, address, _pending=_take_pending):
        _pending()
        self.deleter_calls += 1
        self.log.append({"gil_held": True})
        # the struct stays in _live: freed with the forge, as ref's are, so a second deleter
        # call (a consumer breaking OWN-03) is counted, and the destructor of a capsule whose
        # tensor was already given back still reads its deleter, rather than freed memory

    def _on_destroy(self, capsule, _pending=_take_pending, _c=ctypes, _at=(_CAPSULE_NAME, _CAPSULE_POINTER),
                    _structs={LEGACY: _Managed, VERSIONED: _ManagedVersioned}, _deleter_type=_Deleter):
        _pending()
        name = _c.c_char_p.from_address(capsule + _at[0]).value
        if name in _structs:
            address = _c.c_void_p.from_address(capsule + _at[1]).value
            if address:
                m = _structs[name].from_address(address)
                if m.deleter:
                    _deleter_type(m.deleter)(address)

    def capsule(self):
        cls = _ManagedVersioned if self.versioned else _Managed
        m = cls()
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        strides = None if self.strides is None else (ctypes.c_int64 * max(len(self.strides), 1))(*self.strides)
        t = m.dl_tensor
        t.data, t.device = self.data, _Device(*self.device)
        t.ndim = len(self.shape) if self.ndim is None else self.ndim
        t.dtype = _DType(*self.dtype)
        t.shape = None if self.shape_null else ctypes.addressof(shape)
        t.strides = None if strides is None else ctypes.addressof(strides)
        t.byte_offset = self.byte_offset
        m.manager_ctx = self.manager_ctx
        m.deleter = None if self.null_deleter else ctypes.cast(self._deleter, ctypes.c_void_p).value
        if self.versioned:
            m.version, m.flags = _Version(*self.version), self.flags
        self._live[ctypes.addressof(m)] = (m, shape, strides)
        self.capsules_made += 1
        name = self.capsule_name or (VERSIONED if self.versioned else LEGACY)
        self._names = getattr(self, "_names", []) + [ctypes.c_char_p(name)]  # names outlive their capsules
        return _capsule_new(ctypes.addressof(m), self._names[-1], self._destructor)

    def expected_elements(self):
        ext = _extent(self.shape, self.strides, _itemsize(self.dtype))
        if ext["status"] != "ok":
            raise ValueError("no elements to compare: an invalid layout (%s)" % ext["status"])
        if ext["zero_size"]:
            return b""
        if not self.data:
            raise ValueError("NULL data")
        return _gather(self.data + self.byte_offset, self.shape, self.strides, _itemsize(self.dtype))


def _struct(capsule):
    """(kind, the managed struct or None, name) of a capsule, read without consuming it."""
    if type(capsule).__name__ != "PyCapsule":
        raise TypeError("not a capsule: %s" % type(capsule).__name__)
    name = _name_of(capsule)
    kind = {LEGACY: "legacy", VERSIONED: "versioned"}.get(name, "used" if name and name.startswith(b"used_")
                                                         else "unknown")
    if kind not in ("legacy", "versioned"):
        return kind, None, name
    m = (_ManagedVersioned if kind == "versioned" else _Managed).from_address(_pointer_of(capsule, name))
    return kind, m, name


def _ints(address, n):
    return None if not address else tuple((ctypes.c_int64 * n).from_address(address))


def inspect(capsule):
    """dlconform's `_probe.inspect`: the capsule's fields, without consuming it."""
    return _fields(*_struct(capsule))


def _fields(kind, m, name):
    out = {"name": name.decode() if name else None, "kind": kind}
    if m is None:
        return out
    out.update(pointer=ctypes.addressof(m), manager_ctx=m.manager_ctx or 0, deleter=m.deleter or 0,
               version=(m.version.major, m.version.minor) if kind == "versioned" else None,
               flags=m.flags if kind == "versioned" else None, readable=kind == "legacy" or m.version.major == 1,
               **_tensor_fields(m.dl_tensor))
    if not out["readable"]:  # another major: nothing past flags has a known layout (VER-10)
        out.update(dict.fromkeys(("data", "device", "ndim", "dtype", "shape", "strides", "byte_offset")))
    return out


def _tensor_fields(t):
    """data, device, ndim, dtype, byte_offset, shape and strides of a DLTensor (shape and
    strides None when NULL or ndim is outside [0, 1024], LAY-09)."""
    n = t.ndim if 0 <= t.ndim <= 1024 else 0
    return dict(data=t.data or 0, device=(t.device.device_type, t.device.device_id), ndim=t.ndim,
                dtype=(t.dtype.code, t.dtype.bits, t.dtype.lanes), byte_offset=t.byte_offset,
                shape=_ints(t.shape, n) if 0 <= t.ndim <= 1024 else None,
                strides=_ints(t.strides, n) if 0 <= t.ndim <= 1024 else None)


def extent(capsule):
    i = inspect(capsule)
    if not i.get("readable", True):
        raise ValueError("versioned tensor has major version %d: the tensor fields must not be read (VER-08)"
                         % i["version"][0])
    if not (0 <= (i.get("ndim") if i.get("ndim") is not None else -1) <= 1024):
        return {"status": "bad_ndim"}
    return _extent(_shape(i), i["strides"], _itemsize(i["dtype"]))


def _shape(i):
    """The shape the layout arithmetic reads: () for a 0-d tensor, whose shape may be NULL
    (LAY-08; NULL is null_shape only when ndim > 0, LAY-09)."""
    return () if i["ndim"] == 0 and i["shape"] is None else i["shape"]


def read_elements(capsule):
    return _elements(inspect(capsule))


def _elements(i):
    if "ndim" not in i:
        raise ValueError("a %s capsule is not read" % i["kind"])
    if not i.get("readable", True):
        raise ValueError("versioned tensor has major version %d: the tensor fields must not be read (VER-08)"
                         % i["version"][0])
    if not (0 <= i["ndim"] <= 1024):
        raise ValueError("invalid extent: bad_ndim")
    ext = _extent(_shape(i), i["strides"], _itemsize(i["dtype"]))
    if ext["status"] != "ok":
        raise ValueError("invalid extent: %s" % ext["status"])
    if ext["zero_size"]:
        return b""
    if not i["data"]:
        raise ValueError("NULL data for a non-empty tensor")
    return _gather(i["data"] + i["byte_offset"], _shape(i), i["strides"], _itemsize(i["dtype"]))


_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
#: the four names a capsule may be given; they live as long as the process (a capsule keeps the pointer)
_NAMES = {n: ctypes.c_char_p(n) for n in (LEGACY, VERSIONED, b"used_" + LEGACY, b"used_" + VERSIONED)}
#: the counting trampolines of instrument(): they outlive their Tracker
_TRAMPOLINES = []


def rename(capsule, name):
    """Sets the capsule's name to one of the four static DLPack names."""
    key = name.encode() if isinstance(name, str) else name
    if key not in _NAMES:
        raise ValueError("not a DLPack capsule name: %r" % (name,))
    if _set_name(capsule, _NAMES[key]) != 0:
        raise ValueError("PyCapsule_SetName failed")


class Tracker:
    """instrument(): the managed struct's deleter swapped for a trampoline that counts the
    calls (`calls`), then calls the original (if non-NULL)."""

    def __init__(self, capsule):
        kind, m, _ = _struct(capsule)
        if m is None:
            raise ValueError("a %s capsule is not instrumented" % kind)
        self.calls, self.log = 0, []
        self.original = m.deleter or 0
        self.original_null = not self.original
        thunk = _Deleter(self._on_call)
        _TRAMPOLINES.append(thunk)
        m.deleter = ctypes.cast(thunk, ctypes.c_void_p).value

    def _on_call(self, address, _pending=_take_pending, _deleter_type=_Deleter):
        _pending()
        self.calls += 1
        self.log.append({"gil_held": True})
        if self.original:
            _deleter_type(self.original)(address)


class Handle:
    """consume(): the capsule renamed used_*, the tensor owned here; release() calls the
    deleter once (if non-NULL; True when it did), and dealloc releases."""

    def __init__(self, capsule=None, *, versioned_at=None):
        if capsule is None:  # a tensor an exchange table handed out: versioned, no capsule
            kind, m, name = "versioned", _ManagedVersioned.from_address(versioned_at), None
        else:
            kind, m, name = _struct(capsule)
            if m is None:
                raise ValueError("a %s capsule cannot be consumed" % kind)
        self.kind, self.pointer, self._m, self._name = kind, ctypes.addressof(m), m, name
        self.released = self.deleter_called = False
        if capsule is not None:
            rename(capsule, b"used_" + name)

    def inspect(self):
        return _fields(self.kind, self._m, self._name)

    def read_elements(self):
        return _elements(self.inspect())

    def release(self, _deleter_type=_Deleter):
        if self.released:
            return False
        self.released = True
        deleter = self._m.deleter  # read now: a reproducer may have swapped it meanwhile
        if not deleter:
            return False
        _deleter_type(deleter)(self.pointer)
        self.deleter_called = True
        return True

    def __del__(self):
        self.release()


class _XapiHeader(ctypes.Structure):
    _fields_ = [("version", _Version), ("prev_api", ctypes.c_void_p)]


#: DLPackExchangeAPI: the header, then five function pointers (read as addresses)
XAPI_FUNCTIONS = ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
                  "managed_tensor_to_py_object_no_sync", "dltensor_from_py_object_no_sync", "current_work_stream")


class _Xapi(ctypes.Structure):
    _fields_ = [("header", _XapiHeader)] + [(n, ctypes.c_void_p) for n in XAPI_FUNCTIONS]


#: the v1.3 attribute (a capsule of this name, XAPI-01, XAPI-02), then the superseded v1.2 int
_XAPI_ATTRS = ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__")
_XAPI_NAME = b"dlpack_exchange_api"
_ABSENT = object()


def exchange_api(obj):
    """dlconform's `_probe.exchange_api`: the exchange API table of an object or a type, looked
    up on the type first (XAPI-04), then on the instance; None when neither attribute is there.
    The table is read only in its right form (a capsule of the exact name, or a non-zero int
    for the v1.2 attribute), and past its header only when its major is 1 (XAPI-06)."""
    typ, instance = (obj, None) if isinstance(obj, type) else (type(obj), obj)
    for attr in _XAPI_ATTRS:
        value, on_type = getattr(typ, attr, _ABSENT), True
        if value is _ABSENT and instance is not None:
            value, on_type = getattr(instance, attr, _ABSENT), False
        if value is not _ABSENT:
            return _xapi_fields(value, attr, on_type)
    return None


def _xapi_fields(value, attr, on_type):
    superseded = attr == _XAPI_ATTRS[1]
    form, name, pointer, api = "other", None, 0, None
    if type(value).__name__ == "PyCapsule" and type(value).__module__ == "builtins":
        raw = _name_of(value)
        name = None if raw is None else raw.decode("utf-8", "backslashreplace")
        if raw == _XAPI_NAME:
            form, pointer = "capsule", _pointer_of(value, raw) or 0
            api = _Xapi.from_address(pointer)
    elif type(value) is int:
        form = "int"
        if not 0 <= value < 1 << 64:  # negative or too large: no pointer at all
            form = "other"
        elif value:
            pointer = value
            api = _Xapi.from_address(pointer) if superseded else None
    t = type(value)
    out = {"capsule_name": name, "attr": attr, "form": form, "superseded": superseded, "pointer": pointer,
           "on_type": on_type, "type": t.__name__ if t.__module__ == "builtins" or t.__flags__ & (1 << 9)
           else "%s.%s" % (t.__module__, t.__qualname__), "version": None, "prev_api": None, "functions": None}
    if api is not None:
        out.update(version=(api.header.version.major, api.header.version.minor), prev_api=api.header.prev_api or 0)
        if api.header.version.major == 1:
            out["functions"] = {n: getattr(api, n) or 0 for n in XAPI_FUNCTIONS}
    return out


# ---- the table's functions, called as a consumer would (probes/probe/xapi.c)
#
# A function is called through PYFUNCTYPE, with the GIL held. ctypes then raises the exception
# a function leaves pending and drops its return code: a pending exception is read as the
# header's failure code, -1 ("-1 on failure with a Python exception set"). Where the function
# wrote its output all the same, the kit cannot tell a failure from a success that left an
# exception set (which the probe reports): it raises RuntimeError rather than guess.
_SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
_XAPI_TYPES = {
    "managed_tensor_allocator": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(_Tensor), ctypes.POINTER(ctypes.c_void_p),
                                                  ctypes.c_void_p, _SetError),
    "managed_tensor_from_py_object_no_sync": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                                               ctypes.POINTER(ctypes.c_void_p)),
    "managed_tensor_to_py_object_no_sync": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                                             ctypes.POINTER(ctypes.c_void_p)),
    "dltensor_from_py_object_no_sync": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(_Tensor)),
}
_XAPI_CLAUSE = {"managed_tensor_allocator": "XAPI-08", "managed_tensor_from_py_object_no_sync": "XAPI-09",
                "managed_tensor_to_py_object_no_sync": "XAPI-10", "dltensor_from_py_object_no_sync": "XAPI-11"}
_decref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_DecRef", _api))


def _xapi_fn(api, name):
    """The table's function `name` of the table at address `api`: only for major 1 (XAPI-06),
    never a NULL one."""
    if not isinstance(api, int):
        raise TypeError("api must be the table's address as an int")
    if not 0 < api < 1 << 64:
        raise ValueError("api address must be a non-zero unsigned pointer")
    table = _Xapi.from_address(api)
    if table.header.version.major != 1:
        raise ValueError("exchange API major %d differs from 1: the table must not be used (XAPI-06)"
                         % table.header.version.major)
    fn = getattr(table, name)
    if not fn:
        raise NotImplementedError("%s is NULL (%s)" % (name, _XAPI_CLAUSE[name]))
    return _XAPI_TYPES[name](fn)


def _xapi_call(fn, name, wrote, *args):
    """(return code, the exception it left pending or None); `wrote()` says whether it wrote its
    output, which with an exception pending leaves its return code unknown."""
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - what the producer set
        if wrote():
            raise RuntimeError("%s wrote its output and left %s pending: ctypes drops the return code, so the "
                               "kit cannot tell a failure from a success with an exception set" % (name, describe(e)))
        return -1, detach(e)


def xapi_managed_from(api, obj):
    """dlconform's `_probe.xapi_managed_from`: (rc, a Handle of the tensor or None, the
    exception left pending or None) of managed_tensor_from_py_object_no_sync(obj)."""
    name = "managed_tensor_from_py_object_no_sync"
    fn, out = _xapi_fn(api, name), ctypes.c_void_p()
    rc, exc = _xapi_call(fn, name, lambda: bool(out.value), obj, ctypes.byref(out))
    return rc, Handle(versioned_at=out.value) if rc == 0 and out.value else None, exc


def xapi_dltensor_from(api, obj):
    """dlconform's `_probe.xapi_dltensor_from`: (rc, the exception) on failure, else (0, the
    DLTensor's fields with "extent" and "elements" (or "elements_error"), read at once: they
    are valid only until control returns to the producer, XAPI-15)."""
    name = "dltensor_from_py_object_no_sync"
    fn, t = _xapi_fn(api, name), _Tensor()
    rc, exc = _xapi_call(fn, name, lambda: bytes(t) != bytes(len(bytes(t))), obj, ctypes.byref(t))
    if rc != 0:
        return rc, exc
    i = _tensor_fields(t)
    i["extent"] = _extent(_shape(i), i["strides"], _itemsize(i["dtype"])) if 0 <= t.ndim <= 1024 \
        else {"status": "bad_ndim"}
    try:
        i["elements"] = _elements(i)
    except ValueError as e:
        i.update(elements=None, elements_error=str(e))
    return rc, i


def xapi_alloc(api, dtype, shape, device):
    """dlconform's `_probe.xapi_alloc`: (rc, a Handle or None, [(kind, message)] of the SetError
    calls) of managed_tensor_allocator for a prototype of dtype, shape and device (XAPI-13); an
    exception left pending is a record ("<python exception pending>", its repr)."""
    name = "managed_tensor_allocator"
    fn, out, errors = _xapi_fn(api, name), ctypes.c_void_p(), []
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    proto = _Tensor(dtype=_DType(*dtype), device=_Device(*device), ndim=len(shape), shape=ctypes.addressof(dims))

    def set_error(ctx, kind, message):
        errors.append(tuple(None if v is None else v.decode("utf-8", "backslashreplace") for v in (kind, message)))

    callback = _SetError(set_error)
    rc, exc = _xapi_call(fn, name, lambda: bool(out.value), ctypes.byref(proto), ctypes.byref(out), None, callback)
    if exc is not None:
        errors.append(("<python exception pending>", repr(exc)))
    return rc, Handle(versioned_at=out.value) if rc == 0 and out.value else None, errors


def xapi_to_py(api, handle):
    """dlconform's `_probe.xapi_to_py`: (rc, the object or None) of
    managed_tensor_to_py_object_no_sync, which steals the handle's tensor on success and on
    failure alike (XAPI-17): the handle gives it up first; (rc, the exception) on failure."""
    name = "managed_tensor_to_py_object_no_sync"
    fn, out = _xapi_fn(api, name), ctypes.c_void_p()
    handle.released = True  # stolen: its deleter is the callee's to call
    rc, exc = _xapi_call(fn, name, lambda: bool(out.value), handle.pointer, ctypes.byref(out))
    if rc != 0:
        return rc, exc
    if not out.value:
        return rc, None
    obj = ctypes.cast(out.value, ctypes.py_object).value
    _decref(obj)  # the new reference the callee returned, now held by `obj`
    return rc, obj


#: the namespaces a reproducer body names
_probe = types.SimpleNamespace(inspect=inspect, extent=extent, read_elements=read_elements, rename=rename,
                               instrument=Tracker, consume=Handle, exchange_api=exchange_api,
                               xapi_managed_from=xapi_managed_from, xapi_dltensor_from=xapi_dltensor_from,
                               xapi_alloc=xapi_alloc, xapi_to_py=xapi_to_py)
_ref = types.SimpleNamespace(Forge=Forge)


def _with_library(lib):
    """The reference library's names, with the kit's Forge: forged capsules stay ctypes ones."""
    names = {k: getattr(lib, k) for k in dir(lib) if not k.startswith("__")}
    names["Forge"] = Forge
    return types.SimpleNamespace(**names)
