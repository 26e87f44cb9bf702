"""Forged capsules with counted deleters, and the Python producers that hand them out.

`Forge(**metadata)` makes capsules with any metadata, invalid included; each capsule() is a
fresh managed struct over the forge's one buffer, and its deleter counts its calls. The
producers (`RecordingProducer`, `CapsuleProducer`, `StreamDeviceProducer`, `CopyingProducer`)
hand a consumer such capsules through `__dlpack__` and record how it calls them.

Invariants (the C reference's Forge, probes/ref/forge.c, keeps the same):
- the buffer and every struct live while the Forge lives or any capsule with a non-NULL
  deleter has not had its deleter called: a consumer that reads after the Forge is dropped
  still reads valid memory; a capsule with a NULL deleter keeps them for the whole process;
- structs are freed with the forge, never by their deleter, so a second deleter call (a
  consumer's OWN-03 breach) is counted rather than a use after free;
- the capsules use the standard destructor: it calls the deleter of a capsule whose name does
  not start with used_ (CAP-05, CAP-06), skipping a NULL one;
- callbacks bind what they use as default arguments: a library may call a deleter or a
  destructor while the interpreter shuts down, after module globals are cleared.
"""
import ctypes
from collections.abc import Mapping

from . import abi
from .capsules import EXTENT_STATUSES, HOST_READABLE, call_deleter, gather_at, layout_extent
from .check import detach

#: the alignment of a forge's buffer (REF_ALIGN)
ALIGN = 256
#: the deepest layout expected_elements() reads (REF_MAX_NDIM) and the most shape entries a
#: struct carries (FORGE_MAX_NDIM)
MAX_READ_NDIM, MAX_NDIM = 64, 128
#: exceptions that were pending when a forge callback (deleter, destructor) began. CPython would
#: turn one into an unraisable SystemError as the callback returns, and the consumer that set
#: it would seem to fail without an exception: the callback takes it here instead, and
#: attempt() gives it back to the refusal it belongs to.
LOST = []
#: struct address -> (its _State, the struct): every struct of a forge whose state lives
_STRUCTS = {}
#: the states kept alive by a capsule whose deleter has not run yet (or by a NULL deleter)
_PINNED = {}


def _take_pending(_occurred=abi.err_occurred, _lost=LOST):
    """Moves an exception pending at a callback's start into LOST (a Python-API call through
    ctypes raises what is pending once it returns)."""
    try:
        _occurred()
    except BaseException as e:  # whatever the consumer had set
        _lost.append(e)


class _State:
    """The buffer, the structs and the deleter count of one Forge. It is pinned (kept alive)
    while its Forge lives or a struct with a deleter has not been given back yet."""

    def __init__(self):
        self.deleter_calls, self.log, self.raw = 0, [], None
        self.structs, self.deleted, self.outstanding, self.forge_alive = {}, set(), 0, True
        _PINNED[id(self)] = self

    def add(self, struct, arrays, counted):
        address = ctypes.addressof(struct)
        self.structs[address] = (struct, arrays)
        _STRUCTS[address] = (self, struct)
        self.outstanding += counted
        return address

    def unpin(self, _pinned=_PINNED, _structs=_STRUCTS):
        if self.outstanding == 0 and not self.forge_alive and _pinned.pop(id(self), None) is not None:
            for address in self.structs:
                _structs.pop(address, None)


def _on_delete(address, _pending=_take_pending, _structs=_STRUCTS):
    """Every forged struct's deleter: counts the call on its forge."""
    _pending()
    found = _structs.get(address)
    if found is None:
        return  # a struct of a forge already gone: a late call has nothing left to count
    st = found[0]
    st.deleter_calls += 1
    st.log.append({"thread_id": None, "gil_held": None, "py_initialized": True})
    if address not in st.deleted:
        st.deleted.add(address)
        st.outstanding -= 1
        st.unpin()


def _on_destroy(capsule, _pending=_take_pending, _c=ctypes, _at=(abi.CAPSULE_NAME_AT, abi.CAPSULE_POINTER_AT),
                _structs=_STRUCTS, _address=abi.address):
    """The standard capsule destructor: the deleter of a capsule not renamed used_* runs (a
    NULL one is skipped), with the GIL held."""
    _pending()
    name = _c.c_char_p.from_address(capsule + _at[0]).value
    if name is not None and name.startswith(b"used_"):
        return
    address = _c.c_void_p.from_address(capsule + _at[1]).value
    found = _structs.get(address)
    if found is not None and _address(found[1].deleter):
        call_deleter(_address(found[1].deleter), address)


#: the callbacks of every forge, kept for the life of the process: a capsule may outlive its
#: forge, and a library may call them at exit
_DELETER = abi.keep_forever(abi.Deleter(_on_delete))
_DESTRUCTOR = abi.keep_forever(abi.CapsuleDestructor(_on_destroy))


#: Forge's default strides: row-major where NULL would break LAY-06 (a versioned capsule of 1.2
#: or later with ndim > 0), else NULL; strides=None asks for NULL whatever the capsule
ROW_MAJOR_FROM_1_2 = "row-major from 1.2"


class Forge:
    """Capsules with any metadata: `dtype` (a name of abi.DTYPES or (code, bits, lanes)),
    `shape`, `strides` (in elements; the default ROW_MAJOR_FROM_1_2), `byte_offset`, `data`
    ("alloc": a buffer of the layout's extent filled with `fill` or the bytes 0, 1, 2, ...;
    "null"; or an address), `buffer_size`, `versioned`,
    `version`, `flags`, `device`, `null_deleter`, `ndim` (written as given), `shape_null`,
    `capsule_name`, `manager_ctx`; `owner`: an object the forge keeps alive with its structs (the
    owner of memory given as an address).

    `deleter_calls`, `capsules_made`, `log` (one dict per deleter call), `buffer_address`,
    `buffer_size`, `buffer` (a writable view, or None), `owner`, `capsule()`,
    `expected_elements()`.
    """

    def __init__(self, *, dtype=(2, 32, 1), shape=(4,), strides=ROW_MAJOR_FROM_1_2, byte_offset=0, data="alloc",
                 fill=None, buffer_size=None, versioned=True, version=abi.DLPACK_VERSION, flags=0, device=(1, 0),
                 null_deleter=False, ndim=None, shape_null=False, capsule_name=None, manager_ctx=None, owner=None):
        self.dtype = abi.DTYPES[dtype] if isinstance(dtype, str) else tuple(int(v) for v in dtype)
        self.shape = tuple(int(n) for n in shape)
        if isinstance(strides, str) and strides == ROW_MAJOR_FROM_1_2:
            # unasked, a forge is valid input: a versioned capsule of 1.2 or later has strides
            # whenever ndim > 0 (LAY-06); elsewhere NULL strides mean row-major (LAY-07, LAY-08)
            modern = versioned and tuple(version) >= (1, 2)
            strides = abi.row_major(self.shape) if modern and self.shape else None
        self.strides = None if strides is None else tuple(int(s) for s in strides)
        if self.strides is not None and len(self.strides) != len(self.shape):
            raise ValueError("strides must have one entry per shape entry")
        self.ndim = len(self.shape) if ndim is None else int(ndim)
        self.byte_offset, self.versioned, self.version = int(byte_offset), bool(versioned), tuple(version)
        self.flags, self.device, self.null_deleter = int(flags), tuple(device), bool(null_deleter)
        self.shape_null, self.manager_ctx = bool(shape_null), manager_ctx
        name = capsule_name or (abi.VERSIONED if self.versioned else abi.LEGACY)
        self.capsule_name = name.decode() if isinstance(name, bytes) else name
        self._name = abi.keep_forever(ctypes.c_char_p(self.capsule_name.encode()))  # outlives every capsule
        self.capsules_made = 0
        st = self._state = _State()
        st.owner = owner
        self.buffer_size, self.buffer_address, self.buffer = 0, None, None
        if data == "alloc":
            size = buffer_size
            if size is None:
                n = self.ndim if 0 <= self.ndim <= MAX_NDIM else len(self.shape)
                dims = (self.shape + (1,) * n)[:n]
                steps = None if self.strides is None else (self.strides + (0,) * n)[:n]
                e = layout_extent(n, dims, steps, self.dtype)
                size = self.byte_offset + e["hi"] if e["status"] == "ok" and not e["zero_size"] and e["hi"] > 0 else 0
            self.buffer_size = int(size)
            st.raw = ctypes.create_string_buffer(self.buffer_size + 2 * ALIGN)
            self.buffer_address = (ctypes.addressof(st.raw) + ALIGN - 1) & ~(ALIGN - 1)
            fill = bytes(i & 0xFF for i in range(self.buffer_size)) if fill is None else bytes(fill)
            if len(fill) > self.buffer_size:
                raise ValueError("fill is longer than the buffer")
            ctypes.memmove(self.buffer_address, fill, len(fill))
            self.buffer = memoryview((ctypes.c_uint8 * self.buffer_size).from_address(self.buffer_address)).cast("B")
            self.data = self.buffer_address
        elif data == "null":
            self.data = None
        elif isinstance(data, int):
            self.data = data
        else:
            raise ValueError("data must be 'alloc', 'null' or an int address")

    @property
    def deleter_calls(self):
        return self._state.deleter_calls

    @property
    def log(self):
        return list(self._state.log)

    def __del__(self):
        st = getattr(self, "_state", None)
        if st is not None:
            st.forge_alive = False
            st.unpin()

    @property
    def owner(self):
        """The object given as `owner` (None when none was)."""
        return self._state.owner

    def capsule(self):
        """A new capsule: a fresh managed struct over the forge's buffer."""
        st = self._state
        n = max(min(self.ndim, MAX_NDIM), len(self.shape), 1)
        shape = (ctypes.c_int64 * n)(*(self.shape + (1,) * n)[:n])
        strides = (ctypes.c_int64 * n)(*((self.strides or ()) + (0,) * n)[:n])
        m = (abi.DLManagedTensorVersioned if self.versioned else abi.DLManagedTensor)()
        t = m.dl_tensor
        t.data, t.device, t.ndim = self.data, abi.DLDevice(*self.device), self.ndim
        t.dtype = abi.DLDataType(*self.dtype)
        t.shape = None if self.shape_null else ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = None if self.strides is None else ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
        t.byte_offset = self.byte_offset
        m.manager_ctx = self.manager_ctx if self.manager_ctx is not None else ctypes.addressof(m)
        if not self.null_deleter:
            m.deleter = _DELETER
        if self.versioned:
            m.version, m.flags = abi.DLPackVersion(*self.version), self.flags
        address = st.add(m, (shape, strides), counted=not self.null_deleter)
        if self.null_deleter:
            st.outstanding += 1  # never given back: nothing could ever release it (OWN-01)
        self.capsules_made += 1
        return abi.capsule_new(address, self._name, _DESTRUCTOR)

    def expected_elements(self):
        """The bytes the forged tensor holds, in logical row-major order. Read from the host: memory
        the forge was given on a device the host cannot read (cudaMalloc'd data) is refused with
        ValueError, never read (on a GPU that is a segfault of dlconform's); its elements are the
        values written there (support/cuda.py: DeviceForge)."""
        if self.buffer is None and self.data and self.device[0] not in HOST_READABLE:
            raise ValueError("the forged data (%#x) was given on device type %d, which the host cannot read"
                             % (self.data, self.device[0]))
        if self.ndim < 0 or self.ndim > MAX_READ_NDIM or (self.shape_null and self.ndim > 0):
            raise ValueError("the forged layout has no elements to read")
        shape = (self.shape + (1,) * self.ndim)[:self.ndim]
        strides = None if self.strides is None else (self.strides + (0,) * self.ndim)[:self.ndim]
        e = layout_extent(self.ndim, shape, strides, self.dtype)
        if e["status"] != "ok":
            raise ValueError("invalid extent (status %d)" % EXTENT_STATUSES.index(e["status"]))
        if e["zero_size"]:
            return b""
        if not self.data:
            raise ValueError("NULL data for a non-empty tensor")
        if self.buffer is not None and (self.byte_offset + e["lo"] < 0
                                        or self.byte_offset + e["hi"] > self.buffer_size):
            raise ValueError("the forged extent leaves the buffer")
        return gather_at(self.data + self.byte_offset, shape, abi.row_major(shape) if strides is None else strides,
                       e["itemsize"])


# ---------------------------------------------------------------------------- producers
KNOWN_KEYWORDS = ("stream", "max_version", "dl_device", "copy")


def forges(**forge_kwargs):
    """A factory for RecordingProducer: `Forge(versioned=..., **forge_kwargs)`, one per kind."""
    made = {}

    def factory(versioned=True):
        if versioned not in made:
            made[versioned] = Forge(versioned=versioned, **forge_kwargs)
        return made[versioned]

    factory.made = made
    return factory


class RecordingProducer:
    """A producer that records `__dlpack_device__` / `__dlpack__` calls, and negotiates like a
    correct DLPack 1.3 producer: max_version None or major 0 gives a legacy capsule, major >= 1
    a versioned one.

    `forge`: a callable `f(versioned=bool) -> Forge` (`forges(...)`, or the class Forge), called
    once per kind; a mapping {"legacy": Forge, "versioned": Forge}; or one Forge for every kind.
    - `.calls`: one dict of keywords per `__dlpack__` call (positional arguments under "args");
      `.events`: method names in call order; `.forges`: {"legacy"/"versioned": forge} used so
      far; `.last_kind`;
    - `legacy_only`: an old producer whose `__dlpack__` takes only `stream`; `versioned_only`:
      one that cannot export legacy capsules (BufferError unless asked for >= 1.0);
    - `keep`: `.capsules` holds every capsule handed out, each once.
    """

    def __init__(self, forge, *, legacy_only=False, device=(1, 0), versioned_only=False, keep=False):
        if legacy_only and versioned_only:
            raise ValueError("legacy_only and versioned_only exclude each other")
        self._forge = forge
        self.legacy_only, self.versioned_only = legacy_only, versioned_only
        self.device, self.keep = tuple(device), keep
        self.capsules, self.calls, self.events, self.forges = [], [], [], {}
        self.last_kind = None

    def _record(self, args, kw):
        self.events.append("__dlpack__")
        record = dict(kw)
        if args:
            record["args"] = args
        self.calls.append(record)

    def _hand_out(self, capsule):
        if self.keep and not any(c is capsule for c in self.capsules):
            self.capsules.append(capsule)
        return capsule

    def _forge_for(self, versioned):
        kind = "versioned" if versioned else "legacy"
        f = self._forge
        if kind in self.forges:
            forge = self.forges[kind]
        elif isinstance(f, Mapping):
            forge = f[kind]
        elif isinstance(f, type) or (callable(f) and not hasattr(f, "capsule")):
            forge = f(versioned=versioned)
        else:
            forge = f
        self.forges[kind] = forge
        self.last_kind = kind
        return forge

    def __dlpack_device__(self):
        self.events.append("__dlpack_device__")
        return self.device

    def __dlpack__(self, *args, **kw):
        self._record(args, kw)
        if args:
            raise TypeError("__dlpack__() takes keyword arguments only (%d positional given)" % len(args))
        unknown = [k for k in kw if k not in KNOWN_KEYWORDS]
        if unknown:
            raise TypeError("__dlpack__() got an unexpected keyword argument %r" % unknown[0])
        if self.legacy_only:
            extra = [k for k in kw if k != "stream"]
            if extra:
                raise TypeError("__dlpack__() got an unexpected keyword argument %r" % extra[0])
        stream = kw.get("stream")
        if stream is not None and self.device[0] == 1:
            raise BufferError("stream must be None for a CPU tensor (got %r)" % (stream,))
        dl_device = kw.get("dl_device")
        if dl_device is not None and tuple(dl_device) != self.device:
            raise BufferError("cannot export to device %r" % (dl_device,))
        if kw.get("copy") is not None and not isinstance(kw.get("copy"), bool):
            raise TypeError("copy must be None or a bool")
        max_version = kw.get("max_version")
        if max_version is not None and not (isinstance(max_version, tuple) and len(max_version) == 2
                                            and all(isinstance(v, int) for v in max_version)):
            raise TypeError("max_version must be a tuple of two ints (got %r)" % (max_version,))
        versioned = max_version is not None and max_version[0] >= 1 and not self.legacy_only
        if self.versioned_only and not versioned:
            raise BufferError("this producer exports only versioned (DLPack >= 1.0) capsules")
        return self._hand_out(self._forge_for(versioned).capsule())


class CapsuleProducer(RecordingProducer):
    """Hands out the one capsule it was given, whatever the consumer asks (e.g. a capsule that
    another consumer already owns, CAP-04); records the calls like RecordingProducer."""

    def __init__(self, capsule, device=(1, 0)):
        super().__init__(None, device=device)
        self.capsule = capsule

    def __dlpack__(self, *args, **kw):
        self._record(args, kw)
        return self.capsule


def legacy_producer(forge, **kw):
    """An old producer: `__dlpack__(stream=None)` only, legacy capsules (VER-06)."""
    return RecordingProducer(forge, legacy_only=True, **kw)


class StreamDeviceProducer(RecordingProducer):
    """A producer that claims a device with streams (CUDA, ROCm, oneAPI) but has no such
    memory: it records every `__dlpack__` call, then refuses with BufferError (ERR-01), so the
    consumer's keywords can be seen without a GPU.

    `host_copies=True`: a request with `dl_device=(1, 0)` and `copy` not False is served with a
    host copy (a versioned capsule with IS_COPIED, or legacy), as a producer that can copy to
    the host would (DEV-06, CPY-06); `copy=False` with `dl_device=(1, 0)` is BufferError
    (CPY-05). Without it every request is refused.
    """

    REFUSAL = "dlconform StreamDeviceProducer: no memory on device %r"

    def __init__(self, device, *, host_copies=False, **forge_kwargs):
        forge_kwargs.setdefault("shape", (2, 3))
        super().__init__(forges(flags=abi.FLAG_IS_COPIED, **forge_kwargs), device=device)
        self._legacy_forge = None
        self._forge_kwargs = forge_kwargs
        self.host_copies = host_copies

    def __dlpack__(self, *args, **kw):
        self._record(args, kw)
        if args:
            raise TypeError("__dlpack__() takes keyword arguments only")
        dl_device = kw.get("dl_device")
        to_host = dl_device is not None and tuple(dl_device) == (1, 0)
        if to_host and self.host_copies:
            if kw.get("copy") is False:
                raise BufferError("dl_device=(1, 0) needs a copy but copy=False (CPY-05)")
            mv = kw.get("max_version")
            if mv is not None and mv[0] >= 1:
                return self._forge_for(True).capsule()
            if self._legacy_forge is None:
                self._legacy_forge = Forge(versioned=False, **self._forge_kwargs)
            return self._legacy_forge.capsule()
        raise BufferError(self.REFUSAL % (self.device,))


class CopyingProducer(RecordingProducer):
    """A RecordingProducer that honours `copy=True` as a correct producer must (CPY-01): the
    export then comes from a second forge (same element bytes, other memory; IS_COPIED on
    versioned capsules). `.original` / `.copies`: the forges of the two kinds of export."""

    def __init__(self, **forge_kwargs):
        forge_kwargs.setdefault("shape", (2, 3))
        self.original = forges(**forge_kwargs)
        self.copies = forges(**dict(forge_kwargs, flags=abi.FLAG_IS_COPIED))
        super().__init__(self.original)

    def __dlpack__(self, *args, **kw):
        cap = super().__dlpack__(*args, **kw)
        if kw.get("copy") is True:
            versioned = self.last_kind == "versioned"
            del cap  # its destructor gives the original struct back
            return self.copies(versioned=versioned).capsule()
        return cap


def attempt(call):
    """(call()'s result, None), or (None, the exception it raised, tracebacks dropped). A refusal
    that CPython reports as a C function failing without an exception, where a forge callback
    took the exception the library had set (LOST), gets that exception back."""
    del LOST[:]
    try:
        return call(), None
    except Exception as e:  # the check judges it
        if LOST and "without setting an exception" in str(e):
            e = LOST[-1]
        return None, detach(e)


class HostTensor:
    """A strided CPU tensor over memory the kit owns, exported as a correct DLPack 1.3 producer
    exports: versioned 1.3 capsules when asked for max_version >= (1, 0) (READ_ONLY for read-only
    data), legacy ones otherwise (refused with BufferError for read-only data, which a legacy
    capsule cannot mark), a compact IS_COPIED copy for copy=True, BufferError for a stream or a
    device other than the CPU. A sub-byte type is stored one element per byte and flagged
    IS_SUBBYTE_TYPE_PADDED (FLG-06). Each export is a fresh struct over the same memory, which lives
    until the last one is given back. `view()` makes another tensor over the same memory.

    `dtype` is a name of abi.DTYPES; `data` the logical row-major element bytes."""

    def __init__(self, dtype, shape, data=b"", readonly=False, _base=None):
        self.dtype, self.shape, self.readonly = dtype, tuple(int(n) for n in shape), bool(readonly)
        self.code = abi.DTYPES[dtype]
        self.itemsize = abi.itemsize(self.code)
        if _base is None:
            n = 1
            for d in self.shape:
                n *= d
            size = max(n * self.itemsize, 1)
            self._buffer = ctypes.create_string_buffer(size + ALIGN)
            self._base = (ctypes.addressof(self._buffer) + ALIGN - 1) & ~(ALIGN - 1)
            ctypes.memmove(self._base, bytes(data)[:size], min(len(data), size))
            self.strides, self.byte_offset = abi.row_major(self.shape), 0
        else:
            self._buffer, self._base, self.strides, self.byte_offset = _base

    @property
    def address(self):
        """The address of the first element."""
        return self._base + self.byte_offset

    def view(self, shape, strides, byte_offset, readonly=None):
        """A tensor over the same memory with this layout (strides in elements, byte_offset from
        the base)."""
        t = HostTensor(self.dtype, shape, readonly=self.readonly if readonly is None else readonly,
                       _base=(self._buffer, self._base, tuple(strides), int(byte_offset)))
        return t

    def tobytes(self):
        """The logical row-major element bytes."""
        if any(n == 0 for n in self.shape):
            return b""
        return gather_at(self.address, self.shape, self.strides, self.itemsize)

    def __dlpack_device__(self):
        return (abi.DLDeviceType.kDLCPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if stream is not None:
            raise BufferError("stream must be None for a CPU tensor")
        if dl_device is not None and tuple(dl_device) != (1, 0):
            raise BufferError("this tensor exports to (1, 0) only")
        if copy is not None and not isinstance(copy, bool):
            raise TypeError("copy must be None or a bool")
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        padded = abi.FLAG_SUBBYTE_PADDED if self.code[1] * self.code[2] < 8 else 0
        if copy:
            t = HostTensor(self.dtype, self.shape, self.tobytes())
            return Forge(dtype=self.code, shape=t.shape, strides=t.strides, data=t._base, versioned=versioned,
                         flags=(abi.FLAG_IS_COPIED | padded) if versioned else 0, owner=t).capsule()
        if self.readonly and not versioned:
            raise BufferError("a read-only tensor needs the READ_ONLY flag: ask for max_version >= (1, 0)")
        flags = (abi.FLAG_READ_ONLY if self.readonly else 0) | padded
        return Forge(dtype=self.code, shape=self.shape, strides=self.strides, byte_offset=self.byte_offset,
                     data=self._base, versioned=versioned, flags=flags if versioned else 0,
                     owner=self._buffer).capsule()
