"""The reference target: dlconform._ref, optionally with a built-in fault active."""
from . import _views
from .base import ReferenceTarget, TargetError
from .dtypes import DTYPES, EXTENDED_FLOATS, KINDS, STANDARD_DTYPES


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

    def __init__(self, name=None, fault=None, role=None):
        """`fault`: one of _ref.FAULTS; `role`: producer or consumer (ReferenceTarget)."""
        self._ref = _import_ref()
        super().__init__(self._ref, getattr(self._ref, "FAULTS", {}), name, fault, role)
        self._dtypes = None

    def versions(self):
        from .. import __version__

        return {"dlconform._ref": __version__}

    def dtypes(self):
        if self._dtypes is None:
            self._dtypes = ref_dtypes(self._ref)
        return list(self._dtypes)

    def discover_dtypes(self):
        """Every dtype name of dlpack.h v1.3 that _ref.Tensor takes (int4 and uint4 too)."""
        found = {}
        for name in DTYPES:
            try:
                found[name] = (name, self._ref.Tensor(name, (1,)).itemsize)
            except Exception:  # a name _ref does not have
                continue
        return found

    def make(self, dtype, shape, values):
        return self._ref.Tensor(dtype, tuple(shape), data=bytes(values))

    def _view(self, x, geometry):
        shape, strides, offset = geometry
        return x.view(shape, strides, x.byte_offset + offset * x.itemsize)

    def transpose(self, x, perm):
        return self._view(x, _views.transpose(x.shape, x.strides, perm))

    def slice(self, x, dim, start, stop, step=1):
        return self._view(x, _views.slice_(x.shape, x.strides, dim, start, stop, step))

    def flip(self, x, dim):
        return self._view(x, _views.flip(x.shape, x.strides, dim))

    def readonly(self, x):
        return self._ref.Tensor(x.dtype, tuple(x.shape), data=x.tobytes(), readonly=True)

    def describe(self, y):
        return {
            "ptr": y.data_ptr + y.byte_offset,
            "shape": tuple(y.shape),
            "strides": tuple(y.strides),
            "itemsize": y.itemsize,
            "readonly": bool(y.readonly),
        }

    def stream_device(self):
        return RefStreamDevice(self._ref)

    def native_layout(self, x):
        return tuple(x.shape), tuple(x.strides), x.data_ptr + x.byte_offset

    def dtype_kind(self, y):
        code = y.dtype[0]
        return KINDS.get(code, "f" if 7 <= code <= 17 else None)  # 7..17: the float8/6/4 codes

    def unexportable(self):
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
