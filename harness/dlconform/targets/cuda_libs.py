"""cupy@cuda and jax@cuda: libraries whose tensors live on the GPU, judged on the device checks
(`dlconform run --device cuda`, suites/test_cuda_stream.py) as producers and consumers.

Neither has a CPU variant here: cupy's arrays are device memory only, and jax on the CPU is
the built-in target `jax` (targets/jax_target.py). make() gives their device arrays
(`device_tensors`): the producer checks of the host files run on them, with cupy's views
(transposed, sliced, flipped: negative strides) and, jax having no views, jax's compact arrays,
on the dtypes each makes on the device as asked. The device checks reach each library through its stream
device (the interface of pyref_target.CudaStreamDevice):
- cupy's producer stream is its *current* stream (`cupy.cuda.get_current_stream()`, whose
  handle 0 is DLPack's 1, the legacy default stream); the checks' slow work goes there.
- jax has no stream a user can name: its arrays are produced on its own compute stream. The
  slow work is a jitted computation of known length whose result is the pattern, so the data
  is still pending when `__dlpack__` is called; `Array.is_ready()` says whether it is done.

A spec names the device: `cupy@cuda`, `jax@cuda`. Unavailable, with the reason, where the
library does not import or sees no GPU.
"""
from ._util import NumpyLikeViews, keywords_of
from .base import LibraryTarget, TargetError
from .jax_target import cpu_device, x64
from .pyref_target import CudaStreamDevice, UnnamedStreams

#: the devices a spec may name after `cupy@` or `jax@`
DEVICES = ("cuda",)


def _host(dtype, shape, values):
    """A numpy array of the values (both libraries copy host arrays to the device)."""
    import numpy

    return numpy.frombuffer(bytes(values), dtype=numpy.dtype(dtype)).reshape(tuple(shape))


def _check_device(library, device):
    if device not in DEVICES:
        raise TargetError("%s is judged on the GPU alone: spec %s@cuda (with --device cuda)" % (library, library))


class _DeviceOnlyTarget(LibraryTarget):
    device = (2, 0)
    #: make() gives the library's device arrays: the producer checks of the host files run on
    #: them (cli.DEVICE_TESTS), as on pyref@cuda's and torch@cuda's
    device_tensors = True
    _dtypes = None

    def __init__(self, name=None, device=None):
        _check_device(self.library, device)
        super().__init__(name or "%s@cuda" % self.library)

    def offers(self, module):
        try:
            exports = hasattr(self.array_type(module), "__dlpack__")
        except ImportError:  # a layout of the library this adapter does not know
            exports = False
        return exports, callable(self.consumer(module))

    def from_dlpack(self, obj, **kw):
        return self.consumer(self.module)(obj, **kw)

    def consumer_keywords(self):
        return keywords_of(self.consumer(self.module)) or frozenset()

    def _runtime_or_why(self):
        from ..kit import cuda

        rt = cuda.runtime()
        return rt, None if rt is not None else "%s@cuda: the checks observe through the CUDA runtime, which " \
            "did not load: %s" % (self.library, cuda.why_not())

    def versions(self):
        out = {self.library: self.version()}
        rt, _ = self._runtime_or_why()
        out["cuda runtime"] = rt.path if rt is not None else "none"
        return out

    def make(self, dtype, shape, values):
        dev = self.stream_device()
        if dev is None:
            raise TargetError("%s@cuda has no CUDA device here" % self.library)
        return dev.make(dtype, shape, values)

    _device = None

    def _kept_device(self, runtime, cls, *args):
        """One stream device per runtime, kept: cupy's side streams live with it, jax's program
        is compiled once."""
        if self._device is None or self._device.runtime is not runtime:
            self._device = cls(self, runtime, *args)
        return self._device

    def dtypes(self):
        """The DLPack dtypes (standard and float8) whose arrays the library makes on the device
        as asked: jax without jax_enable_x64 makes an int64 array an int32 one, which is not
        offered."""
        if self._dtypes is None:
            from .dtypes import EXTENDED_FLOATS, STANDARD_DTYPES, itemsize

            ok = []
            for name in STANDARD_DTYPES + EXTENDED_FLOATS:
                try:
                    x = self.make(name, (2,), bytes(2 * itemsize(name)))
                except Exception:  # a dtype the library or numpy does not have
                    continue
                if str(x.dtype) == name:
                    ok.append(name)
            self._dtypes = ok
        return list(self._dtypes)

    def expected(self, x):
        """x's elements in row-major order, copied to the host the library's way."""
        return self.stream_device().to_host(x)


# ---------------------------------------------------------------------------- cupy
class CupyTarget(NumpyLikeViews, _DeviceOnlyTarget):
    """cupy's arrays on the GPU; its views (NumpyLikeViews) are views of device memory."""

    library = "cupy"

    @staticmethod
    def array_type(module):
        return module.ndarray

    @staticmethod
    def consumer(module):
        return getattr(module, "from_dlpack", None)

    def available(self):
        ok, why = super().available()
        if not ok:
            return ok, why
        try:
            n = self.module.cuda.runtime.getDeviceCount()
        except Exception as e:  # cupy raises its own CUDARuntimeError without a device
            return False, "cupy@cuda: cupy %s sees no CUDA device (%s: %s)" % (self.version(), type(e).__name__, e)
        if n < 1:
            return False, "cupy@cuda: cupy %s counts 0 CUDA devices" % self.version()
        _, why = self._runtime_or_why()
        return (why is None), why or ""

    def stream_device(self):
        rt, _ = self._runtime_or_why()
        return None if rt is None else self._kept_device(rt, CupyStreamDevice)

    def host_device(self):
        """cupy.from_dlpack's `device` is a DLPack (device_type, device_id) tuple."""
        return (1, 0)

    def native_layout(self, x):
        return tuple(x.shape), tuple(s // x.itemsize if x.itemsize else 0 for s in x.strides), x.data.ptr


class CupyStreamDevice(CudaStreamDevice):
    def __init__(self, target, runtime):
        self._cupy, self.runtime = target.module, runtime
        self.name = "cupy %s arrays on CUDA" % target.version()
        #: every side stream made, alive as long as the device: cupy destroys a Stream when it
        #: is collected, and its memory pool files freed blocks by stream handle, which the
        #: driver may hand to the next stream while the checks' slow work still runs on it
        self._streams = []

    def _dlpack_stream(self, stream):
        """DLPack's int for a cupy stream: its handle, 1 for the legacy default (null) stream."""
        return stream.ptr or self.LEGACY

    def make(self, dtype, shape, values):
        """cupy's array of the values, copied on cupy's current stream, which the array
        remembers as its producer stream."""
        x = self._cupy.asarray(_host(dtype, shape, values))
        x._dlc_stream = self.current_stream()
        return x

    def producer_stream(self, x):
        """The stream x was produced on (cupy's current stream when make() made it), the one
        cupy's export makes the consumer's wait on while it is still current."""
        stream = getattr(x, "_dlc_stream", None)
        return stream if stream is not None else self.current_stream()

    def memory(self, x):
        return x.data.ptr, x.nbytes

    def current_stream(self):
        return self._dlpack_stream(self._cupy.cuda.get_current_stream())

    def side_stream(self):
        """(a context manager making a new non-blocking cupy stream current, its DLPack int)."""
        s = self._cupy.cuda.Stream(non_blocking=True)
        self._streams.append(s)
        return s, s.ptr

    def per_thread_stream(self):
        """(cupy's per-thread default stream, `cupy.cuda.Stream.ptds`, as a context, 2), or None
        in a cupy without it."""
        ptds = getattr(self._cupy.cuda.Stream, "ptds", None)
        return None if ptds is None else (ptds, self._dlpack_stream(ptds))

    def to_host(self, y):
        return self._cupy.asnumpy(y).tobytes()

    def import_dtype(self, y):
        """The dtype of cupy's import y, named as numpy names it; None for one DLPack lacks."""
        return self.dtype_named(str(y.dtype))


# ---------------------------------------------------------------------------- jax
class JaxTarget(_DeviceOnlyTarget):
    library = "jax"

    @staticmethod
    def array_type(module):
        """jax's concrete array class (jax.Array is abstract: __dlpack__ lives on ArrayImpl)."""
        from jax._src.array import ArrayImpl

        return ArrayImpl

    @staticmethod
    def consumer(module):
        import jax.dlpack

        return getattr(jax.dlpack, "from_dlpack", None)

    def host_device(self):
        return cpu_device(self.module)

    def _gpu(self):
        try:
            return self.module.devices("gpu")[0]
        except Exception:
            return None

    def available(self):
        ok, why = super().available()
        if not ok:
            return ok, why
        if self._gpu() is None:
            return False, "jax@cuda: jax %s has no GPU backend here (jax.devices('gpu') fails)" % self.version()
        _, why = self._runtime_or_why()
        return (why is None), why or ""

    def versions(self):
        out = super().versions()
        gpu = self._gpu()
        out["jax device"] = str(gpu) if gpu is not None else "none"
        out["jax_enable_x64"] = str(x64(self.module))
        return out

    def _runtime_or_why(self):
        """jax's CUDA plugin loads its runtime when the backend starts: start it first."""
        self._gpu()
        return super()._runtime_or_why()

    def stream_device(self):
        rt, _ = self._runtime_or_why()
        gpu = self._gpu()
        return None if rt is None or gpu is None else self._kept_device(rt, JaxStreamDevice, gpu)


class JaxStreamDevice(UnnamedStreams, CudaStreamDevice):
    """jax arrays on the GPU. jax names no stream: producer_stream() is None, and the slow work
    is jax's own (slow_pattern)."""

    #: the side of the square matrices the slow computation multiplies, and how many products
    SIDE, ROUNDS = 4096, 64

    def __init__(self, target, runtime, gpu):
        self._jax, self.runtime, self._gpu = target.module, runtime, gpu
        self.name = "jax %s arrays on %s" % (target.version(), gpu)
        self._slow = None

    def make(self, dtype, shape, values):
        return self._jax.device_put(_host(dtype, shape, values), self._gpu)

    def memory(self, x):
        return x.unsafe_buffer_pointer(), x.nbytes

    def to_host(self, y):
        import numpy

        return numpy.asarray(y).tobytes()

    def import_readonly(self, y):
        """jax arrays are immutable: every import is read-only to its users."""
        return True

    def import_dtype(self, y):
        """The dtype of jax's import y, named as numpy and ml_dtypes name it; None for one
        DLPack lacks."""
        return self.dtype_named(str(y.dtype))

    def _program(self, shape):
        """A jitted f(a, pattern) -> float32 array of `shape` whose bytes are all `pattern` once
        ROUNDS products of the SIDE x SIDE matrix `a` have run before it. `a` is an argument,
        made once on the GPU, not a constant XLA could fold the products of."""
        if self._slow is None:
            import numpy

            jax = self._jax
            jnp, lax = jax.numpy, jax.lax
            rounds = self.ROUNDS

            def slow(a, pattern, shape):
                a = lax.fori_loop(0, rounds, lambda i, m: jnp.tanh(m @ m), a)
                done = jnp.isfinite(a[0, 0])  # always true (tanh is bounded): an unfoldable dependency
                byte = jnp.where(done, pattern, pattern ^ 0xFF).astype(jnp.uint8)
                return lax.bitcast_convert_type(jnp.full(shape + (4,), byte, jnp.uint8), jnp.float32)

            self._slow = jax.jit(slow, static_argnames=("shape",))
            self._a = jax.device_put(numpy.full((self.SIDE, self.SIDE), 1e-3, numpy.float32), self._gpu)
            self._compiled = set()
        if shape not in self._compiled:  # compiled per shape (a static argument) before any timing matters
            self._slow(self._a, 0, shape=shape).block_until_ready()
            self._compiled.add(shape)
        return self._slow

    def slow_pattern(self, runtime, dtype, shape, values, pattern, cycles):
        if dtype != "float32":
            raise TargetError("jax@cuda's slow pattern is float32 only")
        shape = tuple(shape)
        with self._jax.default_device(self._gpu):
            return self._program(shape)(self._a, pattern, shape=shape)

    def pending(self, runtime, x):
        return not x.is_ready()
