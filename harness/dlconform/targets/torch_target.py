"""torch: producer (Tensor.__dlpack__) and consumer (torch.utils.dlpack.from_dlpack)."""
from ._util import index, keywords_of
from .base import Target, TargetError

# _ref name -> torch attribute
TORCH_DTYPES = (
    ("bool", "bool"), ("int8", "int8"), ("int16", "int16"), ("int32", "int32"), ("int64", "int64"),
    ("uint8", "uint8"), ("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
    ("float16", "float16"), ("bfloat16", "bfloat16"), ("float32", "float32"), ("float64", "float64"),
    ("complex32", "complex32"), ("complex64", "complex64"), ("complex128", "complex128"),
)


class TorchTarget(Target):
    name = "torch"
    library = "torch"

    def __init__(self, name=None):
        super().__init__(name or "torch")
        try:
            import torch
            import torch.utils.dlpack
        except ImportError as e:
            raise TargetError("cannot import module 'torch' (%s)" % type(e).__name__)
        self.torch = torch
        roles = set()
        if hasattr(torch.Tensor, "__dlpack__"):
            roles.add("producer")
        if hasattr(torch.utils.dlpack, "from_dlpack"):
            roles.add("consumer")
        self.roles = frozenset(roles)
        self._dtypes = None

    def available(self):
        if not self.roles:
            return False, "torch %s has no DLPack support" % self.torch.__version__
        return True, ""

    def versions(self):
        return {"torch": self.torch.__version__}

    def _dt(self, name):
        return getattr(self.torch, dict(TORCH_DTYPES)[name])

    def dtypes(self):
        if self._dtypes is None:
            torch = self.torch
            out = []
            for name, attr in TORCH_DTYPES:
                dt = getattr(torch, attr, None)
                if not isinstance(dt, torch.dtype):
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
            self._dtypes = out
        return list(self._dtypes)

    def make(self, dtype, shape, values):
        torch = self.torch
        dt = self._dt(dtype)
        shape = tuple(shape)
        raw = bytes(values)
        if not raw:
            return torch.empty(shape, dtype=dt)
        u8 = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
        return u8.view(dt).reshape(shape).clone()

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

    def expected(self, x):
        c = x.contiguous().reshape(-1)
        if c.numel() == 0:
            return b""
        return bytes(c.view(self.torch.uint8).numpy().tobytes())

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

    def repro_setup(self):
        return ["import torch", "import torch.utils.dlpack"]

    def repro_make(self, dtype, shape, values, var="x"):
        from ..repro import bytes_literal

        if not values:
            return ["%s = torch.empty(%r, dtype=torch.%s)" % (var, tuple(shape), dict(TORCH_DTYPES)[dtype])]
        return ["%s = torch.frombuffer(bytearray(%s), dtype=torch.uint8).view(torch.%s).reshape(%r).clone()"
                % (var, bytes_literal(values), dict(TORCH_DTYPES)[dtype], tuple(shape))]
