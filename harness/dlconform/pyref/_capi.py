"""The CPython capsule functions, through ctypes.pythonapi.

Every function that takes a capsule takes it as an address (c_void_p): the capsule
destructor gets a capsule whose reference count is already zero, and turning it back into
an object would resurrect it. Callers that hold a live capsule pass id(capsule), which is
its address in CPython, and keep the reference for the duration of the call.

pythonapi functions run with the GIL held and raise the Python exception a failing call
sets (PyCapsule_GetPointer with a wrong name raises ValueError).
"""
import ctypes

from ..kit.abi import CapsuleDestructor

api = ctypes.pythonapi
# Private prototypes: the function objects of ctypes.pythonapi are shared by the whole process,
# and a library under test in it may have set their argtypes and restype its own way (or rely
# on the defaults): dlconform's reference library never touches them.
_proto = ctypes.PYFUNCTYPE
capsule_new = _proto(ctypes.py_object, ctypes.c_void_p, ctypes.c_char_p, CapsuleDestructor)(("PyCapsule_New", api))
capsule_get_pointer = _proto(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_GetPointer", api))
capsule_get_name = _proto(ctypes.c_char_p, ctypes.c_void_p)(("PyCapsule_GetName", api))
capsule_set_name = _proto(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_SetName", api))
capsule_is_valid = _proto(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p)(("PyCapsule_IsValid", api))
_incref = _proto(None, ctypes.py_object)(("Py_IncRef", api))


def is_capsule(obj):
    return type(obj).__name__ == "PyCapsule" and type(obj).__module__ == "builtins"


def keep_forever(obj):
    """Gives obj a reference that is never dropped, so that it outlives interpreter teardown:
    for what C code may still use after the module is gone (callbacks, capsule names)."""
    _incref(obj)
    return obj
