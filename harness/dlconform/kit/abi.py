"""The ABI of dlpack.h v1.3 as ctypes types, and the CPython capsule functions the kit calls.

This is the one declaration of dlpack.h's structs in dlconform's Python: the kit, pyref, the
targets and the tests use these. Layouts follow the header field by field on LP64 ABIs
(x86-64, aarch64): DLTensor is 48 bytes, the deleter of DLManagedTensor sits at offset 56 and
that of DLManagedTensorVersioned at offset 16 (VER-10: version, manager_ctx, deleter and flags
keep their place in every future version). harness/tests/test_kit.py holds the offsets to
the header that the C probes are built against.

The capsule functions are private function objects (`ctypes.PYFUNCTYPE(...)((name,
ctypes.pythonapi))`): the process under test keeps its own `ctypes.pythonapi` prototypes.
"""
import ctypes
import enum

DLPACK_VERSION = (1, 3)

# ---------------------------------------------------------------------------- names and flags
LEGACY = "dltensor"
VERSIONED = "dltensor_versioned"
USED_LEGACY = "used_dltensor"
USED_VERSIONED = "used_dltensor_versioned"
USED_NAMES = (USED_LEGACY, USED_VERSIONED)
#: the capsule name of the C exchange API table (XAPI-02)
XAPI_NAME = "dlpack_exchange_api"

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_SUBBYTE_PADDED = 1 << 2
DEFINED_FLAGS = FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_SUBBYTE_PADDED


class DLDeviceType(enum.IntEnum):
    """DLDeviceType."""
    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16
    kDLMAIA = 17
    kDLTrn = 18


class DLDataTypeCode(enum.IntEnum):
    """DLDataTypeCode."""
    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6
    kDLFloat8_e3m4 = 7
    kDLFloat8_e4m3 = 8
    kDLFloat8_e4m3b11fnuz = 9
    kDLFloat8_e4m3fn = 10
    kDLFloat8_e4m3fnuz = 11
    kDLFloat8_e5m2 = 12
    kDLFloat8_e5m2fnuz = 13
    kDLFloat8_e8m0fnu = 14
    kDLFloat6_e2m3fn = 15
    kDLFloat6_e3m2fn = 16
    kDLFloat4_e2m1fn = 17


# ---------------------------------------------------------------------------- structs
class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


#: void (*deleter)(DLManagedTensor[Versioned] *self): the argument is an address, which both
#: structs share
Deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", Deleter)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", Deleter),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


#: DLPackExchangeAPI's five functions, in the table's order
XAPI_FUNCTIONS = ("managed_tensor_allocator", "managed_tensor_from_py_object_no_sync",
                  "managed_tensor_to_py_object_no_sync", "dltensor_from_py_object_no_sync", "current_work_stream")


class DLPackExchangeAPIHeader(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


class DLPackExchangeAPI(ctypes.Structure):
    """The header, then the five function pointers, read as addresses."""
    _fields_ = [("header", DLPackExchangeAPIHeader)] + [(n, ctypes.c_void_p) for n in XAPI_FUNCTIONS]


def address(pointer):
    """The address a ctypes pointer or function pointer holds (0 for NULL)."""
    return ctypes.cast(pointer, ctypes.c_void_p).value or 0


def int64s(pointer, n):
    """n int64 values at a POINTER(c_int64) or an address; None when it is NULL."""
    at = pointer if isinstance(pointer, int) else address(pointer)
    return None if not at else tuple((ctypes.c_int64 * n).from_address(at))


# ---------------------------------------------------------------------------- capsules
#: void (*PyCapsule_Destructor)(PyObject *): the capsule comes as an address, never as an
#: object: it is being deallocated, and a new reference would resurrect it
CapsuleDestructor = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_api = ctypes.pythonapi
capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, CapsuleDestructor)(
    ("PyCapsule_New", _api))
#: PyCapsule_GetName as an address (0 for a NULL name); capsule_name() reads the string
capsule_name_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(("PyCapsule_GetName", _api))
capsule_pointer = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", _api))
capsule_set_name = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.c_char_p)(("PyCapsule_SetName", _api))
err_occurred = ctypes.PYFUNCTYPE(ctypes.c_void_p)(("PyErr_Occurred", _api))
incref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_IncRef", _api))
decref = ctypes.PYFUNCTYPE(None, ctypes.py_object)(("Py_DecRef", _api))
#: where a PyCapsule keeps its pointer and its name, after PyObject_HEAD (CPython 3, LP64). A
#: destructor reads them there: it may run with an exception pending, which a C-API call made
#: through ctypes would raise as its own.
CAPSULE_POINTER_AT, CAPSULE_NAME_AT = 2 * ctypes.sizeof(ctypes.c_void_p), 3 * ctypes.sizeof(ctypes.c_void_p)


def is_capsule(obj):
    t = type(obj)
    return t.__name__ == "PyCapsule" and t.__module__ == "builtins"


def capsule_name(capsule):
    """The capsule's name as text (None for a NULL name)."""
    at = capsule_name_pointer(capsule)
    return None if not at else ctypes.string_at(at).decode("utf-8", "backslashreplace")


def keep_forever(obj):
    """Gives obj a reference that is never dropped, so that it outlives interpreter teardown:
    for what C code may still use after the module is gone (callbacks, capsule names)."""
    incref(obj)
    return obj


# ---------------------------------------------------------------------------- dtypes and layout
#: DLPack dtype names (as the C reference spells them) -> (code, bits, lanes)
DTYPES = {
    "bool": (6, 8, 1),
    "int8": (0, 8, 1), "int16": (0, 16, 1), "int32": (0, 32, 1), "int64": (0, 64, 1),
    "uint8": (1, 8, 1), "uint16": (1, 16, 1), "uint32": (1, 32, 1), "uint64": (1, 64, 1),
    "float16": (2, 16, 1), "float32": (2, 32, 1), "float64": (2, 64, 1),
    "bfloat16": (4, 16, 1),
    "complex32": (5, 32, 1), "complex64": (5, 64, 1), "complex128": (5, 128, 1),
    "float8_e3m4": (7, 8, 1), "float8_e4m3": (8, 8, 1), "float8_e4m3b11fnuz": (9, 8, 1),
    "float8_e4m3fn": (10, 8, 1), "float8_e4m3fnuz": (11, 8, 1), "float8_e5m2": (12, 8, 1),
    "float8_e5m2fnuz": (13, 8, 1), "float8_e8m0fnu": (14, 8, 1),
    "float6_e2m3fn": (15, 6, 1), "float6_e3m2fn": (16, 6, 1), "float4_e2m1fn": (17, 4, 1),
    "int4": (0, 4, 1), "uint4": (1, 4, 1),
}


def itemsize(dtype):
    """Bytes per element of (code, bits, lanes), sub-byte types rounded up."""
    return (dtype[1] * dtype[2] + 7) // 8


def row_major(shape):
    """Row-major (C order) element strides of `shape`."""
    out, step = [], 1
    for n in reversed(shape):
        out.append(step)
        step *= max(n, 1)
    return tuple(reversed(out))
