"""A consumer that breaks XAPI-15 on purpose, for fuzz/tests/test_fuzz_py.py: its from_dlpack
takes the exchange table from the producer's type (XAPI-04), checks the header major
(XAPI-06), fills a DLTensor with dltensor_from_py_object_no_sync, and returns a zero-copy
memoryview of the first element: a non-owning view kept after the call returned, which the
consumer target must report as XAPI-15."""
import ctypes as C

_api = C.pythonapi
_api.PyCapsule_GetPointer.restype = C.c_void_p
_api.PyCapsule_GetPointer.argtypes = (C.py_object, C.c_char_p)
_DLT = C.CFUNCTYPE(C.c_int, C.py_object, C.c_void_p)


def from_dlpack(x, copy=None, device=None):
    cap = type(x).__dlpack_c_exchange_api__
    table = (C.c_void_p * 7).from_address(_api.PyCapsule_GetPointer(cap, b"dlpack_exchange_api"))
    # header: version (uint32 major, minor) and prev_api; then the allocator, from_py, to_py,
    # dltensor_from (word 5) and current_work_stream
    if C.c_uint32.from_address(C.addressof(table)).value != 1 or not table[5]:
        raise BufferError("no usable dltensor_from_py_object_no_sync")
    dl = (C.c_byte * 48)()  # DLTensor: data, device, ndim, dtype, shape, strides, byte_offset
    if _DLT(table[5])(x, C.addressof(dl)) != 0:
        raise BufferError("dltensor_from_py_object_no_sync failed")
    data = C.c_void_p.from_buffer(dl, 0).value
    if not data:
        raise BufferError("no data")
    return memoryview((C.c_char * 1).from_address(data + C.c_uint64.from_buffer(dl, 40).value))
