"""A test consumer for test_fuzz_py.py: it takes any export's data for host memory, as a CPU
library that never asks __dlpack_device__ would, and returns a copy of its first byte (taking
the capsule: renamed used_*, its deleter called once, CAP-03, OWN-03). Over
the CUDA mode's device memory (fuzz/devmem.h) that read faults, as it would on a GPU."""
import ctypes

_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype, _name.argtypes = ctypes.c_char_p, (ctypes.py_object,)
# DLTensor.data: first in DLManagedTensor; after version, manager_ctx, deleter and flags (32
# bytes) in DLManagedTensorVersioned
DATA_AT = {b"dltensor": 0, b"dltensor_versioned": 32}
# the deleter: after DLTensor (48 bytes) and manager_ctx in DLManagedTensor, after version and
# manager_ctx in DLManagedTensorVersioned
DELETER_AT = {b"dltensor": 56, b"dltensor_versioned": 16}
# the names it renames the capsule to once it took the tensor (CAP-03); module constants, so
# the names outlive every capsule (CAP-09)
USED = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}
_set_name = ctypes.pythonapi.PyCapsule_SetName
_set_name.restype, _set_name.argtypes = ctypes.c_int, (ctypes.py_object, ctypes.c_char_p)


def from_dlpack(x, *, device=None, copy=None):
    capsule = x.__dlpack__(stream=1 if x.__dlpack_device__()[0] == 2 else None)  # explicit (STR-14)
    name = _name(capsule)
    if name not in DATA_AT:
        raise BufferError("a capsule named %r" % name)
    data = ctypes.c_void_p.from_address(_get(capsule, name) + DATA_AT[name]).value
    if not data:
        raise BufferError("NULL data")
    got = bytearray(ctypes.string_at(data, 1))
    _set_name(capsule, USED[name])  # taken (CAP-03): the consumer deletes the tensor, once (OWN-03)
    managed = _get(capsule, USED[name])
    deleter = ctypes.c_void_p.from_address(managed + DELETER_AT[name]).value
    if deleter:
        ctypes.CFUNCTYPE(None, ctypes.c_void_p)(deleter)(managed)
    return got
