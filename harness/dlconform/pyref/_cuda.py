"""Device arrays: pyref's arrays in CUDA memory, on whatever CUDA runtime loads.

pyref calls the runtime as a library would, through ctypes, with the runtime's prototypes
declared once in the kit (kit.cuda.PROTOTYPES), as it takes dlpack.h's from kit.abi. The
runtime is the library DLCONFORM_CUDART names (dlconform's simulated runtime,
build/cuda/sim/libcudart.so, makes device arrays testable without a GPU), else the
system's libcudart; dlopen gives every caller in the process the same loaded library, so
pyref's streams are the ones the caller's runtime knows.

Invariants:
  - a DeviceArray owns `nbytes` of device memory at `ptr` (freed when it dies) and a
    non-blocking stream of its own, `stream`: its data was produced on that stream, and work
    enqueued there may still be pending (STR-01 is about exactly that);
  - it is compact and row-major, and never read-only;
  - stream handles are ints, as DLPack passes them: 1 the legacy default stream, 2 the
    per-thread default stream, above 2 a cudaStream_t.
"""
import ctypes
import math

from ..kit.abi import DLDeviceType
# the CUDA runtime's declarations are made once, in the kit, as dlpack.h's are (kit.abi)
from ..kit import cuda as _declared
from . import _faults

_PROTOTYPES = _declared.PROTOTYPES
LEGACY, PER_THREAD, NON_BLOCKING, DISABLE_TIMING = (_declared.LEGACY, _declared.PER_THREAD, _declared.NON_BLOCKING,
                                                    _declared.DISABLE_TIMING)
HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = (_declared.HOST_TO_DEVICE, _declared.DEVICE_TO_HOST,
                                                    _declared.DEVICE_TO_DEVICE)
_vp, _int = ctypes.c_void_p, ctypes.c_int
#: cudaErrorNoDevice, the code of a process that has no CUDA device to use
_NO_DEVICE = 100


CudaError = _declared.CudaError
_OUT_OF_MEMORY = 2  # cudaErrorMemoryAllocation


class _Runtime:
    def __init__(self, lib):
        self.lib = lib
        for name, args in _PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, _int
        lib.cudaGetErrorString.argtypes, lib.cudaGetErrorString.restype = (_int,), ctypes.c_char_p

    def __call__(self, name, *args):
        code = getattr(self.lib, name)(*args)
        if code:
            self.lib.cudaGetLastError()
            text = self.lib.cudaGetErrorString(code)
            text = text.decode(errors="replace") if text else "?"
            if code == _OUT_OF_MEMORY:  # ERR-01: running out of memory is MemoryError
                raise MemoryError("%s: %s (cudaError %d)" % (name, text, code))
            raise CudaError(name, code, text)

    def stream(self):
        h = _vp()
        self("cudaStreamCreateWithFlags", ctypes.byref(h), NON_BLOCKING)
        return h.value

    def event(self):
        h = _vp()
        self("cudaEventCreateWithFlags", ctypes.byref(h), DISABLE_TIMING)
        return h.value

    def order(self, consumer, producer):
        """Makes stream `consumer` wait for what is enqueued on `producer` now: an event
        recorded there, waited on there (STR-01)."""
        event = self.event()
        try:
            self("cudaEventRecord", event, producer)
            self("cudaStreamWaitEvent", consumer, event, 0)
        finally:
            self("cudaEventDestroy", event)


def runtime():
    """(the runtime, None) or (None, why there is none)."""
    return _declared.load(_counted)


def _counted(lib, name):
    """pyref's runtime over `lib`, with its device count (kit.cuda.load asks for it)."""
    rt = _Runtime(lib)
    n = _int(0)
    rt("cudaGetDeviceCount", ctypes.byref(n))
    rt.devices = n.value
    return rt


def cuda_available():
    """(True, "") when pyref can make device arrays, else (False, why not)."""
    rt, why = runtime()
    return rt is not None, why or ""


def _need():
    rt, why = runtime()
    if rt is None:
        raise CudaError("pyref.to_device", _NO_DEVICE, "pyref has no CUDA device: %s" % why)
    return rt


#: the CUDA array interface's type kinds by DLPack type code (int, uint, float, complex, bool)
_CAI_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}

#: the default of DeviceArray.__dlpack__'s stream: None, told apart from a None passed
_OMITTED = type("_Omitted", (), {"__repr__": lambda self: "None"})()


class DeviceArray:
    """A compact row-major array in CUDA memory, produced on its own non-blocking `stream`.
    Make one with pyref.to_device(array)."""

    def __init__(self, *args, **kwargs):
        raise TypeError("use pyref.to_device to make a DeviceArray")

    @classmethod
    def _new(cls, rt, dtype, shape, stream=None):
        from ._array import numel, row_major_strides

        self = object.__new__(cls)
        self._rt, self._dtype, self._shape = rt, dtype, tuple(shape)
        self._strides = row_major_strides(self._shape)
        self.nbytes = numel(self._shape) * dtype.itemsize
        self.ptr = 0
        self.stream = stream or rt.stream()
        self._own_stream = stream is None
        if self.nbytes:
            p = _vp()
            rt("cudaMalloc", ctypes.byref(p), self.nbytes)
            self.ptr = p.value
        self._staging = None
        return self

    @classmethod
    def _over(cls, rt, owner, dtype, shape, ptr, stream, readonly=False):
        """An import (device_from_dlpack): the compact row-major memory at ptr, which `owner`
        (the imported managed tensor) keeps alive and gives back when this array dies; read on
        `stream`, the stream the import named to its producer; `readonly` when the export said
        READ_ONLY (FLG-03: pyref says so). Owns neither memory nor stream."""
        from ._array import numel, row_major_strides

        self = object.__new__(cls)
        self._rt, self._dtype, self._shape = rt, dtype, tuple(shape)
        self._strides = row_major_strides(self._shape)
        self.nbytes = numel(self._shape) * dtype.itemsize
        self.ptr, self.stream, self._own_stream, self._staging = ptr, stream, False, None
        self._owner, self._readonly = owner, bool(readonly)
        return self

    _owner, _readonly = None, False

    def __del__(self):
        rt = getattr(self, "_rt", None)
        if rt is None:
            return
        if self._owner is not None:  # an import: the producer's memory goes back through its deleter
            self._owner.release()
            return
        try:
            if self.ptr:
                rt("cudaFree", self.ptr)  # synchronizes the device first, as CUDA's does
            if self._own_stream:
                rt("cudaStreamDestroy", self.stream)
        except Exception:  # interpreter teardown, or a runtime already gone
            pass

    dtype = property(lambda self: self._dtype.name)
    dl_dtype = property(lambda self: (int(self._dtype.code), self._dtype.bits, self._dtype.lanes))
    shape = property(lambda self: self._shape)
    strides = property(lambda self: self._strides)
    ndim = property(lambda self: len(self._shape))
    size = property(lambda self: math.prod(self._shape))
    itemsize = property(lambda self: self._dtype.itemsize)
    readonly = property(lambda self: self._readonly)
    device = property(lambda self: "cuda:0")
    address = property(lambda self: self.ptr)
    dl_data = property(lambda self: (self.ptr, 0))

    dl_device = property(lambda self: (DLDeviceType.kDLCUDA, 0))

    @property
    def __cuda_array_interface__(self):
        """The CUDA array interface (version 3): how CUDA libraries describe device memory to
        each other, and how dlconform's fuzz oracles find where an import lies. A dtype it has no
        type kind for (bfloat16, float8, vectors) is raw bytes ("V"), as NumPy's array interface
        writes them."""
        d, size = self._dtype, self._dtype.itemsize
        kind = _CAI_KINDS.get(int(d.code)) if d.lanes == 1 and d.bits == 8 * size else None
        if kind is None or (kind == "f" and d.bits < 16):
            kind = "V"
        order = "|" if size == 1 or kind == "V" else "<"
        return {"shape": self._shape, "strides": None, "typestr": order + kind + str(size),
                "data": (self.ptr, self._readonly), "version": 3, "stream": int(self.stream) or None}

    def __repr__(self):
        return "pyref.DeviceArray(dtype=%r, shape=%r, device='cuda:0')" % (self.dtype, self._shape)

    def tobytes(self):
        """The elements in row-major order, once the array's stream has produced them."""
        self._rt("cudaStreamSynchronize", self.stream)
        return self._to_host()

    def _to_host(self):
        """A copy of the bytes (cudaMemcpy: it waits for the legacy default stream and the
        blocking streams, not for this array's own stream)."""
        buf = ctypes.create_string_buffer(self.nbytes)
        if self.nbytes:
            self._rt("cudaMemcpy", buf, self.ptr, self.nbytes, DEVICE_TO_HOST)
        return buf.raw

    def copy_on(self, stream):
        """A new DeviceArray holding these elements, copied on `stream` (enqueued, not run)."""
        out = DeviceArray._new(self._rt, self._dtype, self._shape)
        if self.nbytes:
            self._rt("cudaMemcpyAsync", out.ptr, self.ptr, self.nbytes, DEVICE_TO_DEVICE, stream)
        return out

    def __dlpack_device__(self):
        return self.dl_device

    def __dlpack__(self, *, stream=_OMITTED, max_version=None, dl_device=None, copy=None):
        """The array API's signature, whose default stream is None (the legacy default stream,
        STR-04); `_OMITTED` only tells the fault cuda_omitted_stream_no_sync an omitted stream."""
        from ._producer import export_device

        if stream is _OMITTED:
            stream = -1 if dl_device is None and _faults.active("cuda_omitted_stream_no_sync") else None
        return export_device(self, stream=stream, max_version=max_version, dl_device=dl_device, copy=copy)


def to_device(array):
    """A DeviceArray of `array`'s elements: the copy to the device is enqueued on the new
    array's own stream (its data is produced there)."""
    rt = _need()
    out = DeviceArray._new(rt, array._dtype, array.shape)
    content = array.tobytes()
    if out.nbytes:
        out._staging = ctypes.create_string_buffer(content, len(content))  # read when the copy runs
        rt("cudaMemcpyAsync", out.ptr, out._staging, out.nbytes, HOST_TO_DEVICE, out.stream)
    return out
