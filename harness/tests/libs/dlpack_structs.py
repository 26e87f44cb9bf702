"""dlpack_structs: dlpack.h's structs and the capsule calls, in ctypes, for the two test
libraries beside it (bytecopy, viewlib). It is written the way a library's author would write it,
not taken from dlconform, so the libraries stay independent of what they are judged by."""
import ctypes

kDLCPU = 1
FLAG_READ_ONLY = 1


def _struct(name, *fields):
    """A ctypes struct type from (field, ctype) pairs, in dlpack.h's order."""
    return type(name, (ctypes.Structure,), {"_fields_": list(fields)})


c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64 = (
    ctypes.c_int32, ctypes.c_int64, ctypes.c_uint8, ctypes.c_uint16, ctypes.c_uint32, ctypes.c_uint64)
DLDevice = _struct("DLDevice", ("device_type", c_int32), ("device_id", c_int32))
DLDataType = _struct("DLDataType", ("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16))
DLTensor = _struct("DLTensor", ("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", c_int32),
                   ("dtype", DLDataType), ("shape", ctypes.POINTER(c_int64)), ("strides", ctypes.POINTER(c_int64)),
                   ("byte_offset", c_uint64))
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
DLManagedTensor = _struct("DLManagedTensor", ("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                          ("deleter", DELETER))
DLPackVersion = _struct("DLPackVersion", ("major", c_uint32), ("minor", c_uint32))
DLManagedTensorVersioned = _struct("DLManagedTensorVersioned", ("version", DLPackVersion),
                                   ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER), ("flags", c_uint64),
                                   ("dl_tensor", DLTensor))


# Private prototypes, so we do not disturb other users of ctypes.pythonapi.
_IsValid = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_GetPointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
_SetName = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", ctypes.pythonapi))
