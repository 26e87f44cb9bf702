"""The C exchange API table (`__dlpack_c_exchange_api__`) of a producer, read and called in ctypes.

`exchange_api(obj)` finds and reads the table; `xapi_managed_from`, `xapi_dltensor_from`,
`xapi_alloc`, `xapi_to_py` and `xapi_current_stream` call its functions as a consumer would
(probes/probe/xapi.c does the same in C).

A function is called through PYFUNCTYPE, with the GIL held. ctypes then raises the exception a
function leaves pending and drops its return code: a pending exception is read as the
header's failure code, -1 ("-1 on failure with a Python exception set"). Where the function
wrote its output all the same, the kit cannot tell a failure from a success that left an
exception set (which the C probe reports): it raises RuntimeError rather than guess.
"""
import ctypes

from . import abi
from .capsules import Handle, extent_of, read_tensor, tensor_fields
from .check import describe, detach

#: the v1.3 attribute (a capsule named dlpack_exchange_api, XAPI-01, XAPI-02), then the
#: superseded v1.2 int
ATTRS = ("__dlpack_c_exchange_api__", "__c_dlpack_exchange_api__")
_ABSENT = object()


def exchange_api(obj):
    """The exchange API table of an object or a type, looked up on the type first (XAPI-04), then
    on the instance; None when neither attribute is there. The table is read only in its right
    form (a capsule of the exact name, or a non-zero int for the v1.2 attribute), and past its
    header only when its major is 1 (XAPI-06). {capsule_name, attr, form (capsule, int, other),
    superseded, pointer, on_type, type, version, prev_api, functions}."""
    typ, instance = (obj, None) if isinstance(obj, type) else (type(obj), obj)
    for attr in ATTRS:
        value, on_type = getattr(typ, attr, _ABSENT), True
        if value is _ABSENT and instance is not None:
            value, on_type = getattr(instance, attr, _ABSENT), False
        if value is not _ABSENT:
            return _table_fields(value, attr, on_type)
    return None


def _table_fields(value, attr, on_type):
    superseded = attr == ATTRS[1]
    form, name, pointer, api = "other", None, 0, None
    if abi.is_capsule(value):
        name = abi.capsule_name(value)
        if name == abi.XAPI_NAME:
            form, pointer = "capsule", abi.capsule_pointer(value, abi.XAPI_NAME.encode()) or 0
            api = abi.DLPackExchangeAPI.from_address(pointer)
    elif type(value) is int:
        form = "int"
        if not 0 <= value < 1 << 64:  # negative or too large: no pointer at all
            form = "other"
        elif value:
            pointer = value
            api = abi.DLPackExchangeAPI.from_address(pointer) if superseded else None
    t = type(value)
    out = {"capsule_name": name, "attr": attr, "form": form, "superseded": superseded, "pointer": pointer,
           "on_type": on_type, "type": t.__name__ if t.__module__ == "builtins" or t.__flags__ & (1 << 9)
           else "%s.%s" % (t.__module__, t.__qualname__), "version": None, "prev_api": None, "functions": None}
    if api is not None:
        out.update(version=(api.header.version.major, api.header.version.minor), prev_api=api.header.prev_api or 0)
        if api.header.version.major == 1:
            out["functions"] = {n: getattr(api, n) or 0 for n in abi.XAPI_FUNCTIONS}
    return out


# ---------------------------------------------------------------------------- the functions
#: void (*SetError)(void *error_ctx, const char *kind, const char *message)
SetError = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
_TYPES = {
    "managed_tensor_allocator": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.POINTER(abi.DLTensor),
                                                  ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, SetError),
    "managed_tensor_from_py_object_no_sync": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                                               ctypes.POINTER(ctypes.c_void_p)),
    "managed_tensor_to_py_object_no_sync": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                                             ctypes.POINTER(ctypes.c_void_p)),
    "dltensor_from_py_object_no_sync": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                                         ctypes.POINTER(abi.DLTensor)),
    "current_work_stream": ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                                             ctypes.POINTER(ctypes.c_void_p)),
}
CLAUSE = {"managed_tensor_allocator": "XAPI-08", "managed_tensor_from_py_object_no_sync": "XAPI-09",
          "managed_tensor_to_py_object_no_sync": "XAPI-10", "dltensor_from_py_object_no_sync": "XAPI-11",
          "current_work_stream": "XAPI-12"}


def _function(api, name):
    """The table's function `name` of the table at address `api`: only for major 1 (XAPI-06),
    never a NULL one."""
    if not isinstance(api, int):
        raise TypeError("api must be the table's address as an int")
    if not 0 < api < 1 << 64:
        raise ValueError("api address must be a non-zero unsigned pointer")
    table = abi.DLPackExchangeAPI.from_address(api)
    if table.header.version.major != 1:
        raise ValueError("exchange API major %d differs from 1: the table must not be used (XAPI-06)"
                         % table.header.version.major)
    fn = getattr(table, name)
    if not fn:
        raise NotImplementedError("%s is NULL (%s)" % (name, CLAUSE[name]))
    return _TYPES[name](fn)


def _call(fn, name, wrote, *args):
    """(return code, the exception it left pending or None); `wrote()` says whether it wrote its
    output, which with an exception pending leaves its return code unknown."""
    try:
        return fn(*args), None
    except Exception as e:  # what the producer set
        if wrote():
            raise RuntimeError("%s wrote its output and left %s pending: ctypes drops the return code, so the "
                               "kit cannot tell a failure from a success with an exception set" % (name, describe(e)))
        return -1, detach(e)


def xapi_managed_from(api, obj):
    """(rc, a Handle of the tensor or None, the exception left pending or None) of
    managed_tensor_from_py_object_no_sync(obj)."""
    name = "managed_tensor_from_py_object_no_sync"
    fn, out = _function(api, name), ctypes.c_void_p()
    rc, exc = _call(fn, name, lambda: bool(out.value), obj, ctypes.byref(out))
    return rc, Handle(versioned_at=out.value) if rc == 0 and out.value else None, exc


def xapi_dltensor_from(api, obj, read=True):
    """(rc, the exception) on failure, else (0, the DLTensor's fields with "extent" and
    "elements" (or "elements_error"), read at once: they are valid only until control returns
    to the producer, XAPI-15). read=False: the fields alone (reading device memory waits for
    the device)."""
    name = "dltensor_from_py_object_no_sync"
    fn, t = _function(api, name), abi.DLTensor()
    rc, exc = _call(fn, name, lambda: bytes(t) != bytes(len(bytes(t))), obj, ctypes.byref(t))
    if rc != 0:
        return rc, exc
    i = tensor_fields(t)
    i["extent"] = extent_of(t)
    if not read:
        return rc, i
    try:
        i["elements"] = read_tensor(t)
    except (ValueError, OverflowError) as e:
        i.update(elements=None, elements_error=str(e))
    return rc, i


def xapi_alloc(api, dtype, shape, device):
    """(rc, a Handle or None, [(kind, message)] of the SetError calls) of
    managed_tensor_allocator for a prototype of dtype, shape and device (XAPI-13); an exception
    left pending is a record ("<python exception pending>", its repr)."""
    name = "managed_tensor_allocator"
    fn, out, errors = _function(api, name), ctypes.c_void_p(), []
    dims = (ctypes.c_int64 * max(len(shape), 1))(*shape)
    proto = abi.DLTensor(dtype=abi.DLDataType(*dtype), device=abi.DLDevice(*device), ndim=len(shape),
                         shape=ctypes.cast(dims, ctypes.POINTER(ctypes.c_int64)))

    def set_error(ctx, kind, message):
        errors.append(tuple(None if v is None else v.decode("utf-8", "backslashreplace") for v in (kind, message)))

    callback = SetError(set_error)
    rc, exc = _call(fn, name, lambda: bool(out.value), ctypes.byref(proto), ctypes.byref(out), None, callback)
    if exc is not None:
        errors.append(("<python exception pending>", repr(exc)))
    return rc, Handle(versioned_at=out.value) if rc == 0 and out.value else None, errors


def xapi_to_py(api, handle):
    """(rc, the object or None) of managed_tensor_to_py_object_no_sync, which steals the
    handle's tensor on success and on failure alike (XAPI-17): the handle gives it up first;
    (rc, the exception) on failure."""
    name = "managed_tensor_to_py_object_no_sync"
    fn, out = _function(api, name), ctypes.c_void_p()
    handle.steal()
    rc, exc = _call(fn, name, lambda: bool(out.value), handle.pointer, ctypes.byref(out))
    if rc != 0:
        return rc, exc
    if not out.value:
        return rc, None
    obj = ctypes.cast(out.value, ctypes.py_object).value
    abi.decref(obj)  # the new reference the callee returned, now held by `obj`
    return rc, obj


def xapi_current_stream(api, device_type, device_id):
    """(rc, the stream address) of current_work_stream, or (rc, the exception) on failure."""
    name = "current_work_stream"
    fn, out = _function(api, name), ctypes.c_void_p()
    rc, exc = _call(fn, name, lambda: bool(out.value), device_type, device_id, ctypes.byref(out))
    return (rc, exc) if rc != 0 else (rc, out.value or 0)
