"""Tests of the C extension `dlconform._probe` (contract: probes/README.md).

Capsules are forged here with ctypes (DLManagedTensor[Versioned] structs, CFUNCTYPE deleters
that count their calls) so every field, valid or not, is under the test's control; numpy and
torch supply real producers' capsules. Clause IDs name what each behaviour protects.
"""
import ctypes
import gc
import threading

import pytest

from dlconform import _probe

# ---- ctypes mirror of dlpack.h v1.3 ---------------------------------------------------


# Written field by field from dlpack.h, independently of dlconform.kit.abi, so a mistake in
# either shows as a disagreement with _probe. Each entry: struct name, its fields in order.
_LAYOUT = (
    ("DLDevice", "device_type:i32 device_id:i32"),
    ("DLDataType", "code:u8 bits:u8 lanes:u16"),
    ("DLTensor", "data:ptr device:DLDevice ndim:i32 dtype:DLDataType shape:*i64 strides:*i64 byte_offset:u64"),
    ("DLPackVersion", "major:u32 minor:u32"),
)
_CTYPES = {"i32": ctypes.c_int32, "u8": ctypes.c_uint8, "u16": ctypes.c_uint16, "u32": ctypes.c_uint32,
           "u64": ctypes.c_uint64, "ptr": ctypes.c_void_p, "*i64": ctypes.POINTER(ctypes.c_int64)}
for _name, _spec in _LAYOUT:
    _fields = [(f, _CTYPES[t]) for f, t in (item.split(":") for item in _spec.split())]
    _CTYPES[_name] = globals()[_name] = type(_name, (ctypes.Structure,), {"_fields_": _fields})
DLDevice, DLDataType, DLTensor, DLPackVersion = (_CTYPES[n] for n, _ in _LAYOUT)


class DLManagedTensor(ctypes.Structure):
    pass


class DLManagedTensorVersioned(ctypes.Structure):
    pass


LEGACY_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
VERSIONED_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensorVersioned))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", LEGACY_DELETER)]
DLManagedTensorVersioned._fields_ = [("version", DLPackVersion), ("manager_ctx", ctypes.c_void_p),
                                     ("deleter", VERSIONED_DELETER), ("flags", ctypes.c_uint64),
                                     ("dl_tensor", DLTensor)]

assert ctypes.sizeof(DLTensor) == 48
assert ctypes.sizeof(DLManagedTensor) == 64
assert ctypes.sizeof(DLManagedTensorVersioned) == 80

# Capsule names must outlive the capsules (CAP-09): module-level bytes live for the process.
NAMES = {n: n.encode() for n in ("dltensor", "dltensor_versioned", "used_dltensor",
                                 "used_dltensor_versioned", "something_else",
                                 "dlpack_exchange_api", "not_the_api")}

_pyapi = ctypes.PyDLL(None)  # private prototypes: ctypes.pythonapi is shared by every module
_capsule_new = _pyapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_capsule_get_name = _pyapi.PyCapsule_GetName
_capsule_get_name.restype = ctypes.c_char_p
_capsule_get_name.argtypes = [ctypes.py_object]

CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def make_capsule(pointer, name, destructor=None):
    """A PyCapsule around an address; name None gives a nameless capsule."""
    return _capsule_new(pointer, NAMES[name] if name is not None else None,
                        ctypes.cast(destructor, ctypes.c_void_p) if destructor else None)


def capsule_name(cap):
    n = _capsule_get_name(cap)
    return n.decode() if n is not None else None


def i64(values):
    return (ctypes.c_int64 * max(1, len(values)))(*values)


class Forged:
    """A managed struct with its buffers, a counting deleter and capsule helpers.

    The data buffer holds bytes i & 0xff so values are predictable."""

    def __init__(self, shape=(2, 3), strides=None, itemsize=4, versioned=False,
                 version=(1, 3), flags=0, byte_offset=0, data="alloc", buffer_size=None,
                 null_deleter=False, ndim=None, shape_null=False, dtype=None, device=(1, 0)):
        self.calls = 0
        self.deleter_threads = []
        self.itemsize = itemsize
        self.shape_arr = i64(shape)
        self.strides_arr = i64(strides) if strides is not None else None
        if buffer_size is None:
            buffer_size = 1
            for s in shape:
                buffer_size *= max(s, 1)
            buffer_size = buffer_size * itemsize + byte_offset + 64
        self.buf = (ctypes.c_uint8 * buffer_size)(*[i & 0xFF for i in range(buffer_size)])
        if data == "alloc":
            data_ptr = ctypes.addressof(self.buf)
        elif data == "null":
            data_ptr = None
        else:
            data_ptr = data
        self.versioned = versioned
        if versioned:
            self.m = DLManagedTensorVersioned()
            self.m.version.major, self.m.version.minor = version
            self.m.flags = flags
            self._deleter = VERSIONED_DELETER(self._on_delete)
        else:
            self.m = DLManagedTensor()
            self._deleter = LEGACY_DELETER(self._on_delete)
        if not null_deleter:
            self.m.deleter = self._deleter
        t = self.m.dl_tensor
        t.data = data_ptr
        t.device.device_type, t.device.device_id = device
        t.ndim = len(shape) if ndim is None else ndim
        code, bits, lanes = dtype if dtype is not None else (1, 8 * itemsize, 1)
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        if not shape_null:
            t.shape = self.shape_arr
        if self.strides_arr is not None:
            t.strides = self.strides_arr
        t.byte_offset = byte_offset
        self.address = ctypes.addressof(self.m)
        self.data_address = data_ptr or 0

    def _on_delete(self, ptr):
        assert ctypes.addressof(ptr.contents) == self.address
        self.calls += 1
        self.deleter_threads.append(threading.get_ident())

    def capsule(self, name=None, destructor=None):
        if name is None:
            name = "dltensor_versioned" if self.versioned else "dltensor"
        return make_capsule(self.address, name, destructor)

    def expected(self, shape, strides):
        """Logical row-major element bytes computed in Python from the buffer."""
        raw = bytes(self.buf)
        base = self.m.dl_tensor.byte_offset
        out = bytearray()
        n = 1
        for s in shape:
            n *= s
        for flat in range(n):
            idx, rem = [], flat
            for s in reversed(shape):
                idx.append(rem % s)
                rem //= s
            idx.reverse()
            off = base + sum(i * st for i, st in zip(idx, strides)) * self.itemsize
            out += raw[off:off + self.itemsize]
        return bytes(out)


def producer_destructor(forged):
    """A capsule destructor as CAP-05..07 prescribe: calls the deleter only while the
    capsule still has its unconsumed name."""
    def destroy(cap_ptr):
        cap = ctypes.cast(cap_ptr, ctypes.py_object)
        name = _capsule_get_name(cap)
        if name in (b"dltensor", b"dltensor_versioned"):
            if forged.m.deleter:
                forged.m.deleter(ctypes.pointer(forged.m))
    return CAPSULE_DESTRUCTOR(destroy)


# ---- HEADER_VERSION, inspect ----------------------------------------------------------


def test_header_version():
    assert _probe.HEADER_VERSION == (1, 3)


def test_inspect_legacy_fields():
    f = Forged(shape=(2, 3), strides=(3, 1), itemsize=4, byte_offset=8)
    d = _probe.inspect(f.capsule())
    assert d["name"] == "dltensor"
    assert d["kind"] == "legacy"
    assert d["pointer"] == f.address
    assert d["destructor"] == 0
    assert d["version"] is None and d["flags"] is None
    assert d["readable"] is True
    assert d["deleter"] == ctypes.cast(f._deleter, ctypes.c_void_p).value
    assert d["manager_ctx"] == 0
    assert d["data"] == f.data_address
    assert d["device"] == (1, 0)
    assert d["ndim"] == 2
    assert d["dtype"] == (1, 32, 1)
    assert d["shape"] == (2, 3)
    assert d["strides"] == (3, 1)
    assert d["byte_offset"] == 8
    assert f.calls == 0  # inspect does not consume


def test_inspect_versioned_fields():
    f = Forged(shape=(4,), versioned=True, version=(1, 3), flags=3)
    d = _probe.inspect(f.capsule())
    assert d["kind"] == "versioned"
    assert d["name"] == "dltensor_versioned"
    assert d["version"] == (1, 3)
    assert d["flags"] == 3
    assert d["readable"] is True
    assert d["shape"] == (4,)
    assert d["strides"] is None  # NULL strides are reported as None, not guessed


def test_inspect_other_major_does_not_read_tensor():
    # VER-08: only the ABI-stable prefix (VER-10) may be read. Poison the tensor fields:
    # reading them would follow a wild shape pointer.
    f = Forged(shape=(4,), versioned=True, version=(2, 0))
    f.m.dl_tensor.shape = ctypes.cast(ctypes.c_void_p(0x10), ctypes.POINTER(ctypes.c_int64))
    f.m.dl_tensor.ndim = 3
    d = _probe.inspect(f.capsule())
    assert d["version"] == (2, 0)
    assert d["readable"] is False
    assert d["deleter"] == ctypes.cast(f._deleter, ctypes.c_void_p).value
    for key in ("data", "shape", "strides", "ndim", "dtype", "device", "byte_offset"):
        assert key not in d


@pytest.mark.parametrize("name,kind", [("used_dltensor", "used"),
                                       ("used_dltensor_versioned", "used"),
                                       ("something_else", "unknown"),
                                       (None, "unknown")])
def test_inspect_used_or_unknown_is_not_dereferenced(name, kind):
    # CAP-04: the pointer is garbage; dereferencing it would crash.
    cap = make_capsule(0x10, name)
    d = _probe.inspect(cap)
    assert d["kind"] == kind
    assert d["name"] == name
    assert d["pointer"] == 0x10
    assert "data" not in d and "deleter" not in d and "version" not in d


@pytest.mark.parametrize("bad", [None, 1, b"dltensor", object()])
def test_inspect_rejects_non_capsule(bad):
    with pytest.raises(TypeError):
        _probe.inspect(bad)


@pytest.mark.parametrize("ndim", [-1, -(2 ** 31), 1025, 2 ** 31 - 1])
def test_inspect_absurd_ndim_does_not_read_shape(ndim):
    # LAY-09: the shape array has 2 entries; reading ndim of them would overrun (ASan).
    f = Forged(shape=(2, 3), strides=(3, 1), ndim=ndim)
    d = _probe.inspect(f.capsule())
    assert d["ndim"] == ndim
    assert d["shape"] is None and d["strides"] is None


def test_inspect_null_shape():
    f = Forged(shape=(2, 3), shape_null=True)
    d = _probe.inspect(f.capsule())
    assert d["shape"] is None
    assert d["ndim"] == 2


def test_inspect_negative_device_type_is_signed():
    f = Forged(shape=(1,), device=(-1, 7))
    assert _probe.inspect(f.capsule())["device"] == (-1, 7)


# ---- extent ---------------------------------------------------------------------------


def test_extent_ok():
    f = Forged(shape=(2, 3), strides=(3, 1), itemsize=4)
    e = _probe.extent(f.capsule())
    assert e == {"status": "ok", "zero_size": False, "numel": 6, "itemsize": 4, "lo": 0,
                 "hi": 24, "row_major": True}


def test_extent_negative_strides():
    f = Forged(shape=(3,), strides=(-2,), itemsize=2, byte_offset=16)
    e = _probe.extent(f.capsule())
    assert e["status"] == "ok"
    assert (e["lo"], e["hi"]) == (-8, 2)
    assert e["row_major"] is False


@pytest.mark.parametrize("kwargs,status", [
    (dict(shape=(2, 3), shape_null=True), "null_shape"),
    (dict(shape=(2, -3)), "neg_shape"),
    (dict(shape=(2,), ndim=-1), "bad_ndim"),
    (dict(shape=(2,), ndim=5000), "bad_ndim"),
    (dict(shape=(2 ** 62, 4), strides=(4, 1), buffer_size=8), "overflow"),
    (dict(shape=(2 ** 40,), strides=(2 ** 40,), buffer_size=8), "overflow"),
    (dict(shape=(2,), dtype=(2, 0, 1)), "bad_itemsize"),
    (dict(shape=(2,), dtype=(2, 32, 0)), "bad_itemsize"),
])
def test_extent_invalid(kwargs, status):
    f = Forged(**kwargs)
    e = _probe.extent(f.capsule())
    assert e["status"] == status
    with pytest.raises(ValueError):
        _probe.read_elements(f.capsule())


def test_extent_zero_size():
    f = Forged(shape=(3, 0), data="null")
    e = _probe.extent(f.capsule())
    assert e["status"] == "ok" and e["zero_size"] is True and e["numel"] == 0


def test_extent_refuses_used_and_unknown():
    with pytest.raises(ValueError):
        _probe.extent(make_capsule(0x10, "used_dltensor"))
    with pytest.raises(ValueError):
        _probe.extent(make_capsule(0x10, "something_else"))
    with pytest.raises(TypeError):
        _probe.extent(42)


# ---- read_elements, gather ------------------------------------------------------------


def test_read_elements_row_major():
    f = Forged(shape=(2, 3), strides=(3, 1), itemsize=4)
    assert _probe.read_elements(f.capsule()) == bytes(range(24))


def test_read_elements_null_strides_is_row_major():
    # LAY-07: NULL strides in a legacy capsule mean compact row-major.
    f = Forged(shape=(2, 3), itemsize=2)
    assert _probe.read_elements(f.capsule()) == bytes(range(12))


def test_read_elements_transposed_and_offset():
    f = Forged(shape=(3, 2), strides=(1, 3), itemsize=4, byte_offset=4)
    got = _probe.read_elements(f.capsule())
    assert got == f.expected((3, 2), (1, 3))
    assert got[:8] == bytes([4, 5, 6, 7, 16, 17, 18, 19])


def test_read_elements_negative_strides():
    # LAY-03 with a negative stride: elements lie below data + byte_offset.
    f = Forged(shape=(4,), strides=(-1,), itemsize=2, byte_offset=6)
    got = _probe.read_elements(f.capsule())
    assert got == bytes([6, 7, 4, 5, 2, 3, 0, 1])


def test_read_elements_broadcast_stride_zero():
    f = Forged(shape=(3, 2), strides=(0, 1), itemsize=1)
    assert _probe.read_elements(f.capsule()) == bytes([0, 1, 0, 1, 0, 1])


def test_read_elements_ndim0():
    f = Forged(shape=(), itemsize=8, byte_offset=8)
    assert _probe.read_elements(f.capsule()) == bytes(range(8, 16))


def test_read_elements_zero_size_with_null_data():
    # LAY-04: a zero-size tensor may (should) carry NULL data.
    f = Forged(shape=(0, 5), data="null")
    assert _probe.read_elements(f.capsule()) == b""


def test_read_elements_null_data_non_empty():
    f = Forged(shape=(2,), data="null")
    with pytest.raises(ValueError, match="NULL"):
        _probe.read_elements(f.capsule())


def test_read_elements_device_memory_refused():
    f = Forged(shape=(2,), data=0x1000, device=(2, 0))  # kDLCUDA: not host memory
    with pytest.raises(ValueError, match="device"):
        _probe.read_elements(f.capsule())


def test_read_elements_other_major_refused():
    f = Forged(shape=(2,), versioned=True, version=(0, 9))
    with pytest.raises(ValueError, match="VER-08"):
        _probe.read_elements(f.capsule())


def test_read_elements_refuses_used_capsule():
    with pytest.raises(ValueError):
        _probe.read_elements(make_capsule(0x10, "used_dltensor_versioned"))


def test_read_elements_address_wrap():
    f = Forged(shape=(4,), strides=(1,), data=2 ** 64 - 2)
    with pytest.raises(ValueError, match="wraps"):
        _probe.read_elements(f.capsule())


def test_gather_strided():
    buf = (ctypes.c_uint8 * 64)(*range(64))
    addr = ctypes.addressof(buf)
    assert _probe.gather(addr, (2, 2), (4, 1), 2) == bytes([0, 1, 2, 3, 8, 9, 10, 11])
    assert _probe.gather(addr, (2, 2), None, 2) == bytes(range(8))
    assert _probe.gather(addr + 6, [3], [-1], 2) == bytes([6, 7, 4, 5, 2, 3])
    assert _probe.gather(addr, (), None, 4) == bytes(range(4))
    assert _probe.gather(0, (0, 3), None, 4) == b""


@pytest.mark.parametrize("args,exc", [
    ((0, (2,), None, 4), ValueError),             # NULL address, non-empty
    ((4096, (2,), None, 0), ValueError),          # itemsize 0
    ((4096, (2,), None, 70000), ValueError),      # itemsize too large
    ((4096, (2, 2), (1,), 4), ValueError),        # strides length mismatch
    ((4096, (-1,), None, 4), ValueError),         # negative extent
    ((4096, (2 ** 62, 8), None, 4), ValueError),  # overflowing extent
    ((4096, tuple([1] * 1025), None, 1), ValueError),  # ndim cap
    ((-1, (2,), None, 4), ValueError),            # negative address
    (("x", (2,), None, 4), TypeError),
    ((4096, 5, None, 4), TypeError),              # shape not a sequence
])
def test_gather_invalid(args, exc):
    with pytest.raises(exc):
        _probe.gather(*args)


# ---- check ----------------------------------------------------------------------------


def test_check_legacy_clean():
    f = Forged(shape=(2, 3), strides=(3, 1))
    assert _probe.check(f.capsule()) == []


def test_check_versioned_null_strides_is_lay06():
    # LAY-06 (v1.2+): strides must be non-NULL for ndim > 0 in a versioned capsule.
    f = Forged(shape=(2, 3), versioned=True)
    clauses = [c for c, _ in _probe.check(f.capsule())]
    assert "LAY-06" in clauses
    # Under spec 1.1 the rule did not exist yet.
    assert "LAY-06" not in [c for c, _ in _probe.check(f.capsule(), spec=(1, 1))]


def test_check_reports_version_and_messages():
    f = Forged(shape=(2,), strides=(1,), versioned=True, version=(2, 0))
    report = _probe.check(f.capsule())
    assert ("VER-07" in [c for c, _ in report])
    assert all(isinstance(m, str) and m for _, m in report)


def test_check_negative_extent():
    f = Forged(shape=(2, -1), strides=(1, 1))
    assert "LAY-09" in [c for c, _ in _probe.check(f.capsule())]


def test_check_refuses_used_unknown_and_bad_spec():
    with pytest.raises(ValueError):
        _probe.check(make_capsule(0x10, "used_dltensor"))
    with pytest.raises(ValueError):
        _probe.check(make_capsule(0x10, "something_else"))
    with pytest.raises(TypeError):
        _probe.check([])
    f = Forged(shape=(1,))
    with pytest.raises(TypeError):
        _probe.check(f.capsule(), spec=(1,))
    with pytest.raises(ValueError):
        _probe.check(f.capsule(), spec=(1, -3))


# ---- consume / Handle -----------------------------------------------------------------


@pytest.mark.parametrize("versioned", [False, True])
def test_consume_renames_and_releases_once(versioned):
    f = Forged(shape=(2, 3), strides=(3, 1), versioned=versioned)
    cap = f.capsule()
    h = _probe.consume(cap)
    # CAP-03: the consumer marks the capsule used.
    assert capsule_name(cap) == ("used_dltensor_versioned" if versioned else "used_dltensor")
    assert _probe.inspect(cap)["kind"] == "used"
    assert h.released is False and f.calls == 0
    assert h.inspect()["shape"] == (2, 3)
    assert h.read_elements() == _probe.gather(f.data_address, (2, 3), (3, 1), 4)
    assert h.release() is True
    assert f.calls == 1
    # OWN-03: exactly once.
    assert h.release() is False
    assert f.calls == 1 and h.released is True
    with pytest.raises(ValueError):
        h.inspect()
    with pytest.raises(ValueError):
        h.read_elements()
    # CAP-04: a used capsule cannot be consumed again.
    with pytest.raises(ValueError):
        _probe.consume(cap)


def test_handle_dealloc_releases():
    f = Forged(shape=(2,))
    h = _probe.consume(f.capsule())
    del h
    gc.collect()
    assert f.calls == 1


def test_handle_context_manager():
    f = Forged(shape=(2,), versioned=True)
    with _probe.consume(f.capsule()) as h:
        assert f.calls == 0
    assert f.calls == 1 and h.released


def test_consume_null_deleter():
    # OWN-01: a NULL deleter is legal and must be skipped.
    f = Forged(shape=(2,), null_deleter=True)
    h = _probe.consume(f.capsule())
    assert h.inspect()["deleter"] == 0
    assert h.release() is False
    assert h.released is True and h.deleter_called is False


def test_consume_other_major_still_releases():
    # VER-08: with another major the deleter must still be called, nothing else read.
    f = Forged(shape=(2,), versioned=True, version=(2, 1))
    h = _probe.consume(f.capsule())
    d = h.inspect()
    assert d["readable"] is False and "shape" not in d
    with pytest.raises(ValueError):
        h.read_elements()
    assert h.release() is True
    assert f.calls == 1


def test_consume_with_producer_destructor():
    # CAP-05/CAP-06: after consume the producer's destructor must not call the deleter;
    # the handle does, once.
    f = Forged(shape=(2,))
    destructor = producer_destructor(f)
    cap = f.capsule(destructor=destructor)
    assert _probe.inspect(cap)["destructor"] == ctypes.cast(destructor, ctypes.c_void_p).value
    h = _probe.consume(cap)
    del cap
    gc.collect()
    assert f.calls == 0
    h.release()
    assert f.calls == 1


def test_unconsumed_capsule_destructor_runs_deleter():
    f = Forged(shape=(2,))
    cap = f.capsule(destructor=producer_destructor(f))
    _probe.inspect(cap)
    del cap
    gc.collect()
    assert f.calls == 1


@pytest.mark.parametrize("name", ["used_dltensor", "used_dltensor_versioned", "something_else",
                                  None])
def test_consume_refuses(name):
    with pytest.raises(ValueError):
        _probe.consume(make_capsule(0x10, name))


def test_consume_rejects_non_capsule():
    with pytest.raises(TypeError):
        _probe.consume("dltensor")


# ---- rename ---------------------------------------------------------------------------


def test_rename():
    f = Forged(shape=(1,))
    cap = f.capsule()
    for name in ("used_dltensor", "dltensor_versioned", "used_dltensor_versioned", "dltensor"):
        _probe.rename(cap, name)
        assert capsule_name(cap) == name
    with pytest.raises(ValueError):
        _probe.rename(cap, "dltensor2")
    assert capsule_name(cap) == "dltensor"
    with pytest.raises(TypeError):
        _probe.rename(object(), "dltensor")


# ---- instrument / Tracker -------------------------------------------------------------


def trampoline_of(f):
    """The deleter now installed in f's struct, callable from ctypes (which drops the GIL
    around the call)."""
    addr = _probe.inspect(f.capsule())["deleter"]
    proto = VERSIONED_DELETER if f.versioned else LEGACY_DELETER
    ptype = DLManagedTensorVersioned if f.versioned else DLManagedTensor
    fn = proto(addr)
    return lambda: fn(ctypes.cast(ctypes.c_void_p(f.address), ctypes.POINTER(ptype)))


@pytest.mark.parametrize("versioned", [False, True])
def test_instrument_records_and_forwards(versioned):
    f = Forged(shape=(2,), versioned=versioned)
    original = _probe.inspect(f.capsule())["deleter"]
    tr = _probe.instrument(f.capsule())
    assert tr.kind == ("versioned" if versioned else "legacy")
    assert tr.pointer == f.address
    assert tr.calls == 0 and tr.log == [] and tr.original_null is False
    assert _probe.inspect(f.capsule())["deleter"] != original  # the trampoline
    h = _probe.consume(f.capsule())
    assert h.release() is True
    assert tr.calls == 1 and f.calls == 1 and tr.forwarded == 1
    (entry,) = tr.log
    assert entry == {"thread_id": threading.get_ident(), "gil_held": True,
                     "py_initialized": True}


def test_instrument_without_gil_and_other_thread():
    # OWN-04: the deleter may run without the GIL and from any thread.
    f = Forged(shape=(2,), versioned=True)
    tr = _probe.instrument(f.capsule())
    call = trampoline_of(f)
    t = threading.Thread(target=call)
    t.start()
    t.join()
    assert tr.calls == 1 and f.calls == 1
    (entry,) = tr.log
    assert entry["gil_held"] is False  # ctypes released the GIL around the foreign call
    assert entry["thread_id"] == t.ident != threading.get_ident()
    assert f.deleter_threads == [t.ident]


def test_instrument_null_original():
    f = Forged(shape=(2,), null_deleter=True)
    tr = _probe.instrument(f.capsule())
    assert tr.original_null is True
    assert _probe.inspect(f.capsule())["deleter"] != 0
    h = _probe.consume(f.capsule())
    assert h.release() is True  # the trampoline is non-NULL and was called
    assert tr.calls == 1 and tr.forwarded == 1 and f.calls == 0


def test_instrument_double_call_is_counted_not_forwarded():
    # OWN-03: a second call is recorded; forwarding it would be a double free.
    f = Forged(shape=(2,))
    tr = _probe.instrument(f.capsule())
    call = trampoline_of(f)
    call()
    call()
    assert tr.calls == 2 and tr.forwarded == 1 and f.calls == 1
    assert len(tr.log) == 2


def test_tracker_freed_before_deleter():
    f = Forged(shape=(2,), versioned=True)
    tr = _probe.instrument(f.capsule())
    h = _probe.consume(f.capsule())
    del tr
    gc.collect()
    assert h.release() is True
    assert f.calls == 1


def test_instrument_same_struct_twice_arms_twice():
    # A cached export hands the same struct out once per capsule; each hand-out's deleter
    # call is forwarded.
    f = Forged(shape=(2,), versioned=True)
    t1 = _probe.instrument(f.capsule())
    t2 = _probe.instrument(f.capsule())
    assert t1.armed == t2.armed == 2
    call = trampoline_of(f)
    call()
    call()
    call()
    assert t1.calls == t2.calls == 3
    assert t1.forwarded == 2 and f.calls == 2


def test_instrument_many_trackers_recycle():
    # Slots are reused once their tracker is gone and their calls are done.
    for _ in range(20000):
        f = Forged(shape=(1,), null_deleter=True)
        tr = _probe.instrument(f.capsule())
        _probe.consume(f.capsule()).release()
        assert tr.calls == 1
        del tr, f


def test_instrument_concurrent_deleters():
    # The trampoline table is shared by all threads; deleters run concurrently without the
    # GIL (NULL originals: no Python at all on the call path).
    forged = [Forged(shape=(1,), versioned=bool(i % 2), null_deleter=True) for i in range(400)]
    trackers = [_probe.instrument(f.capsule()) for f in forged]
    calls = [trampoline_of(f) for f in forged]
    threads = [threading.Thread(target=lambda k=k: [c() for c in calls[k::8]]) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [tr.calls for tr in trackers] == [1] * len(forged)
    assert all(tr.log[0]["gil_held"] is False for tr in trackers)
    idents = {t.ident for t in threads}
    assert {tr.log[0]["thread_id"] for tr in trackers} == idents


@pytest.mark.parametrize("name", ["used_dltensor", "something_else"])
def test_instrument_refuses(name):
    with pytest.raises(ValueError):
        _probe.instrument(make_capsule(0x10, name))
    with pytest.raises(TypeError):
        _probe.instrument(3)


# ---- exchange API ---------------------------------------------------------------------

ALLOC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLTensor),
                         ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)),
                         ctypes.c_void_p,
                         ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p,
                                          ctypes.c_char_p))
FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                           ctypes.POINTER(ctypes.POINTER(DLManagedTensorVersioned)))
TO_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(DLManagedTensorVersioned),
                         ctypes.POINTER(ctypes.c_void_p))
DLT_FROM_PY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.POINTER(DLTensor))
STREAM = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int32, ctypes.c_int32,
                          ctypes.POINTER(ctypes.c_void_p))


class XHeader(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("prev_api", ctypes.c_void_p)]


class XAPI(ctypes.Structure):
    _fields_ = [("header", XHeader), ("alloc", ALLOC), ("from_py", FROM_PY), ("to_py", TO_PY),
                ("dlt_from_py", DLT_FROM_PY), ("stream", STREAM)]


_incref = _pyapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


class FakeTable:
    """A DLPackExchangeAPI built from Python callbacks; objects registered with export()
    are exported as forged versioned tensors (keyed by id), anything else fails with -1.

    A ctypes callback cannot leave a Python exception set (ctypes reports and clears it),
    so these failures come without one; the exception paths are tested on `_ref`."""

    def __init__(self, version=(1, 3), dlt_from_py=True):
        self.forged = {}
        self.to_py_seen = []
        self.keep = []
        self._fns = (ALLOC(self._alloc), FROM_PY(self._from_py), TO_PY(self._to_py),
                     DLT_FROM_PY(self._dlt_from_py), STREAM(self._stream))
        self.api = XAPI()
        self.api.header.version.major, self.api.header.version.minor = version
        self.api.alloc, self.api.from_py, self.api.to_py = self._fns[:3]
        if dlt_from_py:
            self.api.dlt_from_py = self._fns[3]
        self.api.stream = self._fns[4]
        self.address = ctypes.addressof(self.api)

    def export(self, obj, **kw):
        self.forged[id(obj)] = Forged(versioned=True, **kw)
        return self.forged[id(obj)]

    def _from_py(self, obj_ptr, out):
        f = self.forged.get(obj_ptr)
        if f is None:
            return -1
        out[0] = ctypes.pointer(f.m)
        return 0

    def _dlt_from_py(self, obj_ptr, out):
        f = self.forged.get(obj_ptr)
        if f is None:
            return -1
        ctypes.memmove(out, ctypes.addressof(f.m.dl_tensor), ctypes.sizeof(DLTensor))
        return 0

    def _to_py(self, tensor, out):
        addr = ctypes.addressof(tensor.contents)
        self.to_py_seen.append(addr)
        result = ("tensor", addr)
        _incref(result)  # the out parameter carries a new reference
        out[0] = id(result)
        return 0

    def _stream(self, device_type, device_id, out):
        if device_type == 1:
            out[0] = None  # XAPI-16: NULL on CPU
            return 0
        if device_type == 2:
            out[0] = 0x1234 + device_id
            return 0
        return -1

    def _alloc(self, proto, out, ctx, set_error):
        t = proto.contents
        shape = tuple(t.shape[i] for i in range(t.ndim))
        if any(s < 0 for s in shape):
            set_error(ctx, b"ValueError", b"negative extent")
            return -1
        f = Forged(shape=shape, versioned=True, dtype=(t.dtype.code, t.dtype.bits,
                                                        t.dtype.lanes),
                   itemsize=max(1, t.dtype.bits // 8))
        self.keep.append(f)
        out[0] = ctypes.pointer(f.m)
        return 0


def api_capsule(table, name="dlpack_exchange_api"):
    return make_capsule(table.address, name)


def test_exchange_api_v13_capsule_on_type():
    table = FakeTable()

    class T:
        __dlpack_c_exchange_api__ = api_capsule(table)

    for target in (T, T()):
        d = _probe.exchange_api(target)
        assert d["attr"] == "__dlpack_c_exchange_api__"
        assert d["form"] == "capsule"
        assert d["superseded"] is False
        assert d["capsule_name"] == "dlpack_exchange_api"
        assert d["pointer"] == table.address
        assert d["on_type"] is True
        assert d["version"] == (1, 3)
        assert d["prev_api"] == 0
        fns = d["functions"]
        assert fns["managed_tensor_allocator"] == ctypes.cast(table._fns[0], ctypes.c_void_p).value
        assert fns["current_work_stream"] == ctypes.cast(table._fns[4], ctypes.c_void_p).value
        assert all(v != 0 for v in fns.values())


def test_exchange_api_instance_only():
    # XAPI-04: the table belongs on the type; found only on the instance -> on_type False.
    table = FakeTable()

    class T:
        pass

    obj = T()
    obj.__dlpack_c_exchange_api__ = api_capsule(table)
    d = _probe.exchange_api(obj)
    assert d["on_type"] is False and d["form"] == "capsule"
    assert _probe.exchange_api(T) is None


def test_exchange_api_superseded_int():
    # XAPI-03: the v1.2 integer attribute.
    table = FakeTable(dlt_from_py=False)

    class T:
        __c_dlpack_exchange_api__ = table.address

    d = _probe.exchange_api(T())
    assert d["attr"] == "__c_dlpack_exchange_api__"
    assert d["form"] == "int" and d["superseded"] is True
    assert d["pointer"] == table.address and d["version"] == (1, 3)
    assert d["functions"]["dltensor_from_py_object_no_sync"] == 0  # XAPI-11 allows NULL


def test_exchange_api_prefers_v13():
    table = FakeTable()

    class T:
        __dlpack_c_exchange_api__ = api_capsule(table)
        __c_dlpack_exchange_api__ = 0

    assert _probe.exchange_api(T)["attr"] == "__dlpack_c_exchange_api__"


@pytest.mark.parametrize("value,form,cap_name", [
    ("not a table", "other", None),
    (3.5, "other", None),
    (True, "other", None),
    (-5, "other", None),
    (12345, "int", None),  # an int under the v1.3 name is reported but not followed
])
def test_exchange_api_wrong_form_not_dereferenced(value, form, cap_name):
    T = type("T", (), {"__dlpack_c_exchange_api__": value})
    d = _probe.exchange_api(T)
    assert d["form"] == form
    assert d["version"] is None and d["functions"] is None and d["prev_api"] is None


def test_exchange_api_wrong_capsule_name():
    # XAPI-02: the capsule must be named exactly; the pointer is garbage and must not be read.
    T = type("T", (), {"__dlpack_c_exchange_api__": make_capsule(0x10, "not_the_api")})
    d = _probe.exchange_api(T)
    assert d["form"] == "other" and d["capsule_name"] == "not_the_api"
    assert d["pointer"] == 0 and d["version"] is None


def test_exchange_api_zero_int_superseded():
    T = type("T", (), {"__c_dlpack_exchange_api__": 0})
    d = _probe.exchange_api(T)
    assert d["form"] == "int" and d["pointer"] == 0 and d["version"] is None


def test_exchange_api_other_major_reads_header_only():
    table = FakeTable(version=(2, 0))
    T = type("T", (), {"__dlpack_c_exchange_api__": api_capsule(table)})
    d = _probe.exchange_api(T)
    assert d["version"] == (2, 0) and d["functions"] is None
    with pytest.raises(ValueError, match="XAPI-06"):
        _probe.xapi_current_stream(table.address, 1, 0)


def test_exchange_api_absent():
    assert _probe.exchange_api(object()) is None
    assert _probe.exchange_api(int) is None


def test_exchange_api_getattr_error_propagates():
    class Boom:
        def __getattr__(self, name):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        _probe.exchange_api(Boom())


# ---- xapi call helpers ----------------------------------------------------------------


class Obj:
    pass


def test_xapi_managed_from_success_and_release():
    table = FakeTable()
    obj = Obj()
    f = table.export(obj, shape=(2, 2), strides=(2, 1))
    rc, h, exc = _probe.xapi_managed_from(table.address, obj)
    assert rc == 0 and exc is None
    assert h.kind == "versioned" and h.pointer == f.address
    assert h.inspect()["version"] == (1, 3)
    assert h.read_elements() == bytes(range(16))
    assert h.release() is True and f.calls == 1


def test_xapi_managed_from_failure_returns_exception():
    table = FakeTable()
    rc, h, exc = _probe.xapi_managed_from(table.address, Obj())
    assert rc == -1 and h is None
    assert exc is None  # failed without setting an exception: a finding for XAPI-14


def test_xapi_dltensor_from():
    table = FakeTable()
    obj = Obj()
    f = table.export(obj, shape=(3,), strides=(2,), itemsize=1)
    rc, d = _probe.xapi_dltensor_from(table.address, obj)
    assert rc == 0
    assert d["shape"] == (3,) and d["strides"] == (2,) and d["data"] == f.data_address
    assert d["extent"]["status"] == "ok"
    assert d["elements"] == bytes([0, 2, 4])
    assert f.calls == 0  # non-owning (XAPI-15)
    rc, exc = _probe.xapi_dltensor_from(table.address, Obj())
    assert rc == -1 and exc is None


def test_xapi_dltensor_from_null_function():
    table = FakeTable(dlt_from_py=False)
    with pytest.raises(NotImplementedError, match="XAPI-11"):
        _probe.xapi_dltensor_from(table.address, Obj())


def test_xapi_current_stream():
    table = FakeTable()
    assert _probe.xapi_current_stream(table.address, 1, 0) == (0, 0)
    assert _probe.xapi_current_stream(table.address, 2, 3) == (0, 0x1237)
    rc, exc = _probe.xapi_current_stream(table.address, 99, 0)
    assert rc == -1 and exc is None


def test_xapi_alloc_success_and_error():
    table = FakeTable()
    rc, h, errors = _probe.xapi_alloc(table.address, (2, 32, 1), (2, 5), (1, 0))
    assert rc == 0 and errors == []
    d = h.inspect()
    assert d["shape"] == (2, 5) and d["dtype"] == (2, 32, 1)
    assert h.release() is True and table.keep[-1].calls == 1
    # XAPI-13: failure is reported through SetError, exactly when it fails.
    rc, h, errors = _probe.xapi_alloc(table.address, (2, 32, 1), (2, -5), (1, 0))
    assert rc == -1 and h is None
    assert errors == [("ValueError", "negative extent")]


def test_xapi_alloc_bad_arguments():
    table = FakeTable()
    with pytest.raises(ValueError):
        _probe.xapi_alloc(table.address, (2, 300, 1), (2,), (1, 0))
    with pytest.raises(TypeError):
        _probe.xapi_alloc(table.address, (2, 32), (2,), (1, 0))
    with pytest.raises(TypeError):
        _probe.xapi_alloc(table.address, (2, 32, 1), [2], (1, 0))


def test_xapi_to_py_steals():
    table = FakeTable()
    obj = Obj()
    f = table.export(obj, shape=(2,))
    rc, h, _ = _probe.xapi_managed_from(table.address, obj)
    rc, result = _probe.xapi_to_py(table.address, h)
    assert rc == 0 and result == ("tensor", f.address)
    assert table.to_py_seen == [f.address]
    # XAPI-17: the callee owns it now; the handle releases nothing.
    assert h.released and h.stolen
    assert h.release() is False and f.calls == 0
    with pytest.raises(ValueError):
        _probe.xapi_to_py(table.address, h)


def test_xapi_to_py_refuses_legacy_and_non_handle():
    table = FakeTable()
    f = Forged(shape=(1,))
    h = _probe.consume(f.capsule())
    with pytest.raises(ValueError):
        _probe.xapi_to_py(table.address, h)
    assert h.released is False
    with pytest.raises(TypeError):
        _probe.xapi_to_py(table.address, object())


@pytest.mark.parametrize("api", [0, "x"])
def test_xapi_bad_table_address(api):
    with pytest.raises((ValueError, TypeError)):
        _probe.xapi_current_stream(api, 1, 0)


# ---- real producers -------------------------------------------------------------------

def numpy_or_skip():
    return pytest.importorskip("numpy")


def torch_or_skip():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("make", [
    lambda np: np.arange(12, dtype=np.int32).reshape(3, 4),
    lambda np: np.arange(12, dtype=np.float64).reshape(3, 4).T,
    lambda np: np.arange(20, dtype=np.int16)[::-3],
    lambda np: np.arange(24, dtype=np.uint8).reshape(2, 3, 4)[:, 1:, ::2],
    lambda np: np.array(7.5, dtype=np.float32),
    lambda np: np.zeros((0, 3), dtype=np.complex64),
])
def test_numpy_capsule_values(make):
    np = numpy_or_skip()
    a = make(np)
    cap = a.__dlpack__()
    d = _probe.inspect(cap)
    assert d["kind"] == "legacy" and d["name"] == "dltensor"
    assert d["shape"] == a.shape
    assert _probe.check(cap) == [] or all(c in ("LAY-04", "LAY-01") for c, _ in _probe.check(cap))
    assert _probe.read_elements(cap) == a.tobytes(order="C")
    if a.size:
        strides = tuple(s // a.itemsize for s in a.strides)
        assert _probe.gather(d["data"] + d["byte_offset"], a.shape, strides,
                             a.itemsize) == a.tobytes()


def test_numpy_instrument_unconsumed_capsule():
    # CAP-05: an unconsumed capsule's destructor calls the deleter, with the GIL.
    np = numpy_or_skip()
    cap = np.arange(4).__dlpack__()
    tr = _probe.instrument(cap)
    del cap
    gc.collect()
    assert tr.calls == 1 and tr.forwarded == 1 and tr.original_null is False
    assert tr.log[0]["gil_held"] is True


def test_numpy_consume_release():
    np = numpy_or_skip()
    import sys
    a = np.arange(6, dtype=np.float32)
    before = sys.getrefcount(a)
    cap = a.__dlpack__()
    tr = _probe.instrument(cap)
    h = _probe.consume(cap)
    del cap
    gc.collect()
    assert tr.calls == 0  # CAP-06: the renamed capsule's destructor skipped the deleter
    assert h.read_elements() == a.tobytes()
    assert h.release() is True
    assert tr.calls == 1 and sys.getrefcount(a) == before


def test_torch_capsule_consume():
    torch = torch_or_skip()
    from torch.utils import dlpack as tdl
    t = torch.arange(12, dtype=torch.int64).reshape(3, 4).t()
    cap = tdl.to_dlpack(t)
    d = _probe.inspect(cap)
    assert d["kind"] == "legacy" and d["shape"] == (4, 3) and d["strides"] == (1, 4)
    assert d["device"] == (1, 0) and d["dtype"] == (0, 64, 1)
    assert _probe.read_elements(cap) == t.contiguous().numpy().tobytes()
    tr = _probe.instrument(cap)
    h = _probe.consume(cap)
    assert h.release() is True and tr.calls == 1
    assert _probe.exchange_api(torch.Tensor) is None or \
        _probe.exchange_api(torch.Tensor)["form"] in ("capsule", "int")


def test_torch_consumes_instrumented_capsule():
    # The trampoline stays transparent for a real consumer: torch calls it when its tensor
    # dies (OWN-03).
    torch_or_skip()
    np = numpy_or_skip()
    from torch.utils import dlpack as tdl
    a = np.arange(5, dtype=np.float32)
    cap = a.__dlpack__()
    tr = _probe.instrument(cap)
    t = tdl.from_dlpack(cap)
    assert _probe.inspect(cap)["kind"] == "used"
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert tr.calls == 0
    del t
    gc.collect()
    assert tr.calls == 1 and tr.forwarded == 1


# ---- the reference producer (dlconform._ref), when built --------------------------------


def ref_or_skip():
    return pytest.importorskip("dlconform._ref")


def test_ref_exchange_api_table():
    ref = ref_or_skip()
    t = ref.Tensor("float32", (2, 3))
    d = _probe.exchange_api(t)
    assert d == _probe.exchange_api(ref.Tensor)
    assert d["form"] == "capsule" and d["on_type"] is True and d["superseded"] is False
    assert d["version"] == (1, 3) and d["prev_api"] == 0  # XAPI-07
    assert all(v != 0 for v in d["functions"].values())  # XAPI-08..12


def test_ref_xapi_round_trip():
    ref = ref_or_skip()
    t = ref.Tensor("int16", (3, 4), data=bytes(range(24)))
    api = _probe.exchange_api(t)["pointer"]
    rc, h, exc = _probe.xapi_managed_from(api, t)
    assert rc == 0 and exc is None
    assert h.inspect()["version"] == (1, 3) and h.read_elements() == t.tobytes()
    rc, back = _probe.xapi_to_py(api, h)  # XAPI-17: stolen
    assert rc == 0 and isinstance(back, ref.Tensor) and back.tobytes() == t.tobytes()
    assert h.stolen and h.release() is False
    rc, d = _probe.xapi_dltensor_from(api, t)
    assert rc == 0 and d["shape"] == (3, 4) and d["elements"] == t.tobytes()


def test_ref_xapi_errors_carry_exceptions():
    ref = ref_or_skip()
    api = _probe.exchange_api(ref.Tensor)["pointer"]
    rc, h, exc = _probe.xapi_managed_from(api, object())
    assert rc == -1 and h is None and isinstance(exc, TypeError)
    rc, exc = _probe.xapi_dltensor_from(api, object())
    assert rc == -1 and isinstance(exc, TypeError)
    assert _probe.xapi_current_stream(api, 1, 0) == (0, 0)  # XAPI-16
    rc, exc = _probe.xapi_current_stream(api, 2, 0)
    assert rc == -1 and isinstance(exc, BufferError)


def test_ref_xapi_alloc():
    ref = ref_or_skip()
    api = _probe.exchange_api(ref.Tensor)["pointer"]
    rc, h, errors = _probe.xapi_alloc(api, (2, 32, 1), (2, 2), (1, 0))
    assert rc == 0 and errors == []
    d = h.inspect()
    assert d["shape"] == (2, 2) and d["dtype"] == (2, 32, 1) and d["device"] == (1, 0)
    assert h.release() is True
    rc, h, errors = _probe.xapi_alloc(api, (2, 32, 1), (2, 2), (2, 0))
    assert rc == -1 and h is None
    assert len(errors) == 1 and errors[0][0] == "BufferError"  # XAPI-13: exactly once


def test_ref_cached_export_instrumented_twice():
    # One struct per tensor, handed out per capsule: one deleter call per hand-out.
    ref = ref_or_skip()
    t = ref.Tensor("int16", (3, 4), data=bytes(range(24)))
    v = t.view((4, 3), (1, 4), 0)
    c1 = v.__dlpack__(max_version=(1, 3))
    c2 = v.__dlpack__(max_version=(1, 3))
    assert _probe.inspect(c1)["pointer"] == _probe.inspect(c2)["pointer"]
    assert _probe.check(c1) == []
    assert _probe.read_elements(c1) == v.tobytes()
    t1 = _probe.instrument(c1)
    t2 = _probe.instrument(c2)
    assert t1.armed == 2
    del c1, c2
    gc.collect()
    assert t1.calls == 2 and t1.forwarded == 2 and t2.calls == 2


def test_ref_forge_other_major():
    ref = ref_or_skip()
    f = ref.Forge(version=(2, 0))
    cap = f.capsule()
    d = _probe.inspect(cap)
    assert d["readable"] is False and d["version"] == (2, 0)
    h = _probe.consume(cap)
    assert h.release() is True and f.deleter_calls == 1  # VER-08


def test_ref_forge_values():
    ref = ref_or_skip()
    f = ref.Forge(shape=(3, 2), strides=(-2, 1), byte_offset=16, dtype=(1, 16, 1))
    cap = f.capsule()
    assert _probe.read_elements(cap) == f.expected_elements()
