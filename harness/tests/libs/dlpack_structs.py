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


# ---- capsules: private prototypes, so other users of ctypes.pythonapi are not disturbed
_New = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p)(
    ("PyCapsule_New", ctypes.pythonapi))
_IsValidAt = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", ctypes.pythonapi))
_PointerAt = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))
#: capsule names by kind (versioned?), alive as long as the module: a capsule keeps a pointer to its name
CAPSULE_NAMES = {True: ctypes.c_char_p(b"dltensor_versioned"), False: ctypes.c_char_p(b"dltensor")}


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def capsule_destructor(capsule):
    """The destructor of an exported capsule: a consumed one is named used_* and left alone; an
    unconsumed one runs the deleter its struct holds (NULL: nothing to run)."""
    for name, struct in ((b"dltensor_versioned", DLManagedTensorVersioned), (b"dltensor", DLManagedTensor)):
        if _IsValidAt(capsule, name):
            address = _PointerAt(capsule, name)
            deleter = struct.from_address(address).deleter
            if deleter:
                deleter(address)


def new_capsule(struct, versioned, destructor=capsule_destructor):
    """A capsule over `struct` (a DLManagedTensor[Versioned] kept alive by the caller)."""
    return _New(ctypes.addressof(struct), CAPSULE_NAMES[versioned],
                None if destructor is None else ctypes.cast(destructor, ctypes.c_void_p))


# ---- what every CPU-only library here does the same way
def check_cpu_export(lib, stream, dl_device):
    """BufferError unless the __dlpack__ arguments ask for CPU memory: stream None (the only
    stream value on the CPU) and dl_device None or (kDLCPU, 0)."""
    if stream is not None:
        raise BufferError("%s: CPU memory takes stream=None only" % lib)
    if dl_device is not None and tuple(dl_device) != (kDLCPU, 0):
        raise BufferError("%s: only CPU memory can be exported" % lib)


def export_for_import(lib, x, kw):
    """x.__dlpack__(**kw), retried without keywords for a producer that predates them (not when
    the import needs dl_device: that producer cannot copy to the CPU)."""
    try:
        return x.__dlpack__(**kw)
    except TypeError:
        if "dl_device" in kw:
            raise BufferError("%s: the producer cannot export to the CPU (no dl_device keyword)" % lib)
        return x.__dlpack__()


def contiguous_strides(shape):
    """The element strides of a C-contiguous tensor of `shape` (an extent of 0 counts as 1)."""
    strides = [1] * len(shape)
    for i in range(len(shape) - 2, -1, -1):
        strides[i] = strides[i + 1] * max(shape[i + 1], 1)
    return tuple(strides)
