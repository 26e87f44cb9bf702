"""Helpers that adapters inline into their reproducer setup lines, where the library has no
idiom for what the adapter method does (reading a capsule, building a tensor over memory).

Reproducer lines must need only the library, Python and ctypes: the standalone bug reports
(dlconform.bugreport.standalone) refuse any line that names this package. So each helper is
source text, written out in full into the snippet. Its names carry a prefix of their own
(`_dlp_`, or the library's) because a standalone script defines the kit's names (`inspect`,
`_Tensor`, `Forge`, ...) and the snippet's (`describe`, `elements`, ...) in the same global
namespace; a helper that rebound one would change what the kit does.
"""

#: _dlp_fields(capsule): what a DLPack capsule holds, read without consuming it, as
#: _probe.inspect gives it for the keys the adapters use: dtype (code, bits, lanes), ndim,
#: shape, strides (elements; None when NULL), data (0 when NULL), byte_offset, flags (None for
#: a legacy capsule). A capsule of another name gives {}; a versioned one of another major, or
#: an ndim outside [0, 1024], gives no layout (the fields after `flags` have no known meaning,
#: VER-10; an ndim out of range is not read). _dlp_row_major(shape): compact C-order strides
#: in elements, a zero extent counting as 1.
READER = '''import ctypes
class _dlp_Tensor(ctypes.Structure):
    _fields_ = [('data', ctypes.c_void_p), ('device_type', ctypes.c_int32), ('device_id', ctypes.c_int32),
                ('ndim', ctypes.c_int32), ('code', ctypes.c_uint8), ('bits', ctypes.c_uint8),
                ('lanes', ctypes.c_uint16), ('shape', ctypes.c_void_p), ('strides', ctypes.c_void_p),
                ('byte_offset', ctypes.c_uint64)]
class _dlp_Versioned(ctypes.Structure):
    _fields_ = [('major', ctypes.c_uint32), ('minor', ctypes.c_uint32), ('manager_ctx', ctypes.c_void_p),
                ('deleter', ctypes.c_void_p), ('flags', ctypes.c_uint64), ('dl_tensor', _dlp_Tensor)]
class _dlp_Legacy(ctypes.Structure):
    _fields_ = [('dl_tensor', _dlp_Tensor), ('manager_ctx', ctypes.c_void_p), ('deleter', ctypes.c_void_p)]
_dlp_name_of = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(('PyCapsule_GetName', ctypes.pythonapi))
_dlp_pointer_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object, ctypes.c_char_p)(
    ('PyCapsule_GetPointer', ctypes.pythonapi))
def _dlp_fields(capsule):
    name = _dlp_name_of(capsule)
    if name not in (b'dltensor', b'dltensor_versioned'):
        return {}
    m = (_dlp_Versioned if name == b'dltensor_versioned' else _dlp_Legacy).from_address(
        _dlp_pointer_of(capsule, name))
    if name == b'dltensor_versioned' and m.major != 1:
        return {'flags': m.flags, 'dtype': None, 'ndim': None, 'shape': None, 'strides': None}
    t = m.dl_tensor
    ok = 0 <= t.ndim <= 1024
    dims = lambda a: tuple((ctypes.c_int64 * t.ndim).from_address(a)) if a and ok else None
    return {'dtype': (t.code, t.bits, t.lanes), 'ndim': t.ndim, 'shape': dims(t.shape), 'strides': dims(t.strides),
            'data': t.data or 0, 'byte_offset': t.byte_offset,
            'flags': m.flags if name == b'dltensor_versioned' else None}
def _dlp_row_major(shape):
    out, step = [], 1
    for n in reversed(tuple(shape)):
        out.append(step)
        step *= max(int(n), 1)
    return tuple(reversed(out))'''


def lines(text):
    """The lines of a helper's source text, for a list of setup lines."""
    return text.splitlines()
