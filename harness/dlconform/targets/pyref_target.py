"""pyref: the pure-Python reference (dlconform.pyref), optionally with a built-in fault on.

What `ref` is to the C path, pyref is to the generic one: a producer and a consumer written
in Python with ctypes, as a small library would be. It has no C exchange API.

`pyref@cuda` is pyref with a CUDA device: make() and its stream_device() make pyref's device
arrays (pyref.to_device) on the CUDA runtime kit.cuda finds, the simulated one when
DLCONFORM_CUDART names build/cuda/sim/libcudart.so. Device arrays are compact and row-major,
with no views and no read-only form: those operations give None. Without a runtime it is
unavailable, saying why.
"""
from ._util import claims_device
from .base import ReferenceTarget, TargetError, spec_name
from .dtypes import kind_of_code

#: the devices a spec may name after `pyref@`
DEVICES = ("cuda",)


class PyrefTarget(ReferenceTarget):
    name = "pyref"
    library = "dlconform.pyref"

    def __init__(self, name=None, fault=None, role=None, device=None):
        """`fault`: one of pyref.FAULTS; `role`: producer or consumer (ReferenceTarget);
        `device`: None (the CPU) or "cuda" (pyref@cuda: device arrays on a CUDA runtime)."""
        from .. import pyref

        if device not in (None,) + DEVICES:
            raise TargetError("pyref has no device %r (it has: %s)" % (device, ", ".join(DEVICES)))
        self.pyref = pyref
        self.cuda = device == "cuda"
        if self.cuda:
            self.device, self.device_tensors = (2, 0), True
            name = name or spec_name("pyref@cuda", fault, role)
        super().__init__(pyref, pyref.FAULTS, name, fault, role)
        if not fault:
            pyref.set_fault(None)  # pyref's faults are per process: a clean target turns them off

    def available(self):
        if self.cuda:
            from ..kit import cuda

            if cuda.runtime() is None:
                return False, "pyref@cuda needs a CUDA runtime: %s (%s=build/cuda/sim/libcudart.so runs it " \
                    "on the simulated one)" % (cuda.why_not(), cuda.ENV)
            ok, why = self.pyref.cuda_available()
            if not ok:
                return False, "pyref@cuda: " + why
        return True, ""

    def versions(self):
        out = {"dlconform.pyref": self.pyref.__version__}
        if self.cuda:
            from ..kit import cuda

            rt = cuda.runtime()
            out["cuda runtime"] = "%s%s" % (rt.path, " (simulated)" if rt.simulated else "") if rt else "none"
        return out

    def stream_device(self):
        """pyref@cuda: a CudaStreamDevice over the kit's runtime; None for plain pyref."""
        if not self.cuda:
            return None
        from ..kit import cuda

        rt = cuda.runtime()
        return None if rt is None else PyrefCudaDevice(self.pyref, rt)

    def from_dlpack(self, obj, **kw):
        """pyref@cuda takes a producer's memory on any device but the CPU with
        pyref.device_from_dlpack (read on pyref's current stream; it refuses devices other
        than CUDA); everything else, and plain pyref, with pyref.from_dlpack."""
        if self.cuda and claims_device(obj):
            return self.pyref.device_from_dlpack(obj, **kw)
        return self.pyref.from_dlpack(obj, **kw)

    def dtypes(self):
        return list(self.pyref.DTYPES)

    def discover_dtypes(self):
        """pyref's element types, as pyref lists them; all are DLPack types."""
        return {name: (name, self.pyref.zeros((1,), name).itemsize) for name in self.pyref.DTYPES}

    def make(self, dtype, shape, values):
        host = self.pyref.frombuffer(values, dtype, tuple(shape))
        return self.pyref.to_device(host) if self.cuda else host

    def _on_device(self, x):
        """Whether x is a DeviceArray (views and read-only forms exist for host Arrays only)."""
        return isinstance(x, self.pyref.DeviceArray)

    def transpose(self, x, perm):
        return None if self._on_device(x) else x.transpose(tuple(perm))

    def slice(self, x, dim, start, stop, step=1):
        if self._on_device(x):
            return None
        index = [slice(None)] * x.ndim
        index[dim] = slice(start, stop, step)
        return x[tuple(index)]

    def flip(self, x, dim):
        return None if self._on_device(x) else x.flip(dim)

    def readonly(self, x):
        return None if self._on_device(x) else x.as_readonly()

    def describe(self, y):
        return {"ptr": y.address, "shape": y.shape, "strides": y.strides, "itemsize": y.itemsize,
                "readonly": y.readonly, "dtype": y.dl_dtype}

    def dtype_kind(self, y):
        return kind_of_code(y.dl_dtype[0])

    def native_layout(self, x):
        return tuple(x.shape), tuple(x.strides), x.address


class UnnamedStreams:
    """A CUDA stream device's stream methods for a library whose streams dlconform cannot name
    (jax, a generic library): no producer stream, no current stream, no stream contexts."""

    def producer_stream(self, x):
        return None

    def current_stream(self):
        return None

    def side_stream(self):
        return None

    def per_thread_stream(self):
        return None


class CudaStreamDevice:
    """pyref's device arrays on a CUDA runtime (kit.cuda's `runtime`), for the stream checks
    that observe (suites/test_cuda_stream.py): what a reader on a stream sees, and on the
    simulated runtime how often the host was blocked.

    Streams are DLPack's ints: 1 the legacy default stream, 2 the per-thread default stream,
    above 2 a handle from new_stream()."""

    kind = "cuda"
    name = "pyref device arrays on CUDA"
    device = (2, 0)
    LEGACY, PER_THREAD = 1, 2

    def __init__(self, pyref, runtime):
        self._pyref, self.runtime = pyref, runtime

    def make(self, dtype, shape, values):
        """A tensor on the device, its copy there still enqueued on its own stream."""
        return self._pyref.to_device(self._pyref.frombuffer(values, dtype, tuple(shape)))

    def producer_stream(self, x):
        """The stream x's data is produced on (a handle)."""
        return x.stream

    def memory(self, x):
        """(device address, byte count) of x's elements."""
        return x.ptr, x.nbytes

    def current_stream(self):
        """pyref's current stream (pyref.current_stream(): the legacy default stream outside a
        pyref.cuda_stream() block)."""
        return self._pyref.current_stream()

    def side_stream(self):
        """(a context manager making a new non-blocking stream the library's current one, its
        DLPack int), or None for a library with no current stream to set (jax). pyref's:
        pyref.cuda_stream(handle)."""
        handle = self.runtime.stream().handle
        return self._pyref.cuda_stream(handle), handle

    def per_thread_stream(self):
        """(a context manager making the per-thread default stream (2) the library's current
        stream, 2), or None for a library that has none to set (the default: a subclass that
        does not say would be compared with a context that is not its library's)."""
        return None

    def to_host(self, y):
        """The bytes of an array the library imported (consumer side), read the library's way."""
        return y.tobytes()

    def read_import(self, y, stream):
        """(what the consumer's import y holds for its users, None, None): read the library's way
        (to_host), on its current stream, the one it should have named; `stream`, the one it
        did name, is the stream checks' to compare. A generic consumer's device, which has no
        way of its own, reads on the named stream and once the device is idle too
        (generic_cuda.GenericCudaDevice)."""
        return self.to_host(y), None, None

    @staticmethod
    def dtype_named(name):
        """The (code, bits, lanes) of the dtype a library names as numpy and ml_dtypes do
        ("float32", "bool", "bfloat16", "float8_e4m3fn"); None for a name DLPack has no type
        for (an import_dtype of a typed result that cannot be a code DLPack defines)."""
        from ..kit.abi import DTYPES

        fields = DTYPES.get(name)
        return None if fields is None else tuple(fields)

    def import_readonly(self, y):
        """Whether the consumer's import y is read-only to its users: True or False where the
        library has read-only device arrays; None where it has none, or dlconform cannot tell
        (the default: pyref's, ref's, torch's and cupy's device arrays are all writable)."""
        return None

    def import_dtype(self, y):
        """The (code, bits, lanes) the consumer's import y holds its elements as, "bytes" for
        untyped bytes; Unsupported where the library's import does not say (the default)."""
        from ..kit import Unsupported

        raise Unsupported("%s: which dtype an import holds is not read here" % self.name)

    def slow_pattern(self, runtime, dtype, shape, values, pattern, cycles):
        """A tensor of the library whose bytes will all be `pattern`, that work still pending on
        the producer's stream: the tensor made of `values`, then `cycles` clock cycles of work
        and the pattern's write enqueued there (the helper's slow fill)."""
        x = self.make(dtype, shape, values)
        ptr, nbytes = self.memory(x)
        runtime.slow_fill(self.producer_stream(x), ptr, nbytes, pattern, cycles)
        return x

    def pending(self, runtime, x):
        """Whether work producing x is still pending (its producer stream is not idle)."""
        return not runtime.idle(self.producer_stream(x))

    def new_stream(self):
        return self.runtime.stream().handle

    def destroy_stream(self, handle):
        self.runtime.destroy_stream(handle)

    def alive(self, handle):
        """Whether the runtime still knows the stream (a query of a destroyed one fails)."""
        from ..kit.cuda import CudaError

        try:
            self.runtime.idle(handle)
        except CudaError:
            return False
        return True


class PyrefCudaDevice(CudaStreamDevice):
    """pyref@cuda's device: CudaStreamDevice, and pyref's per-thread default stream context."""

    def per_thread_stream(self):
        return self._pyref.cuda_stream(self.PER_THREAD), self.PER_THREAD

    def import_dtype(self, y):
        return tuple(y.dl_dtype)
