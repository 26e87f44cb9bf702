"""A test consumer for test_fuzz_py.py: it takes any export's data for host memory, as a CPU
library that never asks __dlpack_device__ would, and returns a copy of its first byte. Over
the CUDA mode's device memory (fuzz/devmem.h) that read faults, as it would on a GPU."""
import ctypes

_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype, _name.argtypes = ctypes.c_char_p, (ctypes.py_object,)
# DLTensor.data: first in DLManagedTensor; after version, manager_ctx, deleter and flags (32
# bytes) in DLManagedTensorVersioned
DATA_AT = {b"dltensor": 0, b"dltensor_versioned": 32}


def from_dlpack(x, *, device=None, copy=None):
    capsule = x.__dlpack__(stream=1 if x.__dlpack_device__()[0] == 2 else None)  # explicit (STR-14)
    name = _name(capsule)
    if name not in DATA_AT:
        raise BufferError("a capsule named %r" % name)
    data = ctypes.c_void_p.from_address(_get(capsule, name) + DATA_AT[name]).value
    if not data:
        raise BufferError("NULL data")
    return bytearray(ctypes.string_at(data, 1))
