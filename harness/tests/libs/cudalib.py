"""cudalib: a pure-Python (ctypes) CUDA consumer, the shape of a small kernel library: its
`from_dlpack` copies a CUDA tensor into device memory of its own, on a work stream of its own.

from_dlpack(x) names its current stream to x.__dlpack__ (1, the legacy default stream, unless
inside `with cudalib.using(handle):`), makes its work stream (non-blocking, one per process)
wait for that stream, and copies the elements there. The `Array` it returns describes its
memory through `__cuda_array_interface__` (version 3, naming the work stream, where its data
is pending). With CUDALIB_READER=dlpack it has no such interface and exports itself through
`__dlpack__` instead, making the consumer's stream wait for the work stream; with
CUDALIB_READER=both it has both. With CUDALIB_VIEW=1 it copies nothing (but with copy=True): the Array views the
producer's memory, ready on the stream it named (the one its interface names and its export
orders after), keeping its strides. Whole-byte dtypes only, and compact tensors only unless it
views (BufferError for others). The runtime is the libcudart CUDALIB_CUDART names (default
libcudart.so).

Bugs can be planted with CUDALIB_BUG=name[,name...] (and one limit that is no bug: `no_0d`,
a library without 0-d arrays, which refuses 0-d tensors whatever their layout):
  no_wait         the work stream does not wait for the stream it named: the copy may run
                  before the producer's data is there
  stream_zero     names stream 0 to the producer
  stream_none     names stream=None (the legacy default stream) to the producer, whatever its
                  current stream, and orders its copy after the legacy stream
  minus_one       names -1 (no synchronisation), then copies without synchronising
  export_no_wait  (CUDALIB_READER=dlpack) __dlpack__(stream=S) does not make S wait for the
                  work stream
  export_offset   (CUDALIB_READER=dlpack or both) __dlpack__ describes its memory 4 bytes too far on
  export_device_1 (CUDALIB_READER=dlpack or both) __dlpack__ says its memory is on CUDA device 1
  as_bytes        from_dlpack imports every tensor as a flat uint8 one of the same bytes
  never_delete    an Array never calls the deleter of the tensor it imported
  ignores_offset  from_dlpack reads a tensor from its data pointer, leaving byte_offset out
  ignores_strides from_dlpack takes a strided tensor for a compact row-major one
  trusts_header   from_dlpack reads version, dtype, ndim, shape, extents and data unchecked
  device_not_implemented
                  from_dlpack raises NotImplementedError for any `device` but None (as cupy 14
                  does), instead of BufferError for one it cannot serve
  subbyte_as_bytes
                  from_dlpack takes fp6 and fp4 (codes 15 to 17) whose bits say 8 for whole-byte
                  elements, where dlpack.h says a consumer that sees other bits stops the import
  copy_false_runtimeerror
                  from_dlpack(copy=False), which it cannot serve without a copy, raises
                  RuntimeError, a class the array API does not name
"""
import contextlib
import ctypes
import os

from dlpack_structs import (DELETER, DLDataType, DLDevice, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
                            DLTensor, _GetPointer, _IsValid, _SetName, contiguous_strides, new_capsule)

__version__ = "0.3"

BUGS = set(filter(None, os.environ.get("CUDALIB_BUG", "").split(",")))
READER = os.environ.get("CUDALIB_READER", "cai")
VIEW = os.environ.get("CUDALIB_VIEW") == "1"
kDLCUDA = 2
_D2D, _NON_BLOCKING, _NO_TIMING = 3, 1, 2

_rt = ctypes.CDLL(os.environ.get("CUDALIB_CUDART") or "libcudart.so")
_vp = ctypes.c_void_p
for _name, _args in (("cudaMalloc", (ctypes.POINTER(_vp), ctypes.c_size_t)), ("cudaFree", (_vp,)),
                     ("cudaMemcpyAsync", (_vp, _vp, ctypes.c_size_t, ctypes.c_int, _vp)),
                     ("cudaStreamCreateWithFlags", (ctypes.POINTER(_vp), ctypes.c_uint)),
                     ("cudaStreamSynchronize", (_vp,)),
                     ("cudaEventCreateWithFlags", (ctypes.POINTER(_vp), ctypes.c_uint)),
                     ("cudaEventRecord", (_vp, _vp)), ("cudaStreamWaitEvent", (_vp, _vp, ctypes.c_uint)),
                     ("cudaEventDestroy", (_vp,))):
    getattr(_rt, _name).argtypes, getattr(_rt, _name).restype = _args, ctypes.c_int


def _ok(code, what):
    if code:
        raise RuntimeError("cudalib: %s failed (CUDA error %d)" % (what, code))


def _new(call, *args):
    h = _vp()
    _ok(getattr(_rt, call)(ctypes.byref(h), *args), call)
    return h.value


_current = [1]
_work = []


@contextlib.contextmanager
def using(handle):
    """Makes `handle` cudalib's current stream inside the block."""
    _current.append(handle)
    try:
        yield
    finally:
        _current.pop()


def current_stream():
    return _current[-1]


def _work_stream():
    if not _work:
        _work.append(_new("cudaStreamCreateWithFlags", _NON_BLOCKING))
    return _work[0]


def _order(waiter, on):
    """Makes stream `waiter` wait for the work enqueued on stream `on` so far."""
    event = _new("cudaEventCreateWithFlags", _NO_TIMING)
    _ok(_rt.cudaEventRecord(event, on), "cudaEventRecord")
    _ok(_rt.cudaStreamWaitEvent(waiter, event, 0), "cudaStreamWaitEvent")
    _rt.cudaEventDestroy(event)


#: struct address -> (the struct, its shape array, the Array): alive until the deleter runs
_EXPORTED = {}


@DELETER
def _exported_deleter(address):
    _EXPORTED.pop(address, None)


class Array:
    """nbytes of device memory holding an imported tensor, produced on `stream` (None: ready):
    a copy of cudalib's own, or a view of the producer's memory (`view`, the address of its
    first element; `strides` in elements, None for compact row-major)."""

    def __init__(self, shape, dtype, nbytes, source, stream, view=None, strides=None):
        self.shape, self.dtype, self.nbytes, self.stream, self.ptr = shape, dtype, nbytes, stream, None
        self.strides = strides
        self._owned = view is None
        self.ptr = _new("cudaMalloc", max(nbytes, 1)) if view is None else view
        self._source = source  # (address, managed struct) of the import, deleted once the copy is done

    def __del__(self):
        if self.ptr and self._owned:
            _rt.cudaStreamSynchronize(self.stream)
            _rt.cudaFree(self.ptr)
        self.ptr = None
        address, m = self._source
        if m.deleter and "never_delete" not in BUGS:
            m.deleter(address)

    def __getattr__(self, name):
        if name == "__cuda_array_interface__" and READER in ("cai", "both"):
            code, bits = self.dtype[:2]
            kind = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}.get(code, "V")
            item = bits * self.dtype[2] // 8
            return {"version": 3, "shape": self.shape, "typestr": "<%s%d" % (kind, bits // 8),
                    "data": (self.ptr, False), "stream": self.stream,
                    "strides": None if self.strides is None else tuple(s * item for s in self.strides)}
        raise AttributeError(name)


class ExportingArray(Array):
    """An Array that exports itself (CUDALIB_READER=dlpack or both)."""

    def __dlpack_device__(self):
        return (kDLCUDA, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        if dl_device is not None and tuple(dl_device) != (kDLCUDA, 0) or copy:
            raise BufferError("cudalib: no copies on export")
        if stream is not None and (not isinstance(stream, int) or isinstance(stream, bool)):
            raise TypeError("cudalib: stream must be an int or None, not %s" % type(stream).__name__)
        if stream is not None and not (stream == -1 or 0 < stream < 1 << 64):
            raise BufferError("cudalib: stream=%r names no CUDA stream" % (stream,))
        if stream != -1 and self.stream is not None and "export_no_wait" not in BUGS:
            _order(1 if stream is None else stream, self.stream)
        n = len(self.shape)
        shape = (ctypes.c_int64 * max(2 * n, 1))(*self.shape, *(self.strides or contiguous_strides(self.shape)))
        tensor = DLTensor(data=self.ptr, device=DLDevice(kDLCUDA, 1 if "export_device_1" in BUGS else 0), ndim=n,
                          dtype=DLDataType(*self.dtype), shape=shape,
                          strides=ctypes.cast(ctypes.addressof(shape) + 8 * n, ctypes.POINTER(ctypes.c_int64)),
                          byte_offset=4 if "export_offset" in BUGS else 0)
        versioned = max_version is not None and tuple(max_version)[0] >= 1
        if versioned:
            m = DLManagedTensorVersioned(version=DLPackVersion(1, 3), deleter=_exported_deleter, dl_tensor=tensor)
        else:
            m = DLManagedTensor(dl_tensor=tensor, deleter=_exported_deleter)
        _EXPORTED[ctypes.addressof(m)] = (m, shape, self)
        return new_capsule(m, versioned)


#: (name, the name a consumed capsule gets, struct): the names are constants, alive as long as the
#: module, since a capsule keeps the pointer it is given
_KINDS = ((b"dltensor_versioned", b"used_dltensor_versioned", DLManagedTensorVersioned),
          (b"dltensor", b"used_dltensor", DLManagedTensor))


def _take(cap):
    """(struct address, the managed struct) of an unconsumed capsule, renamed used_*."""
    for name, used, struct in _KINDS:
        if _IsValid(cap, name):
            ptr = _GetPointer(cap, name)
            _SetName(cap, used)
            return ptr, struct.from_address(ptr)
    raise BufferError("cudalib: not an unconsumed DLPack capsule")


def _check_header(m, t):
    """BufferError for a tensor cudalib cannot read: a major version other than 1, a dtype code
    it does not know (or no whole bytes: fp6 and fp4, codes 15 to 17, whatever their bits say),
    a negative ndim, a NULL shape."""
    if isinstance(m, DLManagedTensorVersioned) and m.version.major != 1:
        raise BufferError("cudalib: DLPack major version %d" % m.version.major)
    subbyte = t.dtype.code in (15, 16, 17) and "subbyte_as_bytes" not in BUGS
    if subbyte or not (t.dtype.code <= 17 and t.dtype.code != 3 and t.dtype.bits % 8 == 0 and t.dtype.bits
                       and t.dtype.lanes):
        raise BufferError("cudalib: no dtype (%d, %d, %d)" % (t.dtype.code, t.dtype.bits, t.dtype.lanes))
    if t.ndim < 0 or (t.ndim and not t.shape):
        raise BufferError("cudalib: ndim %d with %s shape" % (t.ndim, "a" if t.shape else "a NULL"))


def _check_extent(t, shape, item, count):
    """BufferError for extents that are negative, bytes past int64, or NULL data with elements."""
    strides = [int(t.strides[i]) for i in range(t.ndim)] if t.strides else [0] * t.ndim
    span = sum(abs((n - 1) * s) for n, s in zip(shape, strides) if n > 0) + 1
    if any(n < 0 for n in shape) or max(count, span) * item >= 1 << 63:
        raise BufferError("cudalib: shape %s, strides %s: not an extent it can hold" % (shape, strides))
    if count and not t.data:
        raise BufferError("cudalib: NULL data for %d elements" % count)


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array of x's elements on CUDA device 0 (`device` may say so: None, "cuda", (2, 0));
    a copy, unless CUDALIB_VIEW=1 views them (copy=True copies then too, copy=False is refused
    where every import is a copy)."""
    if device is not None and "device_not_implemented" in BUGS:
        raise NotImplementedError("cudalib: from_dlpack() does not support device yet")
    if device not in (None, "cuda", (kDLCUDA, 0)):
        raise BufferError("cudalib: arrays live on CUDA device 0 only, not %r" % (device,))
    if copy is False and not VIEW:
        raise (RuntimeError if "copy_false_runtimeerror" in BUGS else BufferError)(
            "cudalib: every import is a copy, and copy=False")
    view = VIEW and copy is not True
    if tuple(x.__dlpack_device__()) != (kDLCUDA, 0):
        raise BufferError("cudalib: CUDA memory on device 0 only")
    named = (0 if "stream_zero" in BUGS else -1 if "minus_one" in BUGS else None if "stream_none" in BUGS
             else current_stream())
    try:
        cap = x.__dlpack__(stream=named, max_version=(1, 3))
    except TypeError:
        cap = x.__dlpack__(stream=named)
    address, m = _take(cap)
    y = None
    try:
        t = m.dl_tensor
        if "trusts_header" not in BUGS:
            _check_header(m, t)
        if t.ndim == 0 and "no_0d" in BUGS:
            raise BufferError("cudalib: no 0-d arrays")
        shape = tuple(int(t.shape[i]) for i in range(t.ndim))
        item = t.dtype.bits * t.dtype.lanes // 8
        compact, step = True, 1
        for i in reversed(range(t.ndim)):
            compact = compact and (not t.strides or shape[i] == 1 or t.strides[i] == step)
            step *= shape[i]
        if "trusts_header" not in BUGS:
            _check_extent(t, shape, item, step)
        compact = compact or 0 in shape or "ignores_strides" in BUGS  # a zero-size tensor's strides say nothing
        if t.device.device_type != kDLCUDA or t.dtype.bits % 8 or not (compact or view):
            raise BufferError("cudalib: CUDA tensors of whole-byte dtypes only, compact unless viewed")
        strides = None if compact else tuple(int(t.strides[i]) for i in range(t.ndim))
        kind = ExportingArray if READER in ("dlpack", "both") else Array
        dtype = (t.dtype.code, t.dtype.bits, t.dtype.lanes)
        source = (t.data or 0) + (0 if "ignores_offset" in BUGS else t.byte_offset)
        if "as_bytes" in BUGS:
            shape, dtype, strides = (step * item,), (1, 8, 1), None
        if view:
            y = kind(shape, dtype, step * item, (address, m), named if named and named > 0 else None, view=source,
                     strides=strides)
            return y
        y = kind(shape, dtype, step * item, (address, m), _work_stream())
        work = _work_stream()
        if named not in (-1, 0) and "no_wait" not in BUGS:
            _order(work, 1 if named is None else named)
        if step * item:
            _ok(_rt.cudaMemcpyAsync(y.ptr, source, step * item, _D2D, work), "cudaMemcpyAsync")
        return y
    finally:
        if y is None and m.deleter:  # not imported: the producer's tensor goes now
            m.deleter(address)
