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
             "cudaStreamCreateWithFlags", "cudaStreamQuery", "cudaDeviceSynchronize", "cudaMemcpyAsync")
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
    return consumer_entry(consumer), cuda.addresses(rt, FUNCTIONS)


def backs(rec, p):
    """dlc_devmem_backs: whether the mode puts this record's buffer in device memory."""
    return mode() == "cuda" and rec["device"] == (R.CUDA, 0) and p["mode"] == "buffer"


class DeviceMemory:
    """The device copy of a record's host buffer (devmem.c's upload): address is the block's
    first byte, freed by free() (the export's end)."""

    def __init__(self, host_bytes):
        self.rt = runtime()
        self.address = self.rt.malloc(len(host_bytes) + 1)  # no other block starts at its end
        self.rt.copy_to_device(self.address, host_bytes)

    def free(self):
        if self.address:
            self.rt.free(self.address)
            self.address = 0
