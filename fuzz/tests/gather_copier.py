"""A test consumer for test_fuzz_py.py: it imports a CPU export of whole-byte elements as a
copy of its own, read element by element through the export's shape, strides and byte_offset,
and returns the bytes as a row-major ctypes array of the export's shape and item size (the
buffer protocol reads it). FLAT (flat_copier.py) reads the elements as if the export were
compact, as a kernel library that ignores strides does: a copy of the wrong elements (LAY-11).
QUIET (nan_quieter.py) sets the quiet bit of every float16 NaN it copies, as a copy through a
wider float may: still the export's elements."""
import ctypes
import math

_get = ctypes.pythonapi.PyCapsule_GetPointer
_get.restype, _get.argtypes = ctypes.c_void_p, (ctypes.py_object, ctypes.c_char_p)
_set = ctypes.pythonapi.PyCapsule_SetName
_set.argtypes = (ctypes.py_object, ctypes.c_char_p)
_name = ctypes.pythonapi.PyCapsule_GetName
_name.restype, _name.argtypes = ctypes.c_char_p, (ctypes.py_object,)

FLAT = QUIET = False
FORMATS = {(1, 8): ctypes.c_uint8, (0, 8): ctypes.c_int8, (2, 16): ctypes.c_uint16}


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def from_dlpack(x, *, device=None, copy=None):
    if x.__dlpack_device__() != (1, 0):
        raise BufferError("this test consumer imports CPU memory")
    capsule = x.__dlpack__(stream=None)
    if _name(capsule) != b"dltensor":
        raise BufferError("this test consumer takes legacy capsules")
    managed = _get(capsule, b"dltensor")
    t = _DLTensor.from_address(managed)
    fmt = FORMATS.get((t.code, t.bits))
    if fmt is None or t.lanes != 1 or t.ndim < 1 or not t.data:
        raise BufferError("this test consumer copies uint8, int8 and float16 tensors of 1 or more dims")
    item = t.bits // 8
    shape = [t.shape[i] for i in range(t.ndim)]
    if any(n < 1 or n > 64 for n in shape):
        raise BufferError("this test consumer copies small non-empty tensors")
    strides = [t.strides[i] for i in range(t.ndim)] if t.strides else None
    if strides is None or FLAT:
        strides = [1] * t.ndim
        for i in reversed(range(t.ndim - 1)):
            strides[i] = strides[i + 1] * shape[i + 1]
    out, idx = bytearray(), [0] * t.ndim
    for _ in range(math.prod(shape)):
        off = t.byte_offset + sum(i * s for i, s in zip(idx, strides)) * item
        element = ctypes.string_at(t.data + off, item)
        if QUIET and t.code == 2:
            v = int.from_bytes(element, "little")
            if v & 0x7C00 == 0x7C00 and v & 0x3FF:
                element = (v | 0x200).to_bytes(2, "little")
        out += element
        for i in reversed(range(t.ndim)):
            idx[i] += 1
            if idx[i] < shape[i]:
                break
            idx[i] = 0
    _set(capsule, b"used_dltensor")
    deleter = ctypes.cast(ctypes.c_void_p.from_address(managed + ctypes.sizeof(_DLTensor) + 8).value, DELETER)
    deleter(managed)
    array = fmt
    for n in reversed(shape):
        array = array * n
    return array.from_buffer_copy(bytes(out))
