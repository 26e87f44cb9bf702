"""torch@cuda's stream device: torch's CUDA tensors for the device checks that observe
(suites/test_cuda_stream.py), through kit.cuda's runtime, which is torch's own libcudart once
torch initialised CUDA (kit.cuda finds a loaded runtime by its name).

torch's producer side: Tensor.__dlpack__(stream=S) makes S wait on an event recorded on
torch's *current* stream, so that stream is the producer's: the checks enqueue their slow work
on it. Streams are DLPack's ints: 1 the legacy default stream (torch's default stream, whose
handle is 0 in torch), 2 the per-thread default stream, above 2 a handle from new_stream().

Not yet run on a GPU (issue 21): written to the interface pyref@cuda's device passes with on
the simulated runtime (targets/pyref_target.py, CudaStreamDevice, whose stream handling it
shares). It offers no per-thread default stream context (per_thread_stream is None): torch has no
way to make that stream its current one, short of a build with it as the default."""
from .pyref_target import CudaStreamDevice
from .torch_target import host_bytes


class TorchCudaStreamDevice(CudaStreamDevice):
    def __init__(self, target, runtime):
        self._target, self.runtime = target, runtime
        self._torch = target.torch
        self.name = "torch %s CUDA tensors" % target.version()

    def _dlpack_stream(self, stream):
        """DLPack's int for a torch stream: its handle, 1 for the legacy default stream."""
        return stream.cuda_stream or self.LEGACY

    def make(self, dtype, shape, values):
        """A tensor on cuda:0 with the values, copied there by torch on its current stream,
        which the tensor remembers as its producer stream."""
        x = self._target.make_host(dtype, shape, values).to("cuda:0")
        x._dlc_stream = self.current_stream()
        return x

    def producer_stream(self, x):
        """The stream x was produced on: torch's current stream when make() made it, which is
        the stream torch's export makes the consumer's wait on while it is still current (a
        check that asks later, from another stream context, gets the stream of the making,
        not the one current then)."""
        stream = getattr(x, "_dlc_stream", None)
        return stream if stream is not None else self._dlpack_stream(self._torch.cuda.current_stream(x.device))

    def memory(self, x):
        """(device address, byte count) of x's elements (a contiguous tensor from make())."""
        return x.data_ptr(), x.numel() * x.element_size()

    def current_stream(self):
        return self._dlpack_stream(self._torch.cuda.current_stream())

    def side_stream(self):
        """(torch.cuda.stream(s) for a new torch stream s, its DLPack int)."""
        s = self._torch.cuda.Stream()
        return self._torch.cuda.stream(s), s.cuda_stream

    def import_dtype(self, y):
        """The dtype of torch's import y (torch.float32 is DLPack's float32); None for a torch
        dtype DLPack has no type for."""
        return self.dtype_named(str(y.dtype).rpartition(".")[2])

    def to_host(self, y):
        return host_bytes(self._torch, y)
