"""The GPU libraries' stream devices (targets/torch_cuda.py, targets/cuda_libs.py) against
stand-ins of the calls they make, as torch 2.11's and cupy 14.2's sources define them: what the
device checks rely on without a GPU to show it. A tensor's producer stream is the stream it was
made on, whatever stream is current when a check asks (suites/test_cuda_exchange.py asks from
a second side-stream context); cupy's side streams stay alive (cupy destroys a collected Stream
while the checks' slow work may still run on it)."""
import contextlib
import gc
import types

import pytest

from dlconform.targets.cuda_libs import CupyStreamDevice
from dlconform.targets.torch_cuda import TorchCudaStreamDevice


class _Current:
    """A thread's current stream, as both libraries keep one: a handle, 0 the null stream."""

    def __init__(self):
        self.handle, self.next, self.destroyed = 0, 0x7000, []

    def new(self):
        self.next += 0x100
        return self.next

    @contextlib.contextmanager
    def using(self, handle):
        before, self.handle = self.handle, handle
        try:
            yield
        finally:
            self.handle = before


def _fake_cupy(cur):
    class Stream:
        def __init__(self, non_blocking=False):
            self.ptr = cur.new()

        def __enter__(self):
            self._ctx = cur.using(self.ptr)
            self._ctx.__enter__()
            return self

        def __exit__(self, *exc):
            return self._ctx.__exit__(*exc)

        def __del__(self):  # cupy: Stream.__del__ destroys the stream
            cur.destroyed.append(self.ptr)

    class ndarray:  # a Python subclass in cupy: it takes attributes
        def __init__(self, data):
            self.data = data

    cuda = types.SimpleNamespace(Stream=Stream, get_current_stream=lambda: types.SimpleNamespace(ptr=cur.handle))
    return types.SimpleNamespace(cuda=cuda, asarray=ndarray)


def _fake_torch(cur):
    class Tensor:
        device = "cuda:0"

        def to(self, device):
            return Tensor()

    def current_stream(device=None):
        return types.SimpleNamespace(cuda_stream=cur.handle)

    class Stream:
        def __init__(self):
            self.cuda_stream = cur.new()

    cuda = types.SimpleNamespace(current_stream=current_stream, Stream=Stream,
                                 stream=lambda s: cur.using(s.cuda_stream))
    torch = types.SimpleNamespace(cuda=cuda)
    target = types.SimpleNamespace(torch=torch, version=lambda: "2.11.0", make_host=lambda *a: Tensor())
    return target


def _devices():
    cur = _Current()
    cupy = CupyStreamDevice(types.SimpleNamespace(module=_fake_cupy(cur), version=lambda: "14.2.0"), runtime=None)
    torch = TorchCudaStreamDevice(_fake_torch(cur), runtime=None)
    return cur, [cupy, torch]


def test_a_tensor_keeps_the_stream_it_was_made_on():
    cur, devices = _devices()
    for dev in devices:
        outside = dev.make("float32", (4,), bytes(16))
        assert dev.producer_stream(outside) == dev.LEGACY  # the null stream, 0, is DLPack's 1
        first, handle = dev.side_stream()
        with first:
            inside = dev.make("float32", (4,), bytes(16))
            assert dev.current_stream() == handle > 2
        second, other = dev.side_stream()
        with second:  # asked from another stream context, as test_cuda_exchange does
            assert dev.current_stream() == other != handle
            assert dev.producer_stream(inside) == handle, dev.name
            assert dev.producer_stream(outside) == dev.LEGACY, dev.name


def test_cupy_side_streams_live_as_long_as_the_device():
    cur, (cupy, _) = _devices()
    handles = [cupy.side_stream()[1] for _ in range(3)]
    gc.collect()
    assert not set(handles) & set(cur.destroyed)


def test_device_only_targets_offer_the_dtypes_made_as_asked():
    """cupy@cuda and jax@cuda make device arrays for the host files' producer checks
    (device_tensors); their dtypes are those made as asked: jax without jax_enable_x64 makes an
    int64 array an int32 one, which is not offered. (A stand-in device over numpy.)"""
    numpy = pytest.importorskip("numpy")
    from dlconform.targets.cuda_libs import _DeviceOnlyTarget

    class Narrowing:
        def make(self, dtype, shape, values):
            x = numpy.frombuffer(bytes(values), dtype=numpy.dtype(dtype)).reshape(shape)
            return x.astype(numpy.int32) if x.dtype == numpy.int64 else x

        def to_host(self, y):
            return y.tobytes()

    class Lib(_DeviceOnlyTarget):
        library = "numpy"
        array_type = staticmethod(lambda module: module.ndarray)
        consumer = staticmethod(lambda module: module.from_dlpack)

        def stream_device(self):
            return Narrowing()

    lib = Lib(device="cuda")
    assert lib.device_tensors and lib.device == (2, 0)
    names = lib.dtypes()
    assert "float32" in names and "int32" in names and "int64" not in names, names
    x = lib.make("int16", (2,), b"\x01\x00\x02\x00")
    assert lib.expected(x) == b"\x01\x00\x02\x00"


def test_cupy_device_tensors_through_cupys_api():
    """cupy@cuda's part of the host files' producer checks (make, dtypes, views, layout, the
    value oracle), against a stand-in whose arrays are numpy's under cupy's names (cupy's API
    is numpy's, plus `x.data.ptr`, `cupy.asnumpy` and its streams)."""
    numpy = pytest.importorskip("numpy")
    from dlconform.targets.cuda_libs import CupyTarget

    class Array(numpy.ndarray):
        @property
        def data(self):
            return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    cur = _Current()
    cupy = _fake_cupy(cur)
    cupy.asarray = lambda a: numpy.array(a).view(Array)
    cupy.asnumpy, cupy.flip, cupy.__version__ = numpy.asarray, numpy.flip, "14.2.0"
    target = CupyTarget.__new__(CupyTarget)  # not LibraryTarget's import of cupy
    target.module, target.name = cupy, "cupy@cuda"
    runtime = types.SimpleNamespace()  # kit.cuda's runtime: one per process
    target._runtime_or_why = lambda: (runtime, None)
    assert target.stream_device() is target.stream_device()  # one device: its side streams live with it
    assert {"float32", "int64", "complex128", "bool"} <= set(target.dtypes())
    x = target.make("int16", (2, 3), bytes(range(12)))
    assert target.expected(x) == bytes(range(12))
    t = target.transpose(x, (1, 0))
    assert target.native_layout(t)[:2] == ((3, 2), (1, 3))
    back = target.slice(x, 1, None, None, -1)
    shape, strides, ptr = target.native_layout(back)
    assert shape == (2, 3) and strides == (3, -1) and ptr == x.data.ptr + 4
    assert target.expected(back) == bytes([4, 5, 2, 3, 0, 1, 10, 11, 8, 9, 6, 7])
    assert target.native_layout(target.flip(x, 0))[1] == (-3, 1)


def test_a_device_that_names_no_per_thread_context_has_none():
    """A CudaStreamDevice subclass that says nothing of the per-thread default stream (an
    adapter written before it existed) offers no such context, so its library is never compared
    with pyref's (STR-06); pyref@cuda's own device offers pyref's."""
    from dlconform.targets.pyref_target import CudaStreamDevice, PyrefCudaDevice

    class OldAdapterDevice(CudaStreamDevice):
        def side_stream(self):
            return contextlib.nullcontext(), 99

    assert OldAdapterDevice(pyref=None, runtime=None).per_thread_stream() is None
    pyref = types.SimpleNamespace(cuda_stream=lambda handle: ("context of", handle))
    assert PyrefCudaDevice(pyref, runtime=None).per_thread_stream() == (("context of", 2), 2)


def test_the_libraries_imports_name_their_dtypes_as_dlpack_does():
    """import_dtype (test_cuda_refusals.py's VER-09 reading over CUDA memory) of an import of
    torch, cupy and jax: its dtype as DLPack's (code, bits, lanes), None for a dtype of the
    library's that DLPack has no type for (a typed result, which an unknown code cannot be);
    jax's imports are read-only to their users (FLG-03), torch's and cupy's say nothing."""
    from dlconform.targets.cuda_libs import JaxStreamDevice

    _, (cupy, torch) = _devices()
    jax = JaxStreamDevice(types.SimpleNamespace(module=None, version=lambda: "0.11.2"), None, "cuda:0")
    named = types.SimpleNamespace
    assert torch.import_dtype(named(dtype="torch.bfloat16")) == (4, 16, 1)
    assert torch.import_dtype(named(dtype="torch.float8_e4m3fn")) == (10, 8, 1)
    assert torch.import_dtype(named(dtype="torch.qint8")) is None
    for dev in (cupy, jax):
        assert dev.import_dtype(named(dtype="float32")) == (2, 32, 1)
        assert dev.import_dtype(named(dtype="bool")) == (6, 8, 1)
        assert dev.import_dtype(named(dtype="object")) is None
    assert jax.import_readonly(named()) is True
    assert cupy.import_readonly(named()) is None and torch.import_readonly(named()) is None
