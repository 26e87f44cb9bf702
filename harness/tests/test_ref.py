"""Tests of dlconform._ref, the reference DLPack 1.3 implementation.

Capsule contents are read with ctypes, so these tests depend on nothing but _ref (numpy and
torch round trips are skipped when those are missing)."""
import ctypes
import functools
import gc
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dlconform import _ref, kit

try:
    import numpy as np
except ImportError:  # pragma: no cover
    np = None
try:
    import torch
except ImportError:  # pragma: no cover
    torch = None

READ_ONLY, IS_COPIED, PADDED = 1, 2, 4

# ---- ctypes views of the ABI ---------------------------------------------------------


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


class ExchangeAPI(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("prev_api", ctypes.c_void_p), ("allocator", ctypes.c_void_p),
                ("from_py", ctypes.c_void_p), ("to_py", ctypes.c_void_p),
                ("dltensor_from_py", ctypes.c_void_p), ("current_work_stream", ctypes.c_void_p)]


assert ctypes.sizeof(DLTensor) == 48 and ctypes.sizeof(DLManagedTensorVersioned) == 80


class _PyAPI:
    """Private prototypes of C-API functions: ctypes.pythonapi's function objects are shared
    process-wide and other test modules set their own argtypes on them."""

    def __init__(self):
        def proto(name, restype, *argtypes):
            return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))
        self.PyCapsule_GetPointer = proto("PyCapsule_GetPointer", ctypes.c_void_p,
                                          ctypes.py_object, ctypes.c_char_p)
        self.PyCapsule_GetName = proto("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
        self.PyCapsule_SetName = proto("PyCapsule_SetName", ctypes.c_int, ctypes.py_object,
                                       ctypes.c_char_p)
        self.Py_DecRef = proto("Py_DecRef", None, ctypes.c_void_p)


_api = _PyAPI()

# names handed to PyCapsule_SetName must outlive the capsules: module constants
USED = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def name_of(cap):
    n = _api.PyCapsule_GetName(cap)
    return n.decode() if n is not None else None


def pointer_of(cap):
    return _api.PyCapsule_GetPointer(cap, _api.PyCapsule_GetName(cap))


def managed(cap):
    """(struct, versioned) for an unconsumed capsule, whatever its name."""
    ptr = pointer_of(cap)
    versioned = "versioned" in name_of(cap) or name_of(cap) == "dltensor-versioned"
    cls = DLManagedTensorVersioned if versioned else DLManagedTensor
    return cls.from_address(ptr), versioned


def mark_used(cap):
    assert _api.PyCapsule_SetName(cap, USED[_api.PyCapsule_GetName(cap)]) == 0


def dims(ptr, n):
    return None if not ptr else tuple(ptr[i] for i in range(n))


def fields(cap):
    m, versioned = managed(cap)
    t = m.dl_tensor
    return {
        "version": (m.major, m.minor) if versioned else None,
        "flags": m.flags if versioned else None,
        "data": t.data or 0,
        "device": (t.device.device_type, t.device.device_id),
        "ndim": t.ndim,
        "dtype": (t.dtype.code, t.dtype.bits, t.dtype.lanes),
        "shape": dims(t.shape, t.ndim),
        "strides": dims(t.strides, t.ndim),
        "byte_offset": t.byte_offset,
        "deleter": m.deleter,
    }


def floats(n, start=0.0):
    return struct.pack(f"{n}f", *[start + i for i in range(n)])


def f32(t):
    b = t.tobytes()
    return list(struct.unpack(f"{len(b) // 4}f", b))


@pytest.fixture
def fault():
    """set_fault(name) for one test; always reset."""
    yield _ref.set_fault
    _ref.set_fault(None)


class Counter:
    """A ctypes deleter that counts and optionally chains to the original."""

    def __init__(self, original=None):
        self.calls = 0
        self.original = DELETER(original) if original else None
        self.cb = DELETER(self._call)
        self.address = ctypes.cast(self.cb, ctypes.c_void_p).value

    def _call(self, ptr):
        self.calls += 1
        if self.original:
            self.original(ptr)


# ---- Tensor ---------------------------------------------------------------------------

def test_tensor_basics():
    t = _ref.Tensor("float32", (2, 3), data=floats(6))
    assert t.shape == (2, 3) and t.strides == (3, 1) and t.dtype == (2, 32, 1)
    assert t.itemsize == 4 and t.nbytes == 24 and t.byte_offset == 0
    assert t.data_ptr % 256 == 0 and not t.readonly
    assert f32(t) == [0, 1, 2, 3, 4, 5]
    assert t.__dlpack_device__() == (1, 0)
    assert _ref.Tensor((2, 64, 1), ()).tobytes() == b"\0" * 8  # 0-d, zero-filled
    z = _ref.Tensor("int8", (0, 3))
    assert z.data_ptr == 0 and z.tobytes() == b""


def test_tensor_dtype_names():
    for name, dt in [("bool", (6, 8, 1)), ("complex64", (5, 64, 1)), ("bfloat16", (4, 16, 1)),
                     ("float8_e4m3fn", (10, 8, 1)), ("uint16", (1, 16, 1)),
                     ("float32x4", (2, 32, 4))]:
        assert _ref.Tensor(name, (1,)).dtype == dt
    with pytest.raises(ValueError):
        _ref.Tensor("float31", (1,))
    with pytest.raises(ValueError):
        _ref.Tensor((99, 32, 1), (1,))


def test_tensor_strided_data_and_views():
    t = _ref.Tensor("float32", (2, 3), strides=(1, 2), data=floats(6))  # column-major
    assert f32(t) == [0, 1, 2, 3, 4, 5]
    base = _ref.Tensor("float32", (6,), data=floats(6))
    rev = base.view((6,), (-1,), 20)  # negative stride from the last element
    assert f32(rev) == [5, 4, 3, 2, 1, 0] and rev.data_ptr == base.data_ptr
    odd = base.view((1, 3), (7, 2), 0)  # size-1 dim with an odd stride (LAY-11)
    assert f32(odd) == [0, 2, 4]
    with pytest.raises(ValueError):
        base.view((7,), (1,), 0)
    with pytest.raises(ValueError):
        base.view((6,), (-1,), 16)  # first element before the buffer
    neg = _ref.Tensor("float32", (3,), strides=(-1,), byte_offset=8, data=floats(3))
    assert f32(neg) == [0, 1, 2]
    with pytest.raises(ValueError):
        _ref.Tensor("float32", (3,), strides=(-1,))  # byte_offset cannot reach element 2
    del base
    assert f32(rev) == [5, 4, 3, 2, 1, 0]  # views keep the buffer


def test_write_and_readonly():
    t = _ref.Tensor("float32", (3,))
    t.write(floats(3, 7))
    assert f32(t) == [7, 8, 9]
    r = _ref.Tensor("float32", (3,), readonly=True)
    with pytest.raises(ValueError):
        r.write(floats(3))


# ---- __dlpack__ -----------------------------------------------------------------------

def test_capsule_names_and_negotiation():
    t = _ref.Tensor("float32", (4,))
    assert name_of(t.__dlpack__()) == "dltensor"                            # VER-02, CAP-01
    assert name_of(t.__dlpack__(max_version=(1, 3))) == "dltensor_versioned"  # CAP-02
    assert name_of(t.__dlpack__(max_version=(1, 0))) == "dltensor_versioned"
    assert name_of(t.__dlpack__(max_version=(2, 0))) == "dltensor_versioned"  # VER-03
    assert name_of(t.__dlpack__(max_version=(0, 8))) == "dltensor"            # VER-04
    f = fields(t.__dlpack__(max_version=(2, 7)))
    assert f["version"] == (1, 3) and f["flags"] == 0                          # VER-07
    for bad in [(1,), [1, 3], (1, "3"), "1.3", 1]:
        with pytest.raises(TypeError):
            t.__dlpack__(max_version=bad)


def test_keyword_only_stream_device_copy():
    t = _ref.Tensor("float32", (4,))
    with pytest.raises(TypeError):
        t.__dlpack__(None)                                  # API-01
    with pytest.raises(BufferError):
        t.__dlpack__(stream=1)                              # STR-10
    with pytest.raises(BufferError):
        t.__dlpack__(stream=-1)
    with pytest.raises(TypeError):
        t.__dlpack__(stream="s")                            # STR-02
    assert t.__dlpack__(dl_device=(1, 0)) is not None
    for dev in [(2, 0), (1, 1), "cpu", (1,)]:
        with pytest.raises(BufferError):
            t.__dlpack__(dl_device=dev)                     # DEV-05
    with pytest.raises(TypeError):
        t.__dlpack__(copy=1)
    with pytest.raises(BufferError):
        _ref.Tensor("float32", (4,), exportable=False).__dlpack__()  # ERR-01


def test_exported_fields():
    t = _ref.Tensor("float32", (2, 3), strides=(1, 2), byte_offset=8)
    f = fields(t.__dlpack__(max_version=(1, 3)))
    assert f["data"] == t.data_ptr and f["data"] % 256 == 0
    assert f["device"] == (1, 0) and f["ndim"] == 2 and f["dtype"] == (2, 32, 1)
    assert f["shape"] == (2, 3) and f["strides"] == (1, 2) and f["byte_offset"] == 8
    legacy = fields(t.__dlpack__())
    assert legacy["strides"] == (1, 2) and legacy["version"] is None
    z = fields(_ref.Tensor("float32", (0, 2)).__dlpack__(max_version=(1, 3)))
    assert z["data"] == 0 and z["strides"] is not None                 # LAY-04, LAY-06
    s = fields(_ref.Tensor("float32", ()).__dlpack__(max_version=(1, 3)))
    assert s["ndim"] == 0


def test_readonly_and_copy_flags():
    r = _ref.Tensor("float32", (4,), readonly=True, data=floats(4))
    with pytest.raises(BufferError):
        r.__dlpack__()                       # no flag to carry READ_ONLY in a legacy capsule
    assert fields(r.__dlpack__(max_version=(1, 3)))["flags"] == READ_ONLY  # FLG-02
    c = fields(r.__dlpack__(max_version=(1, 3), copy=True))
    assert c["flags"] == IS_COPIED and c["data"] != r.data_ptr             # CPY-01, FLG-04
    assert fields(r.__dlpack__(copy=True))["data"] != r.data_ptr          # legacy copy works
    assert fields(r.__dlpack__(max_version=(1, 3), copy=False))["data"] == r.data_ptr
    sub = _ref.Tensor("float4_e2m1fn", (4,))
    assert fields(sub.__dlpack__(max_version=(1, 3)))["flags"] == PADDED  # FLG-06
    with pytest.raises(BufferError):
        sub.__dlpack__()


def test_copy_is_compact_and_independent():
    base = _ref.Tensor("float32", (6,), data=floats(6))
    v = base.view((3,), (-2,), 20)
    cap = v.__dlpack__(max_version=(1, 3), copy=True)
    got = _ref.from_dlpack(cap)
    assert f32(got) == [5, 3, 1] and got.strides == (1,) and not got.readonly
    base.write(floats(6, 10))
    assert f32(got) == [5, 3, 1]


def test_export_outlives_tensor():  # OWN-05
    t = _ref.Tensor("float32", (3,), data=floats(3, 1))
    caps = [t.__dlpack__(), t.__dlpack__(max_version=(1, 3))]
    del t
    gc.collect()
    assert [f32(_ref.from_dlpack(c)) for c in caps] == [[1, 2, 3], [1, 2, 3]]


def test_deleter_without_gil_from_thread():  # OWN-04
    t = _ref.Tensor("float32", (3,))
    cap = t.__dlpack__()
    m, _ = managed(cap)
    mark_used(cap)
    ptr = pointer_of(cap)
    th = threading.Thread(target=lambda: DELETER(m.deleter)(ptr))  # ctypes drops the GIL
    th.start()
    th.join()
    del cap, t


def test_capsule_destructor():  # CAP-05, CAP-06
    t = _ref.Tensor("float32", (3,))
    cap = t.__dlpack__()
    m, _ = managed(cap)
    c = Counter(m.deleter)
    m.deleter = c.address
    del cap
    assert c.calls == 1
    cap = t.__dlpack__()
    m, _ = managed(cap)
    orig = m.deleter
    c2 = Counter()
    m.deleter = c2.address
    mark_used(cap)
    del cap
    assert c2.calls == 0
    DELETER(orig)(ctypes.addressof(m))  # the "consumer" releases it


# ---- the cached versioned export ------------------------------------------------------

def test_cache_reuse():
    t = _ref.Tensor("float32", (4,))
    a = t.__dlpack__(max_version=(1, 3))
    b = t.__dlpack__(max_version=(1, 3))
    assert pointer_of(a) == pointer_of(b)
    assert pointer_of(t.__dlpack__(max_version=(1, 3), copy=True)) != pointer_of(a)
    assert pointer_of(t.__dlpack__()) != pointer_of(t.__dlpack__())  # legacy: fresh each
    del t
    gc.collect()
    assert fields(b)["data"] != 0
    del a
    assert fields(b)["shape"] == (4,)


def test_cache_race_threads():
    """Exchange-API hand-outs from many threads without the GIL all see one struct."""
    api = exchange_api()
    proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p))
    fn = proto(api.from_py)
    for _ in range(20):
        t = _ref.Tensor("float32", (4,))
        outs = [ctypes.c_void_p() for _ in range(8)]
        ths = [threading.Thread(target=fn, args=(id(t), ctypes.byref(o))) for o in outs]
        for th in ths:
            th.start()
        for th in ths:
            th.join()
        assert len({o.value for o in outs}) == 1
        for o in outs:
            DELETER(DLManagedTensorVersioned.from_address(o.value).deleter)(o.value)


# ---- exchange API ---------------------------------------------------------------------

def exchange_api():
    cap = _ref.Tensor.__dict__["__dlpack_c_exchange_api__"]
    assert name_of(cap) == "dlpack_exchange_api"
    return ExchangeAPI.from_address(pointer_of(cap))


SETERROR = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p)
ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor), ctypes.POINTER(ctypes.c_void_p),
                         ctypes.c_void_p, SETERROR)


def test_exchange_api_table():
    api = exchange_api()
    assert (api.major, api.minor) == (1, 3) and not api.prev_api      # XAPI-06/07
    assert all([api.allocator, api.from_py, api.to_py, api.dltensor_from_py,
                api.current_work_stream])
    assert "__dlpack_c_exchange_api__" in _ref.Tensor.__dict__          # XAPI-01


def test_exchange_from_py_and_to_py():
    api = exchange_api()
    from_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object,
                                ctypes.POINTER(ctypes.c_void_p))(api.from_py)
    t = _ref.Tensor("float32", (3,), readonly=True, data=floats(3, 2))
    out = ctypes.c_void_p()
    assert from_py(t, ctypes.byref(out)) == 0
    assert out.value == pointer_of(t.__dlpack__(max_version=(1, 3)))  # the cached struct
    m = DLManagedTensorVersioned.from_address(out.value)
    assert (m.major, m.minor) == (1, 3) and m.flags == READ_ONLY
    DELETER(m.deleter)(out.value)
    with pytest.raises(TypeError):
        from_py(object(), ctypes.byref(out))                          # XAPI-14

    # allocator -> to_py: the Tensor steals the tensor and calls the deleter when it dies
    alloc = ALLOC(api.allocator)
    shape = (ctypes.c_int64 * 2)(2, 3)
    proto = DLTensor(None, DLDevice(1, 0), 2, DLDataType(2, 32, 1), shape, None, 0)
    new = ctypes.c_void_p()
    assert alloc(ctypes.byref(proto), ctypes.byref(new), None, SETERROR()) == 0
    nm = DLManagedTensorVersioned.from_address(new.value)
    assert nm.dl_tensor.data % 256 == 0 and dims(nm.dl_tensor.strides, 2) == (3, 1)
    c = Counter(nm.deleter)
    nm.deleter = c.address
    to_py = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                              ctypes.POINTER(ctypes.c_void_p))(api.to_py)
    obj_addr = ctypes.c_void_p()
    assert to_py(new, ctypes.byref(obj_addr)) == 0
    obj = ctypes.cast(obj_addr.value, ctypes.py_object).value
    _api.Py_DecRef(obj_addr.value)  # the stolen reference
    assert type(obj) is _ref.Tensor and obj.shape == (2, 3) and f32(obj) == [0] * 6
    assert c.calls == 0
    del obj
    assert c.calls == 1


def test_exchange_allocator_errors():
    alloc = ALLOC(exchange_api().allocator)
    calls = []
    set_error = SETERROR(lambda ctx, kind, msg: calls.append(kind.decode()))
    shape = (ctypes.c_int64 * 1)(-1)
    out = ctypes.c_void_p(1)
    for proto, kind in [
        (DLTensor(None, DLDevice(1, 0), 1, DLDataType(99, 32, 1), shape, None, 0), "BufferError"),
        (DLTensor(None, DLDevice(1, 0), 1, DLDataType(2, 32, 1), shape, None, 0), "ValueError"),
        (DLTensor(None, DLDevice(2, 0), 1, DLDataType(2, 32, 1), shape, None, 0), "BufferError"),
    ]:
        calls.clear()
        assert alloc(ctypes.byref(proto), ctypes.byref(out), None, set_error) == -1
        assert calls == [kind] and out.value is None                  # XAPI-13
        assert alloc(ctypes.byref(proto), ctypes.byref(out), None, SETERROR()) == -1


def test_exchange_dltensor_and_stream():
    api = exchange_api()
    fill = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(DLTensor))(
        api.dltensor_from_py)
    t = _ref.Tensor("float32", (2, 2), strides=(1, 2), byte_offset=4)
    d = DLTensor()
    assert fill(t, ctypes.byref(d)) == 0
    assert d.data == t.data_ptr and dims(d.strides, 2) == (1, 2) and d.byte_offset == 4
    stream = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int32,
                               ctypes.POINTER(ctypes.c_void_p))(api.current_work_stream)
    s = ctypes.c_void_p(5)
    assert stream(1, 0, ctypes.byref(s)) == 0 and s.value is None     # XAPI-16
    with pytest.raises(BufferError):
        stream(2, 0, ctypes.byref(s))


# ---- from_dlpack ----------------------------------------------------------------------

def test_from_dlpack_ref_to_ref():
    t = _ref.Tensor("float32", (2, 3), strides=(1, 2), data=floats(6))
    r = _ref.from_dlpack(t)
    assert r.data_ptr == t.data_ptr and r.strides == (1, 2) and f32(r) == f32(t)  # zero-copy
    c = _ref.from_dlpack(t, copy=True)
    assert c.data_ptr != t.data_ptr and f32(c) == f32(t)
    assert _ref.from_dlpack(t, device="cpu").shape == (2, 3)
    assert _ref.from_dlpack(t, device=(1, 0)).shape == (2, 3)
    with pytest.raises(BufferError):
        _ref.from_dlpack(t, device=(2, 0))                            # CPY-08
    assert _ref.from_dlpack(_ref.Tensor("float32", (3,), readonly=True)).readonly
    with pytest.raises(AttributeError):
        _ref.from_dlpack(object())                                    # ERR-03


def test_from_dlpack_forge_ownership():
    f = _ref.Forge(shape=(2, 2))
    cap = f.capsule()
    r = _ref.from_dlpack(cap)
    assert name_of(cap) == "used_dltensor_versioned"                  # CAP-03
    assert f.deleter_calls == 0 and r.tobytes() == f.expected_elements()
    with pytest.raises(BufferError):
        _ref.from_dlpack(cap)                                         # CAP-04
    del cap
    assert f.deleter_calls == 0
    del r
    assert f.deleter_calls == 1                                       # OWN-03
    assert f.log[0]["gil_held"] and f.log[0]["py_initialized"]
    _ref.from_dlpack(f.capsule(), copy=True)
    assert f.deleter_calls == 2
    f.capsule()
    assert f.deleter_calls == 3 and f.capsules_made == 3              # CAP-05


def test_from_dlpack_forge_validation():
    def imported(**kw):
        f = _ref.Forge(**kw)
        try:
            r = _ref.from_dlpack(f.capsule())
        except BufferError:
            assert f.deleter_calls == 1  # refused: given back exactly once
            return None
        ok = r.tobytes() == f.expected_elements()
        del r
        assert f.deleter_calls == 1
        return ok

    assert imported(version=(2, 0)) is None                           # VER-08
    assert imported(version=(0, 9)) is None
    assert imported(version=(1, 9)) is True                           # VER-09: fields known
    assert imported(dtype=(99, 32, 1)) is None                        # VER-09
    assert imported(shape=(-1,)) is None                              # LAY-09
    assert imported(data="null") is None                              # LAY-04
    assert imported(shape=(0,), data="null") is True                  # LAY-04
    assert imported(versioned=False) is True                          # LAY-07 NULL strides
    assert imported(shape=(3,), byte_offset=4) is True                # LAY-03
    assert imported(shape=(3,), strides=(-1,), byte_offset=8) is True
    assert imported(device=(2, 0)) is None                            # DEV-07
    assert imported(flags=1 << 7) is None
    assert imported(shape=(2,), dtype=(6, 8, 1), fill=b"\x01\x00") is True
    f = _ref.Forge(flags=READ_ONLY)
    assert _ref.from_dlpack(f.capsule()).readonly                     # FLG-03
    f = _ref.Forge(null_deleter=True)
    r = _ref.from_dlpack(f.capsule())                                 # OWN-01
    del r
    assert f.deleter_calls == 0


def test_from_dlpack_retries_old_producer():  # VER-06
    class Old:
        def __init__(self):
            self.t = _ref.Tensor("float32", (2,), data=floats(2, 3))
            self.calls = []

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, stream=None):
            self.calls.append(stream)
            return self.t.__dlpack__()

    o = Old()
    assert f32(_ref.from_dlpack(o)) == [3, 4]
    assert o.calls == [None]


def test_forge_deleter_from_thread():
    f = _ref.Forge()
    r = _ref.from_dlpack(f.capsule())
    holder = [r]
    del r
    th = threading.Thread(target=holder.clear)
    th.start()
    th.join()
    assert f.deleter_calls == 1 and f.log[0]["thread_id"] == th.ident


def test_forge_buffer():
    f = _ref.Forge(shape=(4,), fill=b"\x00\x00\x80\x3f")
    assert f.buffer_size == 16 and f.buffer_address % 256 == 0
    assert bytes(f.buffer[:4]) == b"\x00\x00\x80\x3f"
    f.buffer[4:8] = b"\x00\x00\x00\x40"
    assert f.expected_elements()[:8] == b"\x00\x00\x80\x3f\x00\x00\x00\x40"
    assert name_of(_ref.Forge(versioned=False).capsule()) == "dltensor"
    assert name_of(_ref.Forge(capsule_name="weird").capsule()) == "weird"
    g = _ref.Forge(ndim=-1, shape_null=True, version=(9, 9))
    assert fields(g.capsule())["ndim"] == -1


# ---- interop --------------------------------------------------------------------------

@pytest.mark.skipif(np is None, reason="numpy missing")
def test_numpy_round_trips():
    t = _ref.Tensor("float32", (2, 3), strides=(1, 2), data=floats(6))
    a = np.from_dlpack(t)
    assert a.tolist() == [[0, 1, 2], [3, 4, 5]] and a.ctypes.data == t.data_ptr
    base = _ref.Tensor("int16", (6,), data=struct.pack("6h", *range(6)))
    assert np.from_dlpack(base.view((3,), (-2,), 10)).tolist() == [5, 3, 1]
    src = np.arange(12, dtype=np.int64).reshape(3, 4)[::-1, ::2]
    r = _ref.from_dlpack(src)
    assert list(struct.unpack("6q", r.tobytes())) == src.ravel().tolist()
    assert r.data_ptr + r.byte_offset == src.ctypes.data or r.data_ptr == src.ctypes.data
    assert np.from_dlpack(_ref.Tensor("complex64", (0,))).shape == (0,)


@pytest.mark.skipif(torch is None, reason="torch missing")
def test_torch_round_trips():
    t = _ref.Tensor("float32", (2, 3), data=floats(6))
    assert torch.from_dlpack(t).tolist() == [[0, 1, 2], [3, 4, 5]]
    # numpy 1.24 and torch 1.13 predate kDLBool (DT-03): bool is not exchanged with them
    src = torch.arange(6, dtype=torch.float64).reshape(2, 3).t()
    r = _ref.from_dlpack(src)
    assert r.shape == (3, 2) and r.strides == (1, 3)
    assert list(struct.unpack("6d", r.tobytes())) == src.flatten().tolist()


# ---- faults ---------------------------------------------------------------------------

def _t(**kw):
    return _ref.Tensor("float32", (3,), data=floats(3), **kw)


def _destructor_calls(used):
    cap = _t().__dlpack__()
    m, _ = managed(cap)
    c = Counter()
    m.deleter = c.address  # the struct leaks: fine in a test
    if used:
        mark_used(cap)
    del cap
    return c.calls


def _forge_import(**kw):
    f = _ref.Forge(**kw)
    try:
        r = _ref.from_dlpack(f.capsule())
    except BufferError:
        return "BufferError", f.deleter_calls
    return r, f


def _values_match(**kw):
    r, f = _forge_import(**kw)
    return r.tobytes() == f.expected_elements()


def _old_producer():
    class Old:
        t = _t()

        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()
    return _ref.from_dlpack(Old())


def _raises(fn):
    try:
        fn()
    except Exception as e:
        return type(e).__name__
    return None


def _no_rename():
    f = _ref.Forge()
    cap = f.capsule()
    r = _ref.from_dlpack(cap)
    del r, cap  # with the fault the unrenamed capsule's destructor also deletes
    return f.deleter_calls


def _after_death(**kw):
    f = _ref.Forge(**kw)
    r = _ref.from_dlpack(f.capsule())
    during = f.deleter_calls
    del r
    return during, f.deleter_calls


def _accepts_used():
    f = _ref.Forge()
    cap = f.capsule()
    mark_used(cap)
    return _raises(lambda: _ref.from_dlpack(cap))


def _in_child(code):
    """(died by a signal, printed 'alive') of code run in a child with the active fault."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "DLCONFORM_REF_FAULT": _ref.fault() or ""}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return p.returncode < 0, "alive" in p.stdout


def _null_deleter_crash():
    return _in_child("from dlconform import _ref;"
                     "r = _ref.from_dlpack(_ref.Forge(null_deleter=True).capsule()); del r; print('alive')")


# name -> observation; the observation must differ between clean and faulty runs
OBSERVE = {
    "legacy_capsule_name": lambda: name_of(_t().__dlpack__()),
    "versioned_capsule_name": lambda: name_of(_t().__dlpack__(max_version=(1, 3))),
    "destructor_leaks": lambda: _destructor_calls(used=False),
    "destructor_ignores_used": lambda: _destructor_calls(used=True),
    "version_wrong": lambda: fields(_t().__dlpack__(max_version=(1, 3)))["version"],
    "ignore_max_version": lambda: name_of(_t().__dlpack__()),
    "old_major_versioned": lambda: name_of(_t().__dlpack__(max_version=(0, 8))),
    "readonly_unflagged": lambda: fields(_t(readonly=True).__dlpack__(max_version=(1, 3)))["flags"],
    "copy_unflagged": lambda: fields(_t().__dlpack__(max_version=(1, 3), copy=True))["flags"],
    "undefined_flag": lambda: fields(_t().__dlpack__(max_version=(1, 3)))["flags"],
    "copy_ignored": lambda: (lambda t: fields(t.__dlpack__(max_version=(1, 3), copy=True))["data"]
                             == t.data_ptr)(_t()),
    "byte_strides": lambda: fields(_t().__dlpack__(max_version=(1, 3)))["strides"],
    "null_strides": lambda: fields(_t().__dlpack__(max_version=(1, 3)))["strides"],
    "zero_size_data": lambda: fields(_ref.Tensor("float32", (0,)).__dlpack__(
        max_version=(1, 3)))["data"],
    "bool_bits": lambda: fields(_ref.Tensor("bool", (2,)).__dlpack__(max_version=(1, 3)))["dtype"],
    "stream_accepted": lambda: _raises(lambda: _t().__dlpack__(stream=1)),
    "stream_systemerror": lambda: _raises(lambda: _t().__dlpack__(stream=1)),
    "dl_device_valueerror": lambda: _raises(lambda: _t().__dlpack__(dl_device=(2, 0))),
    "device_mismatch": lambda: fields(_t().__dlpack__(max_version=(1, 3)))["device"],
    "cpu_device_id": lambda: (_t().__dlpack_device__(),
                              fields(_t().__dlpack__(max_version=(1, 3)))["device"]),
    "positional_args": lambda: _raises(lambda: _t().__dlpack__(None, (1, 3))),
    "unexportable_typeerror": lambda: _raises(lambda: _t(exportable=False).__dlpack__()),
    "cache_no_cas": None,  # only a data race: observable under TSan, see test below
    "cache_deleter_no_gil": None,  # the same (test_tsan.py)
    "consumer_no_rename": _no_rename,
    "consumer_accepts_used": _accepts_used,
    "consumer_double_delete": _after_death,
    "consumer_delete_early": _after_death,
    "consumer_no_delete": _after_death,
    "consumer_ignores_byte_offset": lambda: _values_match(shape=(3,), byte_offset=4),
    "consumer_rejects_null_strides": lambda: type(_forge_import(versioned=False)[0]).__name__,
    "consumer_reads_major2": lambda: type(_forge_import(version=(2, 0))[0]).__name__,
    "consumer_null_deleter_call": _null_deleter_crash,
    "consumer_rejects_zero_size_null": lambda: type(
        _forge_import(shape=(0,), data="null")[0]).__name__,
    "consumer_accepts_negative_shape": lambda: type(_forge_import(shape=(-1,))[0]).__name__,
    "consumer_accepts_unknown_dtype": lambda: type(_forge_import(dtype=(99, 32, 1))[0]).__name__,
    "consumer_ignores_readonly": lambda: _forge_import(flags=READ_ONLY)[0].readonly,
    "consumer_no_retry": lambda: _raises(_old_producer),
}


# ---- observers of the stream, device and copy faults (vstream.c, consume.c, export.c) ----

def _vs(**kw):
    """(outcome, log with the streams renamed 'own'/'h', whether h survived) of one export of
    a virtual-stream-device tensor; kw's stream 'h' is a fresh handle."""
    d = _ref.DeviceTensor(_ref.Tensor("float32", (2, 3)))
    h = _ref.vstream_new()
    if kw.get("stream") == "h":
        kw["stream"] = h
    _ref.vstream_log(clear=True)
    try:
        d.__dlpack__(**kw)
        out = "ok"
    except Exception as e:
        out = type(e).__name__
    names = {d.stream: "own", h: "h"}
    log = [tuple(names.get(v, v) for v in e) for e in _ref.vstream_log(clear=True)]
    return out, log, _ref.vstream_alive(h)


def _consume(make, **kw):
    """(outcome, the producer's stream keywords) of _ref.from_dlpack(make(), **kw)."""
    p = make()
    try:
        _ref.from_dlpack(p, **kw)
        out = "ok"
    except Exception as e:
        out = type(e).__name__
    return out, [c.get("stream", "absent") for c in p.calls]


def _sdp(dev, **kw):
    from dlconform.kit import StreamDeviceProducer

    return lambda: StreamDeviceProducer(dev, **kw)


def _cpu_producer(dev=(1, 0)):
    from dlconform.kit import RecordingProducer, forges

    return RecordingProducer(forges(shape=(2,), device=dev), device=dev)


def _copy_shares():
    from dlconform.kit import CopyingProducer

    p = CopyingProducer(shape=(2,))
    y = _ref.from_dlpack(p, copy=True)
    return any(f.buffer_address <= y.data_ptr < f.buffer_address + f.buffer_size for f in p.original.made.values())


def _view_shares():
    x = _t()
    return _ref.from_dlpack(x).data_ptr == x.data_ptr


def _transposed_values():
    x = _ref.Tensor("float32", (2, 3), data=floats(6))
    return _ref.from_dlpack(x.view((3, 2), (1, 3))).tobytes()


def _export_flags(**kw):
    from dlconform import _probe

    return _probe.inspect(_t().__dlpack__(max_version=(1, 3), **kw))["flags"]


OBSERVE.update({
    "dl_device_cpu_refused": lambda: _raises(lambda: _t().__dlpack__(dl_device=(1, 0))),
    "copy_false_copies": lambda: _export_flags(copy=False),
    "vstream_no_wait": lambda: _vs(stream="h"),
    "vstream_sync_on_minus1": lambda: _vs(stream=-1),
    "vstream_none_per_thread": lambda: _vs(stream=None),
    "vstream_legacy_wrong": lambda: _vs(stream=1),
    "vstream_per_thread_wrong": lambda: _vs(stream=2),
    "vstream_handle_ignored": lambda: _vs(stream="h"),
    "vstream_accepts_zero": lambda: _vs(stream=0),
    "vstream_destroys_stream": lambda: _vs(stream="h"),
    "vstream_cpu_no_sync": lambda: _vs(dl_device=(1, 0)),
    "vstream_copy_on_producer_stream": lambda: _vs(stream="h", copy=True),
    "vstream_copy_false_copies": lambda: _vs(dl_device=(1, 0), copy=False),
    "consumer_stream_for_cpu": lambda: _consume(_cpu_producer),
    "consumer_cuda_stream_zero": lambda: _consume(_sdp((2, 0)), device="cpu"),
    "consumer_rocm_stream_one": lambda: _consume(_sdp((10, 0)), device="cpu"),
    "consumer_cpu_request_stream": lambda: _consume(_sdp((14, 0)), device="cpu"),
    "consumer_cuda_stream_none": lambda: _consume(_sdp((2, 0))),
    "consumer_foreign_device_typeerror": lambda: _consume(lambda: _cpu_producer((16, 0))),
    "consumer_refuses_cpu_copy": lambda: _consume(_sdp((2, 0), host_copies=True), device="cpu"),
    "consumer_copy_ignored": _copy_shares,
    "consumer_copy_false_copies": lambda: _consume(_sdp((2, 0), host_copies=True), device="cpu", copy=False),
    "consumer_device_valueerror": lambda: _consume(_sdp((2, 0)), device="cpu"),
    "consumer_result_device": lambda: _ref.from_dlpack(_cpu_producer()).__dlpack_device__(),
    "consumer_copies_always": _view_shares,
    "consumer_ignores_strides": _transposed_values,
})


# ---- exchange API (XAPI) and thread faults: what each changes, observed in process (None:
# the fault crashes or aborts by design; the suites see it in a child process)
def _xapi():
    from dlconform import _probe
    return _probe, _probe.exchange_api(_ref.Tensor)


def _xapi_fn(name):
    return lambda: _xapi()[1]["functions"][name] != 0


def _alloc_errors():
    probe, info = _xapi()
    return len(probe.xapi_alloc(info["pointer"], (250, 32, 1), (2,), (1, 0))[2])


def _to_py_steals():
    probe, info = _xapi()
    forge = _ref.Forge()
    rc, y = probe.xapi_to_py(info["pointer"], probe.consume(forge.capsule()))
    del y
    gc.collect()
    return forge.deleter_calls


def _forged_used(**kw):
    from dlconform import SUITES_DIR
    if SUITES_DIR not in sys.path:
        sys.path.insert(0, SUITES_DIR)
    from support.xapi_forge import forged, used_table
    a, b = _ref.ApiForge(0, **kw), _ref.ApiForge(1)
    _ref.from_dlpack(forged(_t(), type_table=a, instance_table=b))
    return used_table(a), used_table(b)


def _cached_after_release():
    from dlconform import _probe
    t = _t()
    a, b = t.__dlpack__(max_version=(1, 3)), t.__dlpack__(max_version=(1, 3))
    _probe.consume(a).release()
    return _probe.inspect(b)["shape"]


OBSERVE.update({
    "xapi_on_instance": lambda: _xapi()[1]["form"],
    "xapi_capsule_name": lambda: _xapi()[1]["capsule_name"],
    "xapi_int_form": lambda: _xapi()[1]["attr"],
    "xapi_table_per_lookup": lambda: getattr(_ref.Tensor, "__dlpack_c_exchange_api__")
    is getattr(_ref.Tensor, "__dlpack_c_exchange_api__"),
    "xapi_prev_api_garbage": lambda: _xapi()[1]["prev_api"] != 0,
    "xapi_null_allocator": _xapi_fn("managed_tensor_allocator"),
    "xapi_null_from_py": _xapi_fn("managed_tensor_from_py_object_no_sync"),
    "xapi_null_to_py": _xapi_fn("managed_tensor_to_py_object_no_sync"),
    "xapi_null_stream": _xapi_fn("current_work_stream"),
    "xapi_alloc_silent_failure": _alloc_errors,
    "xapi_alloc_double_seterror": _alloc_errors,
    "xapi_from_py_no_typecheck": None,
    "xapi_from_py_runtimeerror": lambda: type(_xapi()[0].xapi_managed_from(
        _xapi()[1]["pointer"], _t(exportable=False))[2]).__name__,
    "xapi_dltensor_copies": lambda: (lambda t: _xapi()[0].xapi_dltensor_from(_xapi()[1]["pointer"], t)[1]["data"]
                                     == t.data_ptr)(_t()),
    "xapi_stream_cpu_nonnull": lambda: _xapi()[0].xapi_current_stream(_xapi()[1]["pointer"], 1, 0),
    "xapi_to_py_no_steal": _to_py_steals,
    "xapi_abort_bad_device": None,
    "consumer_xapi_on_instance": _forged_used,
    "consumer_xapi_ignores_major": lambda: _forged_used(major=2),
    "consumer_xapi_null_dltensor": None,
    "cache_handout_unretained": _cached_after_release,
})


_NULL_DELETER_DIES = """
import ctypes
from dlconform import _probe, _ref
cap = _ref.Tensor("float32", (2,)).__dlpack__()
ctypes.c_void_p.from_address(_probe.inspect(cap)["pointer"] + 56).value = None  # deleter NULL: it leaks
del cap
print("alive")
"""


def _import_raises(**kw):
    return _raises(lambda: _ref.from_dlpack(_ref.Forge(**kw).capsule()))


# faults of issue 12 item 6: each (test, clause) pair of the suite fails under some fault
OBSERVE.update({
    "no_copy_keyword": lambda: _raises(lambda: _t().__dlpack__(copy=None)),
    "destructor_calls_null_deleter": lambda: _in_child(_NULL_DELETER_DIES),
    "subbyte_unflagged": lambda: fields(_ref.Tensor("float4_e2m1fn", (4,)).__dlpack__(max_version=(1, 3)))["flags"],
    "fp6_bits_8": lambda: fields(_ref.Tensor("float6_e2m3fn", (4,)).__dlpack__(max_version=(1, 3)))["dtype"],
    "fp4_bits_8": lambda: fields(_ref.Tensor("float4_e2m1fn", (4,)).__dlpack__(max_version=(1, 3)))["dtype"],
    "consumer_opaque_systemerror": lambda: _import_raises(dtype=(3, 64, 1)),
    "consumer_packed_systemerror": lambda: _import_raises(dtype=(17, 4, 1), shape=(4,)),
    "consumer_accepts_negative_ndim": lambda: _import_raises(shape=(), ndim=-1, buffer_size=64),
    "consumer_reads_null_shape": lambda: _in_child(
        "from dlconform import _ref\n"
        "try:\n    _ref.from_dlpack(_ref.Forge(shape=(2, 3), shape_null=True, buffer_size=64).capsule())\n"
        "except BufferError:\n    print('alive')"),
    "consumer_touches_span": lambda: _in_child(
        "from dlconform import _ref\n"
        "r = _ref.from_dlpack(_ref.Forge(shape=(1 << 40,), buffer_size=64).capsule()); print('alive')"),
    "xapi_header_major": lambda: kit.exchange_api(_ref.Tensor)["version"],
    # alive until the interpreter finalises: the child dies then under the exit faults
    "destructor_dies_at_exit": lambda: _in_child(
        "from dlconform import _ref\nkeep = _ref.Tensor('float32', (2,)).__dlpack__(); print('alive')"),
    "deleter_dies_at_exit": lambda: _in_child(
        "from dlconform import _ref\nkeep = _ref.from_dlpack(_ref.Tensor('float32', (2,)).__dlpack__())\n"
        "print('alive')"),
    "consumer_release_dies_at_exit": lambda: _in_child(
        "from dlconform import _ref\nkeep = _ref.from_dlpack(_ref.Forge(shape=(2,)).capsule()); print('alive')"),
})


# ---- CudaTensor on the simulated CUDA runtime (ref@cuda), in a child (the runtime is chosen at
# load): its table's four functions called once each on a tensor whose data is pending, and
# cuda_from_dlpack through a producer's table and through __dlpack__ in a stream context; what
# the line says changes under each cuda_* fault
_CUDA_TABLE = """
from dlconform import _ref, kit
from dlconform.kit import cuda
rt = cuda.runtime()
_ref.cuda_bind(cuda.addresses(rt, _ref.CUDA_FUNCTIONS))
api = kit.exchange_api(_ref.CudaTensor)["pointer"]
x = _ref.CudaTensor("float32", (4,), bytes(16))
rt.slow_fill(x.stream, x.ptr, x.nbytes, 7, 1000)
side = rt.stream().handle
_ref.cuda_set_stream(side)
before = rt.host_syncs()
rc, handle, _ = kit.xapi_managed_from(api, x)
pending_after_from = not rt.idle(x.stream)
rc2 = kit.xapi_dltensor_from(api, x, read=False)[0]
rc3 = kit.xapi_to_py(api, handle)[0]
print(rc, rc2, rc3, pending_after_from, rt.host_syncs() - before, rt.idle(side),
      kit.xapi_current_stream(api, 2, 0)[1] == side, end=" ")
# the consumer: the stream an import through a producer's table reads on, and the one it names
# to __dlpack__ inside the cuda_set_stream context
from dlconform import pyref
from support.cuda import TableProducer
a = pyref.to_device(pyref.zeros((4,), "float32"))
named = []
class Named:
    def __dlpack_device__(self):
        return a.__dlpack_device__()
    def __dlpack__(self, **kw):
        named.append(kw["stream"])
        return a.__dlpack__(**kw)
print(_ref.cuda_from_dlpack(TableProducer(a)).stream == a.stream, _ref.cuda_from_dlpack(Named()) is not None,
      named == [side], end=" ")
# device="cpu" with copy=False: refused (CPY-07), or a host copy under the fault
try:
    print(type(_ref.cuda_from_dlpack(_ref.CudaTensor("float32", (4,), bytes(16)), device="cpu", copy=False)).__name__,
          end=" ")
except BufferError:
    print("refused", end=" ")
# the strides of a CudaTensor's export (elements; bytes under cuda_strides_in_bytes)
print(kit.inspect(_ref.CudaTensor("float32", (2, 3), bytes(24)).__dlpack__(max_version=(1, 3)))["strides"])
"""


def _cuda_table():
    from dlconform import SUITES_DIR  # support.cuda's TableProducer

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path + [SUITES_DIR]),
           "DLCONFORM_REF_FAULT": _ref.fault() or "",
           "DLCONFORM_CUDART": str(Path(__file__).resolve().parents[2] / "build" / "cuda" / "sim" / "libcudart.so")}
    p = subprocess.run([sys.executable, "-c", _CUDA_TABLE], capture_output=True, text=True, env=env)
    return p.returncode, p.stdout.strip()


OBSERVE.update({name: _cuda_table for name in (
    "cuda_work_stream_ignores_context", "cuda_from_py_synchronizes", "cuda_dltensor_from_waits",
    "cuda_to_py_synchronizes", "cuda_consumer_ignores_work_stream", "cuda_consumer_ignores_context",
    "cuda_consumer_host_copy_false", "cuda_strides_in_bytes")})


def test_fault_table():
    assert len(_ref.FAULTS) >= 20 and set(OBSERVE) == set(_ref.FAULTS)
    clauses = {c for c, _ in _ref.FAULTS.values()}
    assert {"CAP-01", "OWN-03", "VER-08", "LAY-06"} <= clauses
    assert set(_ref.FAULT_SIDES.values()) == {"producer", "consumer"}
    assert _ref.fault() is None
    with pytest.raises(ValueError):
        _ref.set_fault("no_such_fault")


@pytest.mark.parametrize("name", sorted(n for n, f in OBSERVE.items() if f is not None))
def test_fault_changes_behaviour(name, fault):
    clean = OBSERVE[name]()
    fault(name)
    assert _ref.fault() == name
    broken = OBSERVE[name]()
    fault(None)
    assert broken != clean, (name, clean, broken)
    assert OBSERVE[name]() == clean  # no residue once reset


def test_fault_cache_no_cas_is_selectable(fault):
    fault("cache_no_cas")
    t = _t()
    a, b = t.__dlpack__(max_version=(1, 3)), t.__dlpack__(max_version=(1, 3))
    assert pointer_of(a) == pointer_of(b)  # single-threaded it still works


def test_fault_cache_deleter_no_gil_is_selectable(fault):
    fault("cache_deleter_no_gil")
    t = _t()
    a, b = t.__dlpack__(max_version=(1, 3)), t.__dlpack__(max_version=(1, 3))
    assert pointer_of(a) == pointer_of(b)  # with the GIL held the deleter is still correct
    del a, b


def test_fault_from_environment():
    code = "from dlconform import _ref; print(_ref.fault())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path),
           "DLCONFORM_REF_FAULT": "bool_bits"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.stdout.strip() == "bool_bits"


def _refused_deleter_calls():
    """Deleter calls of a major-2 capsule that from_dlpack refuses, once the capsule is gone."""
    f = _ref.Forge(versioned=True, version=(2, 0), shape=(2,))
    cap = f.capsule()
    _raises(functools.partial(_ref.from_dlpack, cap))
    del cap
    gc.collect()
    return f.deleter_calls


# faults of issue 12 item 5 (coverage): the two exchange-table hand-out faults are seen by the
# suite checks that test_cover_faults.py runs (a hand-out needs a forged table and its type)
OBSERVE.update({
    "stream_versioned_accepted": lambda: _raises(lambda: _t().__dlpack__(stream=1, max_version=(1, 3))),
    "consumer_renames_late": _refused_deleter_calls,
    "xapi_handout_version": None,
    "consumer_xapi_trusts_handout": None,
    "consumer_foreign_stream": None,  # needs a producer on a stream device: test_cover_faults.py
})


def test_cuda_table_clean_line():
    """The line _CUDA_TABLE prints for clean ref: every call succeeds, the data stays pending,
    nothing blocked the host or went onto the current stream, which current_work_stream names;
    the consumer refuses device="cpu" with copy=False (CPY-07); an export's strides are in
    elements (LAY-05)."""
    assert _cuda_table() == (0, "0 0 0 True 0 True True True True True refused (3, 1)")
