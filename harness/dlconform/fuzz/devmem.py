"""The consumer target's CUDA mode (DLCONFORM_FUZZ_DEVICE=cuda): the Python half of
fuzz/devmem.c, used by the C target's start-up and by the reproducers (issue 21).

In that mode an export the record places on (kDLCUDA, 0) over a real buffer lives in CUDA
device memory: the buffer is laid out and filled as layout.c does on the host, then copied to
a cudaMalloc'd block of the same size, and the capsule's data points into that block. So a
CUDA consumer (torch, cupy, a kernel library) gets a truthful device export and imports it,
where the host-memory records test only how it refuses. The runtime is the one
dlconform.kit.cuda loads (DLCONFORM_CUDART, else the system's), so the target, the consumer
and the library under test share one runtime and one address space of device memory. Without
one the mode cannot start: one line, exit status 2.
"""
import os

from . import record as R

ENV = "DLCONFORM_FUZZ_DEVICE"
MODES = ("cuda",)
#: the runtime functions devmem.c calls
FUNCTIONS = ("cudaMalloc", "cudaFree", "cudaMemcpy", "cudaGetLastError", "cudaStreamSynchronize",
             "cudaStreamCreateWithFlags", "cudaStreamQuery", "cudaDeviceSynchronize", "cudaMemcpyAsync",
             "cudaStreamWaitEvent", "cudaEventCreateWithFlags", "cudaEventRecord")
#: consumers whose import of device memory is not their from_dlpack: (module, function, whether
#: the runtime must be bound into the module first: ref's C code calls it through addresses)
DEVICE_ENTRY = {"ref": ("dlconform._ref", "cuda_from_dlpack", True),
                "dlconform.pyref": ("dlconform.pyref", "device_from_dlpack", False)}


def split_target(target):
    """(consumer, device mode or None) of a consumer target's name: "torch@cuda" is torch in the
    CUDA mode, "torch" torch on host memory. Unavailable for a device that has no mode."""
    consumer, at, device = target.partition("@")
    if not at:
        return target, None
    if device not in MODES:
        raise Unavailable("%s: the fuzz targets' device modes are %s (NAME@%s)" % (
            target, ", ".join(MODES), "|".join(MODES)))
    return consumer, device


class Unavailable(Exception):
    """The mode was asked for and cannot run: its one-line reason."""


def mode():
    """"cuda" when DLCONFORM_FUZZ_DEVICE asks for the CUDA mode, None when unset or empty."""
    value = os.environ.get(ENV) or None
    if value is not None and value not in MODES:
        raise Unavailable("%s=%s: the fuzz targets' device modes are %s" % (ENV, value, ", ".join(MODES)))
    return value


def runtime():
    """kit.cuda's runtime, or Unavailable saying why there is none."""
    from ..kit import cuda

    rt = cuda.runtime()
    if rt is None:
        raise Unavailable("%s=cuda needs a CUDA runtime and device: %s (%s=build/cuda/sim/libcudart.so runs it "
                          "on the simulated one)" % (ENV, cuda.why_not(), cuda.ENV))
    return rt


def consumer_entry(consumer):
    """The function that imports device memory for `consumer` in the CUDA mode (DEVICE_ENTRY;
    ref's bound to the runtime first), or None: the consumer's own from_dlpack."""
    if consumer not in DEVICE_ENTRY:
        return None
    import importlib

    from ..kit import cuda

    name, function, bind = DEVICE_ENTRY[consumer]
    module = importlib.import_module(name)
    if bind:
        module.cuda_bind(cuda.addresses(runtime(), module.CUDA_FUNCTIONS))
    return getattr(module, function)


def setup(consumer):
    """For fuzz/devmem.c's start-up: (consumer_entry(consumer), {function: address} of
    FUNCTIONS). Raises Unavailable."""
    from ..kit import cuda

    rt = runtime()
    table = cuda.addresses(rt, FUNCTIONS)
    fill = slow_fill_address(rt)
    if fill:
        table["dlc_slow_fill"] = fill
    return consumer_entry(consumer), table


def slow_fill_address(rt):
    """The address of dlc_slow_fill where it is a C function (the simulated runtime's, or the
    helper library `make cuda` builds), else 0: a pending upload then has no spin before it (the
    PTX launcher is Python, too slow per input)."""
    import ctypes

    from ..kit import cuda

    try:
        fn = rt._slow_fill()
    except cuda.CudaError:
        return 0
    return ctypes.cast(fn, ctypes.c_void_p).value if isinstance(fn, ctypes._CFuncPtr) else 0


class _RefStream:
    """ref's side-stream context: cuda_set_stream(handle) for the block, the stream before it
    set back after."""

    def __init__(self, ref, handle):
        self.ref, self.handle, self.before = ref, handle, None

    def __enter__(self):
        self.before = self.ref.cuda_set_stream(self.handle)
        return self.handle

    def __exit__(self, *exc):
        self.ref.cuda_set_stream(self.before)
        return False


def side_stream(consumer):
    """(a callable giving a new context manager that makes a non-blocking stream the consumer
    library's current one, that stream's DLPack int), made once, for DLC_KW_SIDE_STREAM
    (fuzz/devmem.h); None for a library whose stream context dlconform does not know. ref:
    cuda_set_stream; dlconform.pyref: cuda_stream; torch: torch.cuda.stream; cupy: its Stream."""
    import importlib

    if consumer == "ref":
        ref = importlib.import_module("dlconform._ref")
        handle = runtime().stream().handle
        return (lambda: _RefStream(ref, handle)), handle
    if consumer == "dlconform.pyref":
        pyref = importlib.import_module("dlconform.pyref")
        handle = runtime().stream().handle
        return (lambda: pyref.cuda_stream(handle)), handle
    if consumer == "torch":
        torch = importlib.import_module("torch")
        s = torch.cuda.Stream()
        return (lambda: torch.cuda.stream(s)), s.cuda_stream
    if consumer == "cupy":
        cupy = importlib.import_module("cupy")
        s = cupy.cuda.Stream(non_blocking=True)
        return (lambda: s), s.ptr
    return None


def backs(rec, p):
    """dlc_devmem_backs: whether the mode puts this record's buffer in device memory."""
    return mode() == "cuda" and rec["device"] == (R.CUDA, 0) and p["mode"] == "buffer"


#: devmem.h's DLC_DEVMEM_POISON: what a pending block holds until the producer's stream wrote it
POISON = 0xA5
#: devmem.c's spin before a pending copy, in clock cycles (DLCONFORM_FUZZ_PENDING_CYCLES)
PENDING_CYCLES_ENV = "DLCONFORM_FUZZ_PENDING_CYCLES"


class _Pending:
    """devmem.c's pend: the producer's non-blocking stream, the event recorded after the latest
    pending upload, the byte the spin writes, the spin (dlc_slow_fill where it is C), and the
    device staging block the pending copy reads."""

    def __init__(self, rt):
        self.stream = rt.stream(non_blocking=True).handle
        self.event = rt.event().handle
        self.spin_byte = rt.malloc(1)
        self.cycles = int(os.environ.get(PENDING_CYCLES_ENV) or 200000)
        self.fill = rt.slow_fill if slow_fill_address(rt) and self.cycles > 0 else None
        self.rt, self.staging, self.staging_n = rt, 0, 0

    def stage(self, data):
        """devmem.c's staging: data in the staging block (grown as needed), once the stream is
        idle (an earlier pending copy has read it)."""
        self.rt.synchronize(self.stream)
        if len(data) > self.staging_n:
            if self.staging:
                self.rt.free(self.staging)
            self.staging, self.staging_n = 0, 0
            self.staging = self.rt.malloc(len(data))
            self.staging_n = len(data)
        self.rt.copy_to_device(self.staging, data)
        return self.staging


_pending = {}  # per runtime: its _Pending, or None when the runtime could not make one


def _pend(rt):
    if id(rt) not in _pending:
        try:
            _pending[id(rt)] = _Pending(rt)
        except Exception:  # dlc_devmem_upload then copies synchronously
            _pending[id(rt)] = None
    return _pending[id(rt)]


class DeviceMemory:
    """The device copy of a record's host buffer (devmem.c's dlc_devmem_upload): address is the
    block's first byte, freed by free() (the export's end). pending: the bytes are left pending
    on the producer's stream behind poison, as devmem.h says; `pending` is then True."""

    def __init__(self, host_bytes, pending=False):
        from ..kit import cuda

        self.rt = rt = runtime()
        n = len(host_bytes)
        self.address = rt.malloc(n + 1)  # no other block starts at its end
        pend = _pend(rt) if pending else None
        self.pending = pend is not None
        if not self.pending:
            rt.copy_to_device(self.address, host_bytes)
            return
        stage = pend.stage(bytes(host_bytes))
        rt.copy_to_device(self.address, bytes([POISON]) * (n + 1))
        if pend.fill is not None:
            pend.fill(pend.stream, pend.spin_byte, 1, 0, pend.cycles)
        rt._call("cudaMemcpyAsync", self.address, stage, n, cuda.DEVICE_TO_DEVICE, pend.stream)
        rt.record(pend.event, pend.stream)

    def free(self):
        if self.address:
            if self.pending:  # the pending copy runs before its block goes
                self.rt.synchronize(_pend(self.rt).stream)
            self.rt.free(self.address)
            self.address = 0


def work_stream():
    """dlc_devmem_work_stream: the producer's own stream once a pending upload made it, else
    None (what the offered tables' current_work_stream names for CUDA device 0)."""
    if mode() != "cuda":
        return None
    pend = _pending.get(id(runtime()))
    return pend.stream if pend is not None else None


def order(stream, host_copy):
    """dlc_devmem_order: the producer's answer to a __dlpack__ call over pending bytes."""
    from ..kit import cuda

    rt = runtime()
    pend = _pend(rt)
    if pend is None:
        return
    try:
        if host_copy:
            rt.synchronize(pend.stream)  # STR-12
            return
        if stream is None:
            v = 1  # STR-04: the legacy default stream
        elif not isinstance(stream, int):
            return
        else:
            v = int(stream)
            if v < 0:  # -1 (STR-03) and below
                return
            v = 1 if v == 0 else v  # 0 (STR-08) as a lenient producer reads it
            if v >= 1 << 64:
                return  # PyLong_AsVoidPtr overflows: nothing waited for
        rt.wait(v, pend.event)
    except cuda.CudaError:  # a handle the runtime does not know: no verdict here
        return
