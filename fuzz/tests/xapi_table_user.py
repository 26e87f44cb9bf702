"""A consumer that calls every function of the offered exchange table, for
fuzz/tests/test_fuzz_py.py: under the consumer target (ASan) it checks that the table's
functions work as dlpack.h asks (fuzz/xapi_offer.h), raising AssertionError (an EXC finding
of the target) when one does not, then imports through dlconform._ref.from_dlpack."""
import ctypes as C

from dlconform import _ref

_api = C.pythonapi
_api.PyCapsule_GetPointer.restype = C.c_void_p
_api.PyCapsule_GetPointer.argtypes = (C.py_object, C.c_char_p)
SET_ERROR = C.CFUNCTYPE(None, C.c_void_p, C.c_char_p, C.c_char_p)
# the table's functions are called with the GIL held (PYFUNCTYPE), as consumers call them;
# a -1 with an exception set raises it here
ALLOC = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.c_void_p), C.c_void_p, SET_ERROR)
FROM = C.PYFUNCTYPE(C.c_int, C.py_object, C.POINTER(C.c_void_p))
TO = C.PYFUNCTYPE(C.c_int, C.c_void_p, C.POINTER(C.py_object))
DLT = C.PYFUNCTYPE(C.c_int, C.py_object, C.c_void_p)
STREAM = C.PYFUNCTYPE(C.c_int, C.c_int, C.c_int32, C.POINTER(C.c_void_p))
DELETER = C.PYFUNCTYPE(None, C.c_void_p)


class DLTensor(C.Structure):
    _fields_ = [("data", C.c_void_p), ("device_type", C.c_int32), ("device_id", C.c_int32),
                ("ndim", C.c_int32), ("code", C.c_uint8), ("bits", C.c_uint8), ("lanes", C.c_uint16),
                ("shape", C.POINTER(C.c_int64)), ("strides", C.POINTER(C.c_int64)), ("byte_offset", C.c_uint64)]


class Managed(C.Structure):  # DLManagedTensorVersioned
    _fields_ = [("major", C.c_uint32), ("minor", C.c_uint32), ("manager_ctx", C.c_void_p),
                ("deleter", C.c_void_p), ("flags", C.c_uint64), ("dl_tensor", DLTensor)]


def _table(x):
    cap = type(x).__dlpack_c_exchange_api__
    t = (C.c_void_p * 7).from_address(_api.PyCapsule_GetPointer(cap, b"dlpack_exchange_api"))
    assert C.c_uint32.from_address(C.addressof(t)).value == 1, "table major"
    assert t[2] and t[3] and t[4] and t[6], "required pointers (XAPI-08, 09, 10, 12)"
    return ALLOC(t[2]), FROM(t[3]), TO(t[4]), DLT(t[5]) if t[5] else None, STREAM(t[6])  # XAPI-11


def from_dlpack(x, copy=None, device=None):
    alloc, from_py, to_py, dltensor, stream = _table(x)
    out = C.c_void_p(1)
    assert stream(1, 0, C.byref(out)) == 0 and out.value is None, "current_work_stream(kDLCPU)"
    errors = []
    set_error = SET_ERROR(lambda ctx, kind, msg: errors.append((kind, msg)))
    shape = (C.c_int64 * 2)(2, 3)
    proto = DLTensor(None, 1, 0, 2, 2, 32, 1, shape, None, 0)
    m = C.c_void_p()
    assert alloc(C.byref(proto), C.byref(m), None, set_error) == 0 and m.value and not errors, errors
    t = Managed.from_address(m.value)
    assert (t.major, t.dl_tensor.ndim, t.dl_tensor.shape[1], t.dl_tensor.strides[0]) == (1, 2, 3, 3)
    C.memset(t.dl_tensor.data, 7, 24)  # the 24 bytes exist (ASan checks)
    bad = DLTensor(None, 2, 0, 2, 2, 32, 1, shape, None, 0)  # CUDA: the allocator refuses
    assert alloc(C.byref(bad), C.byref(C.c_void_p()), None, set_error) == -1 and len(errors) == 1, errors
    assert alloc(C.byref(bad), C.byref(C.c_void_p()), None, SET_ERROR()) == -1  # NULL SetError
    obj = C.py_object()
    assert to_py(m.value, C.byref(obj)) == 0, "managed_tensor_to_py_object_no_sync"  # steals m
    y = obj.value
    assert hasattr(type(y), "__dlpack_c_exchange_api__") and y.__dlpack_device__() == (1, 0)
    view = DLTensor()
    if dltensor is not None:  # optional (XAPI-11)
        assert dltensor(y, C.byref(view)) == 0 and view.data == t.dl_tensor.data, "dltensor view of y"
    got = C.c_void_p()
    assert from_py(y, C.byref(got)) == 0 and got.value == m.value, "hand-out of y's tensor"
    try:  # handed out once: a second hand-out fails with BufferError (XAPI-14)
        from_py(y, C.byref(C.c_void_p()))
        raise AssertionError("second hand-out of the same tensor")
    except BufferError:
        pass
    try:  # not an object of the type the API was found on: TypeError
        from_py(object(), C.byref(C.c_void_p()))
        raise AssertionError("hand-out of a foreign object")
    except TypeError:
        pass
    DELETER(Managed.from_address(got.value).deleter)(got.value)  # we own it now
    del y
    return _ref.from_dlpack(x, copy=copy) if copy is not None else _ref.from_dlpack(x)
