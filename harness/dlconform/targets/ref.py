"""The reference target: dlconform._ref, optionally with a built-in fault active.

`ref@cuda` is the C reference on a CUDA device: its stream_device() and its make() make
_ref.CudaTensors (compact row-major tensors of whole-byte types in CUDA memory, each produced on
a stream of its own, exported with CUDA's stream semantics and offering an exchange table of the
CUDA device) on the runtime kit.cuda finds, the simulated one when DLCONFORM_CUDART names
build/cuda/sim/libcudart.so. The host files' producer checks judge them too (`device_tensors`),
beside pyref@cuda's device arrays: the C export path and the C table over CUDA memory. As a
consumer it imports CUDA producers with _ref.cuda_from_dlpack, which takes the array API's
device= and copy=. Without a runtime it is unavailable, saying why.
"""
import contextlib

from . import _views
from ._util import claims_cuda
from .base import ReferenceTarget, TargetError, spec_name
from .pyref_target import CudaStreamDevice
from .dtypes import DTYPES, EXTENDED_FLOATS, STANDARD_DTYPES, itemsize, kind_of_code, row_major_strides


def ref_dtypes(_ref):
    """The dtype names _ref.Tensor accepts, of the standard, float8, float6 and float4 names
    (sub-byte types are stored one element per byte with IS_SUBBYTE_TYPE_PADDED, FLG-06)."""
    ok = []
    for name in STANDARD_DTYPES + EXTENDED_FLOATS:
        try:
            _ref.Tensor(name, (1,))
        except Exception:
            continue
        ok.append(name)
    return ok


def _import_ref():
    try:
        from .. import _ref
    except ImportError as e:
        raise TargetError("cannot import dlconform._ref (%s: %s); run `make build`" % (type(e).__name__, e))
    return _ref


class RefTarget(ReferenceTarget):
    name = "ref"
    library = "dlconform._ref"

    def __init__(self, name=None, fault=None, role=None, device=None):
        """`fault`: one of _ref.FAULTS; `role`: producer or consumer (ReferenceTarget);
        `device`: None (the CPU) or "cuda" (ref@cuda: CudaTensors on a CUDA runtime)."""
        if device not in (None, "cuda"):
            raise TargetError("ref has no device %r (it has: cuda)" % (device,))
        self._ref = _import_ref()
        self.cuda = device == "cuda"
        if self.cuda:
            self.device, self.device_tensors = (2, 0), True
            name = name or spec_name("ref@cuda", fault, role)
        super().__init__(self._ref, getattr(self._ref, "FAULTS", {}), name, fault, role)
        self._dtypes = self._bound = None

    def _runtime(self):
        """ref@cuda: kit.cuda's runtime, bound into _ref (its functions' addresses) so that the
        reference, the checks and the libraries share one runtime; None without one."""
        from ..kit import cuda

        rt = cuda.runtime()
        if rt is not None and self._bound is not rt:  # once per runtime, not per import
            self._ref.cuda_bind(cuda.addresses(rt, self._ref.CUDA_FUNCTIONS))
            self._bound = rt
        return rt

    def available(self):
        if self.cuda and self._runtime() is None:
            from ..kit import cuda

            return False, "ref@cuda needs a CUDA runtime: %s (%s=build/cuda/sim/libcudart.so runs it on the " \
                "simulated one)" % (cuda.why_not(), cuda.ENV)
        return True, ""

    def versions(self):
        from .. import __version__

        out = {"dlconform._ref": __version__}
        if self.cuda:
            rt = self._runtime()
            out["cuda runtime"] = "%s%s" % (rt.path, " (simulated)" if rt.simulated else "") if rt else "none"
        return out

    def from_dlpack(self, obj, **kw):
        """ref@cuda takes a CUDA producer's memory with _ref.cuda_from_dlpack (read on ref's
        current stream, or through the producer's exchange table on its current work
        stream; device= and copy= as the array API says); everything else, and plain ref,
        with _ref.from_dlpack."""
        if self.cuda and claims_cuda(obj) and self._runtime() is not None:
            return self._ref.cuda_from_dlpack(obj, **kw)
        return self._ref.from_dlpack(obj, **kw)

    def dtypes(self):
        if self._dtypes is None:
            self._dtypes = [n for n in ref_dtypes(self._ref) if not self.cuda or self._on_device(n)]
        return list(self._dtypes)

    def discover_dtypes(self):
        """Every dtype name of dlpack.h v1.3 that _ref.Tensor takes (int4 and uint4 too); on
        ref@cuda, those CudaTensor holds (whole-byte types)."""
        found = {}
        for name in DTYPES:
            try:
                size = self._ref.Tensor(name, (1,)).itemsize
            except Exception:  # a name _ref does not have
                continue
            if not self.cuda or self._on_device(name):
                found[name] = (name, size)
        return found

    def _on_device(self, name):
        """Whether CudaTensor holds this dtype (it refuses sub-byte ones)."""
        try:
            self.make(name, (1,), bytes(itemsize(name)))
        except Exception:  # noqa: BLE001 - ValueError: a sub-byte type
            return False
        return True

    def _is_cuda_tensor(self, x):
        return self.cuda and isinstance(x, self._ref.CudaTensor)

    def make(self, dtype, shape, values):
        if self.cuda:
            self._runtime()
            return self._ref.CudaTensor(dtype, tuple(shape), bytes(values))
        return self._ref.Tensor(dtype, tuple(shape), data=bytes(values))

    def expected(self, x):
        """A CudaTensor's bytes, read on the stream its data was produced on (its device's)."""
        if self._is_cuda_tensor(x):
            return self.stream_device().to_host(x)
        return x.tobytes()

    def _view(self, x, how, *args):
        """The view of x that _views.`how` gives; None for a CudaTensor, which has no views."""
        if self._is_cuda_tensor(x):
            return None
        shape, strides, offset = getattr(_views, how)(x.shape, x.strides, *args)
        return x.view(shape, strides, x.byte_offset + offset * x.itemsize)

    def transpose(self, x, perm):
        return self._view(x, "transpose", perm)

    def slice(self, x, dim, start, stop, step=1):
        return self._view(x, "slice_", dim, start, stop, step)

    def flip(self, x, dim):
        return self._view(x, "flip", dim)

    def readonly(self, x):
        if self._is_cuda_tensor(x):
            return None  # a CudaTensor is never read-only
        return self._ref.Tensor(x.dtype, tuple(x.shape), data=x.tobytes(), readonly=True)

    def describe(self, y):
        if self._is_cuda_tensor(y):
            return {"ptr": y.ptr, "shape": tuple(y.shape), "strides": row_major_strides(tuple(y.shape)),
                    "itemsize": itemsize(tuple(y.dtype)), "readonly": False, "device": (2, 0)}
        return {
            "ptr": y.data_ptr + y.byte_offset,
            "shape": tuple(y.shape),
            "strides": tuple(y.strides),
            "itemsize": y.itemsize,
            "readonly": bool(y.readonly),
        }

    def stream_device(self):
        """The virtual stream device; ref@cuda: its CUDA tensors (None without a runtime)."""
        if not self.cuda:
            return RefStreamDevice(self._ref)
        rt = self._runtime()
        return None if rt is None else RefCudaStreamDevice(self._ref, rt)

    def native_layout(self, x):
        if self._is_cuda_tensor(x):
            return tuple(x.shape), row_major_strides(tuple(x.shape)), x.ptr
        return tuple(x.shape), tuple(x.strides), x.data_ptr + x.byte_offset

    def dtype_kind(self, y):
        return kind_of_code(y.dtype[0])

    def unexportable(self):
        if self.cuda:
            return None  # a CudaTensor always exports
        return "ref tensor with exportable=False", self._ref.Tensor("float32", (2, 3), exportable=False)


class RefStreamDevice:
    """The reference's virtual stream device (kDLExtDev, probes/ref/vstream.c): software
    streams whose ordering decisions the producer logs instead of running.

    Streams follow CUDA's numbering by agreement (STR-15): None/1 legacy default, 2 per-thread
    default, > 2 a handle from new_stream(), -1 no synchronisation, 0 rejected.
    """

    name = "ref virtual stream device (kDLExtDev)"
    LEGACY, PER_THREAD = 1, 2

    def __init__(self, ref):
        self._ref = ref
        self.device = (ref.VSTREAM_DEVICE, 0)

    def make(self, dtype, shape, values):
        """A tensor on the device; `.stream` is the producer's own stream."""
        return self._ref.DeviceTensor(self._ref.Tensor(dtype, tuple(shape), data=bytes(values)))

    def producer_stream(self, x):
        return x.stream

    def new_stream(self):
        return self._ref.vstream_new()

    def destroy_stream(self, handle):
        self._ref.vstream_destroy(handle)

    def alive(self, handle):
        return self._ref.vstream_alive(handle)

    def events(self):
        """The events logged since the last call, then cleared: ("wait", consumer, producer),
        ("sync", producer), ("copy", stream, or 0 for the host), ("destroy", stream)."""
        return [tuple(e) for e in self._ref.vstream_log(clear=True)]


class RefCudaStreamDevice(CudaStreamDevice):
    """ref@cuda's CUDA tensors (_ref.CudaTensor) on kit.cuda's runtime, for the checks that
    observe (test_cuda_stream.py, test_cuda_exchange.py). Streams are DLPack's ints, as for
    pyref's device arrays; the current stream is _ref's (per thread, cuda_set_stream)."""

    name = "ref CUDA tensors"

    def __init__(self, ref, runtime):
        self._ref, self.runtime = ref, runtime

    def make(self, dtype, shape, values):
        return self._ref.CudaTensor(dtype, tuple(shape), bytes(values))

    def current_stream(self):
        return self._ref.cuda_current_stream()

    def side_stream(self):
        handle = self.runtime.stream().handle
        return self._current(handle), handle

    def per_thread_stream(self):
        return self._current(self.PER_THREAD), self.PER_THREAD

    @contextlib.contextmanager
    def _current(self, handle):
        before = self._ref.cuda_set_stream(handle)
        try:
            yield handle
        finally:
            self._ref.cuda_set_stream(before)

    def to_host(self, y):
        """The bytes of an import, read on its stream (where ref's consumer ordered them); a
        host import (device="cpu") is a _ref.Tensor, read as one."""
        if not isinstance(y, self._ref.CudaTensor):
            return y.tobytes()
        return self.runtime.read_on(y.stream, y.ptr, y.nbytes) if y.nbytes else b""

    def import_dtype(self, y):
        return tuple(y.dtype)
