"""torch: producer (Tensor.__dlpack__) and consumer (torch.utils.dlpack.from_dlpack).

`torch@cuda` is torch with its CUDA device: its stream_device() makes CUDA tensors
(torch_cuda.TorchCudaStreamDevice) for the device checks (suites/test_cuda_stream.py), and so
does make() (`device_tensors`): the producer checks of the host files judge torch's CUDA
tensors, read through the CUDA runtime, on the dtypes torch can put on the device. Unavailable,
saying why, where this torch has no CUDA device."""
from ._util import index, keywords_of
from .base import LibraryTarget, TargetError, import_library
from .dtypes import DTYPES, by_dlpack_order

#: the devices a spec may name after `torch@`
DEVICES = ("cuda",)


def host_bytes(torch, t):
    """The bytes of tensor t's elements, row-major, on the host (a device tensor's copied
    there). torch ignores the stride of a dimension of size 1, so a one-element view keeps any
    stride through contiguous() and reshape(-1), and view(uint8) refuses a last stride but 1:
    such a view is re-strided over its one element first."""
    c = t.contiguous().reshape(-1).cpu()
    if c.numel() == 0:
        return b""
    if c.numel() == 1:
        c = c.as_strided((1,), (1,))
    return bytes(c.view(torch.uint8).numpy().tobytes())


class TorchTarget(LibraryTarget):
    library = "torch"
    torch = property(lambda self: self.module)
    _dtypes = None  # dtypes(), once asked

    def __init__(self, name=None, device=None):
        if device not in (None,) + DEVICES:
            raise TargetError("torch has no device %r (it has: %s)" % (device, ", ".join(DEVICES)))
        self.cuda = device == "cuda"
        super().__init__(name or ("torch@cuda" if self.cuda else None))
        if self.cuda:
            self.device, self.device_tensors = (2, 0), True

    def available(self):
        ok, why = super().available()
        if not ok or not self.cuda:
            return ok, why
        torch = self.torch
        if not torch.cuda.is_available():
            return False, "torch@cuda: torch %s has no CUDA device (torch.cuda.is_available() is False; built for " \
                "CUDA %s)" % (self.version(), torch.version.cuda or "none")
        torch.cuda.init()  # its runtime (loaded by `import torch`) is the one kit.cuda finds loaded
        from ..kit import cuda

        if cuda.runtime() is None:
            return False, "torch@cuda: the checks observe through the CUDA runtime, which did not load: %s" \
                % cuda.why_not()
        return True, ""

    def versions(self):
        out = super().versions()
        if self.cuda:
            torch = self.torch
            out["torch cuda"] = "%s on %s" % (torch.version.cuda, torch.cuda.get_device_name(0))
        return out

    def stream_device(self):
        """torch@cuda: a TorchCudaStreamDevice over the kit's runtime; None for plain torch."""
        if not self.cuda:
            return None
        from ..kit import cuda
        from .torch_cuda import TorchCudaStreamDevice

        rt = cuda.runtime()
        return None if rt is None else TorchCudaStreamDevice(self, rt)

    def offers(self, torch):
        import_library("torch.utils.dlpack")
        return hasattr(torch.Tensor, "__dlpack__"), hasattr(torch.utils.dlpack, "from_dlpack")

    def _dt(self, name):
        return getattr(self.torch, name)

    def discover_dtypes(self):
        """Every torch.dtype the torch module has (float8 families, bfloat16, complex32, the
        unsigned types of torch >= 2.3 included, each as torch names it, which is _ref's name);
        quantized, bit and sub-byte integer dtypes have no DLPack type."""
        torch = self.torch
        found = {}
        for dt in {v for v in vars(torch).values() if isinstance(v, torch.dtype)}:
            name = str(dt).split(".")[-1]
            size = getattr(dt, "itemsize", None)
            if size is None:  # torch < 2.1
                size = torch._utils._element_size(dt)
            found[name] = (name if name in DTYPES else None, size)
        return dict(sorted(found.items(), key=lambda kv: by_dlpack_order(*kv)))

    def dtypes(self):
        if self._dtypes is None:
            torch = self.torch
            out = []
            for name, (dlpack, _) in self.discover_dtypes().items():
                dt = getattr(torch, name, None)
                if dlpack is None or not isinstance(dt, torch.dtype):
                    continue
                if name == "complex32":
                    # experimental: listed only when it can be exported
                    try:
                        import warnings

                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")
                            torch.zeros(1, dtype=dt).__dlpack__()
                    except Exception:
                        continue
                out.append(name)
            if self.cuda:  # the dtypes torch can copy to its device (no CUDA kernels for some)
                sizes = {name: size for name, (_, size) in self.discover_dtypes().items()}
                out = [name for name in out if self._on_device(name, sizes.get(name) or 1)]
            self._dtypes = out
        return list(self._dtypes)

    def _on_device(self, name, size):
        try:
            self.make(name, (2,), bytes(2 * size))
        except Exception:
            return False
        return True

    def make(self, dtype, shape, values):
        """A tensor of the values: on the CPU, or for torch@cuda copied to cuda:0."""
        x = self.make_host(dtype, shape, values)
        return x.to("cuda:0") if self.cuda else x

    def make_host(self, dtype, shape, values):
        torch = self.torch
        dt = self._dt(dtype)
        shape = tuple(shape)
        raw = bytes(values)
        if dtype.startswith(("qint", "quint")):  # no view of bytes: a quantized tensor of zeros
            return torch.quantize_per_tensor(torch.zeros(shape), 1.0, 0, dt)
        if not raw:
            return torch.empty(shape, dtype=dt)
        # the bytes go in through a uint8 view of a fresh tensor: torch's shell dtypes (int1-int7,
        # uint1-uint7) have no copy kernel, so clone() of a view of the bytes would fail for them
        x = torch.empty(shape, dtype=dt)
        x.reshape(-1).view(torch.uint8).copy_(torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        return x

    def transpose(self, x, perm):
        return x.permute(*perm)

    def slice(self, x, dim, start, stop, step=1):
        if step is not None and step < 0:
            return None  # torch has no negative strides
        return x[index(x.dim(), dim, slice(start, stop, step))]

    def flip(self, x, dim):
        return None  # torch.flip copies; torch has no negative strides

    def readonly(self, x):
        return None  # torch tensors have no read-only flag

    def readonly_ways(self, x):
        """torch has no read-only tensors, but torch.frombuffer over an immutable bytes object
        holds read-only memory (torch warns that writing to it is undefined)."""
        import warnings

        torch = self.torch
        raw = self.expected(x)
        if not raw or self.cuda:  # frombuffer's memory is the host's: no device tensor
            return []
        with warnings.catch_warnings():  # "The given buffer is not writable": that is the point
            warnings.simplefilter("ignore")
            ro = torch.frombuffer(raw, dtype=torch.uint8).view(x.dtype).reshape(x.shape)
        return [("torch.frombuffer over bytes", ro)]

    def expected(self, x):
        return host_bytes(self.torch, x)

    def from_dlpack(self, obj, **kw):
        return self.torch.utils.dlpack.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        kws = keywords_of(self.torch.utils.dlpack.from_dlpack)
        return kws if kws is not None else frozenset()

    def describe(self, y):
        return {
            "ptr": y.data_ptr(),
            "shape": tuple(y.shape),
            "strides": tuple(y.stride()),
            "itemsize": y.element_size(),
            "readonly": False,
        }

    def native_layout(self, x):
        return tuple(x.shape), tuple(x.stride()), x.data_ptr()

    def dtype_kind(self, y):
        t = self.torch
        if y.dtype == t.bool:
            return "b"
        if y.dtype.is_complex:
            return "c"
        if y.dtype.is_floating_point:
            return "f"
        return "i" if y.dtype.is_signed else "u"

    def sparse(self):
        return self.torch.zeros(3, 3, device="cuda:0" if self.cuda else "cpu").to_sparse()
