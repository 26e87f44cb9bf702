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

api.PyCapsule_New.restype = ctypes.py_object
api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, CapsuleDestructor]

api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

api.PyCapsule_GetName.restype = ctypes.c_char_p
api.PyCapsule_GetName.argtypes = [ctypes.c_void_p]

api.PyCapsule_SetName.restype = ctypes.c_int
api.PyCapsule_SetName.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

api.PyCapsule_IsValid.restype = ctypes.c_int
api.PyCapsule_IsValid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

capsule_new = api.PyCapsule_New
capsule_get_pointer = api.PyCapsule_GetPointer
capsule_get_name = api.PyCapsule_GetName
capsule_set_name = api.PyCapsule_SetName
capsule_is_valid = api.PyCapsule_IsValid


def is_capsule(obj):
    return type(obj).__name__ == "PyCapsule" and type(obj).__module__ == "builtins"


def keep_forever(obj):
    """Gives obj a reference that is never dropped, so that it outlives interpreter teardown:
    for what C code may still use after the module is gone (callbacks, capsule names)."""
    api.Py_IncRef(ctypes.py_object(obj))
    return obj
