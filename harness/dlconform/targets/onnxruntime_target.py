"""onnxruntime: the native OrtValue (onnxruntime.capi.onnxruntime_pybind11_state.OrtValue) as
producer (`__dlpack__`, `__dlpack_device__`) and consumer (`OrtValue.from_dlpack`).

The public wrapper `onnxruntime.OrtValue` has no DLPack methods; the native class under it
(`OrtValue._ortvalue`) has them in Debian's build. `OrtValue.from_dlpack(data, is_bool_tensor)`
takes a legacy "dltensor" capsule (that is how onnxruntime's own Python code calls it), not an
object: the adapter's `from_dlpack(obj)` asks `obj.__dlpack__()` with no keywords (onnxruntime
reads no versioned capsule) and hands the capsule over with is_bool_tensor=False. A capsule
given as `obj` goes through unchanged.

`make` allocates an OrtValue of onnxruntime's own (ortvalue_from_shape_and_type) and copies
the values in (update_inplace), so the memory under test is onnxruntime's, not numpy's. An
OrtValue is always dense and row-major: there are no views (transpose, slice, flip and
read-only are unsupported).
"""
from .base import Target, TargetError
from .dtypes import row_major_strides

#: numpy dtype names onnxruntime makes tensors of (numpy's complex types have no MLDataType)
ORT_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64")


class OnnxruntimeTarget(Target):
    name = library = "onnxruntime"

    def __init__(self, name=None):
        super().__init__(name or "onnxruntime")
        try:  # an import may fail in many ways
            import numpy
            import onnxruntime
            from onnxruntime.capi import _pybind_state as native
        except Exception as e:
            raise TargetError("cannot import onnxruntime (%s)" % type(e).__name__)
        self.np, self.ort, self.native = numpy, onnxruntime, native.OrtValue
        self.cpu = native.OrtDevice(native.OrtDevice.cpu(), native.OrtDevice.default_memory(), 0)
        self.roles = frozenset(role for role, method in (("producer", "__dlpack__"), ("consumer", "from_dlpack"))
                               if hasattr(self.native, method))

    def available(self):
        return (True, "") if self.roles else (False, "onnxruntime %s: its OrtValue has no DLPack methods"
                                              % self.ort.__version__)

    def versions(self):
        return {"onnxruntime": self.ort.__version__, "numpy": self.np.__version__}

    def dtypes(self):
        return list(ORT_DTYPES)

    def make(self, dtype, shape, values):
        arr = self.np.frombuffer(bytes(values), dtype=self.np.dtype(dtype)).reshape(tuple(shape))
        x = self.native.ortvalue_from_shape_and_type(list(shape), arr.dtype.type, self.cpu)
        x.update_inplace(arr)
        return x

    def expected(self, x):
        from .. import kit

        return kit.read_elements(x.__dlpack__())

    def from_dlpack(self, obj, **kw):
        """kw is always empty: consumer_keywords() is."""
        capsule = obj if type(obj).__name__ == "PyCapsule" else obj.__dlpack__(**kw)
        return self.native.from_dlpack(capsule, False)

    def describe(self, y):
        """Read through y's own export (an OrtValue has a data pointer but no strides)."""
        from .. import kit

        info = kit.inspect(y.__dlpack__())
        bits, lanes = info["dtype"][1], info["dtype"][2]
        shape = tuple(info["shape"] or ())
        # onnxruntime exports NULL strides: row-major (LAY-07)
        strides = tuple(info["strides"]) if info["strides"] is not None else row_major_strides(shape)
        return {"ptr": (info["data"] or 0) + info["byte_offset"], "shape": shape,
                "strides": strides, "itemsize": max(1, bits * lanes // 8),
                "readonly": False, "dtype": tuple(info["dtype"])}
