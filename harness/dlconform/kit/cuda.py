"""A CUDA runtime, found at run time: ctypes over libcudart, with no link-time dependency.

`runtime()` gives a `Runtime`, or None when there is no usable one; `why_not()` says why (no
library, no device, an error). `DLCONFORM_CUDART=/path/libcudart.so` names the library to use
instead of the system's: build/cuda/sim/libcudart.so, dlconform's simulated runtime
(probes/cuda/sim), makes the GPU checks' logic testable without a GPU. The same calls run on
the real libcudart and on the simulation; only `host_syncs()` is the simulation's alone.

Stream arguments are cudaStream_t handles as ints, as DLPack passes them (STR-05..07): 1 the
legacy default stream (`LEGACY`), 2 the per-thread default stream (`PER_THREAD`), above 2 a
stream a library made. 0 is the legacy stream to the runtime API; DLPack's ban on 0 (STR-08)
is for `__dlpack__`, and the kit passes 0 nowhere.

`slow_fill` comes from dlconform's helper library: the simulated runtime exports it; with a
real one it is build/cuda/libdlc_cuda.so (`make cuda`), or the library `DLCONFORM_CUDA_HELPER`
names, else its kernel as PTX launched through the CUDA driver (kit/cuda_ptx.py: no nvcc
needed; `DLCONFORM_CUDA_HELPER=ptx` takes that path). Loading this module loads nothing: the
library is opened by the first `runtime()`.
"""
import ctypes
import os
import threading

#: the environment variables naming the runtime and the helper library
ENV, HELPER_ENV = "DLCONFORM_CUDART", "DLCONFORM_CUDA_HELPER"
#: cudaStreamLegacy and cudaStreamPerThread
LEGACY, PER_THREAD = 1, 2
#: cudaMemcpyKind
HOST_TO_HOST, HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE, DEFAULT = range(5)
NON_BLOCKING = 0x01  # cudaStreamNonBlocking
DISABLE_TIMING = 0x02  # cudaEventDisableTiming
NOT_READY = 600  # cudaErrorNotReady: a query's "still pending"
#: the names the system's runtime is looked for by when ENV is unset, versioned first: dlopen
#: matches a loaded library by its SONAME (after the runtimes already loaded, _loaded())
SYSTEM_NAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
#: where pip's CUDA wheels keep the runtime, under a folder of sys.path: nvidia-cuda-runtime
#: for CUDA 13 (nvidia/cu13/lib) and CUDA 12 (nvidia/cuda_runtime/lib). A machine whose CUDA
#: came with torch, jax or cupy wheels has no other: it is on no loader path, torch reaches it
#: by its RPATH, jax's plugin by its full path, and cupy links the runtime statically
WHEEL_FILES = (os.path.join("nvidia", "cu13", "lib", "libcudart.so.13"),
               os.path.join("nvidia", "cuda_runtime", "lib", "libcudart.so.12"),
               os.path.join("nvidia", "cuda_runtime", "lib", "libcudart.so.13"))
#: where a CUDA toolkit keeps its runtime when the dynamic loader's path does not name it (a
#: GPU machine's /usr/local/cuda/lib64 is often absent from ld.so.conf): tried last
TOOLKIT_DIRS = tuple(os.path.join(d, "lib64") for d in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
                                                     "/usr/local/cuda") if d)
_HERE = os.path.dirname(os.path.abspath(__file__)) if os.path.isfile(__file__) else None
#: the helper library `make cuda` builds, beside the harness (None in a standalone reproducer)
HELPER = None if _HERE is None else os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(_HERE))),
                                                 "build", "cuda", "libdlc_cuda.so")

_vp, _sz, _int, _uint = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint
#: the functions the kit calls, with their argument types (all return cudaError_t)
PROTOTYPES = {
    "cudaGetDeviceCount": (ctypes.POINTER(_int),),
    "cudaGetLastError": (),
    "cudaMalloc": (ctypes.POINTER(_vp), _sz),
    "cudaFree": (_vp,),
    "cudaMemcpy": (_vp, _vp, _sz, _int),
    "cudaMemcpyAsync": (_vp, _vp, _sz, _int, _vp),
    "cudaStreamCreateWithFlags": (ctypes.POINTER(_vp), _uint),
    "cudaStreamSynchronize": (_vp,),
    "cudaStreamQuery": (_vp,),
    "cudaStreamDestroy": (_vp,),
    "cudaStreamWaitEvent": (_vp, _vp, _uint),
    "cudaEventCreateWithFlags": (ctypes.POINTER(_vp), _uint),
    "cudaEventRecord": (_vp, _vp),
    "cudaEventQuery": (_vp,),
    "cudaEventSynchronize": (_vp,),
    "cudaEventDestroy": (_vp,),
    "cudaDeviceSynchronize": (),
}
SLOW_FILL = (_vp, _vp, _sz, _int, ctypes.c_longlong)


class CudaError(RuntimeError):
    """A runtime call that failed: `call`, `code` (cudaError_t) and the runtime's own words."""

    def __init__(self, call, code, text):
        super().__init__("%s: %s (cudaError %d)" % (call, text, code))
        self.call, self.code, self.text = call, code, text


class Runtime:
    """One loaded CUDA runtime with at least one device. `path` (what was loaded),
    `simulated` (dlconform's simulated runtime), `devices` (the count when it was loaded)."""

    def __init__(self, lib, path):
        self.lib, self.path = lib, path
        for name, args in PROTOTYPES.items():
            fn = getattr(lib, name)
            fn.argtypes, fn.restype = args, _int
        lib.cudaGetErrorString.argtypes, lib.cudaGetErrorString.restype = (_int,), ctypes.c_char_p
        self.simulated = hasattr(lib, "dlcsim_host_syncs")
        if self.simulated:
            lib.dlcsim_host_syncs.argtypes, lib.dlcsim_host_syncs.restype = (), ctypes.c_ulonglong
        self._fill, self._kept = None, []
        self._fill_lock = threading.Lock()
        self.devices = self.device_count()

    # ---- calls and errors
    def error_string(self, code):
        text = self.lib.cudaGetErrorString(code)
        return text.decode(errors="replace") if text else "unknown error"

    def _call(self, name, *args, ok=(0,)):
        code = getattr(self.lib, name)(*args)
        if code not in ok:
            self.lib.cudaGetLastError()  # a library under test must not meet our error as its own
            raise CudaError(name, code, self.error_string(code))
        return code

    # ---- the device and memory
    def device_count(self):
        n = _int(0)
        self._call("cudaGetDeviceCount", ctypes.byref(n))
        return n.value

    def malloc(self, nbytes):
        """The address (int) of nbytes of device memory; 0 for 0 bytes."""
        p = _vp()
        self._call("cudaMalloc", ctypes.byref(p), nbytes)
        return p.value or 0

    def free(self, ptr):
        self._call("cudaFree", ptr)

    def copy_to_device(self, ptr, data, stream=None):
        """The bytes `data` into device memory at ptr: synchronously (cudaMemcpy) when `stream` is
        None, else enqueued on that stream, from a host copy the Runtime keeps for its life (an
        enqueued copy reads its source when it runs)."""
        data = bytes(data)
        if stream is None:
            if data:
                self._call("cudaMemcpy", ptr, data, len(data), HOST_TO_DEVICE)
            return
        buf = ctypes.create_string_buffer(data, len(data))
        self._kept.append(buf)
        if data:
            self._call("cudaMemcpyAsync", ptr, buf, len(data), HOST_TO_DEVICE, stream)

    def copy_to_host(self, ptr, nbytes, kind=DEVICE_TO_HOST):
        """nbytes at ptr, copied synchronously (cudaMemcpy on the legacy default stream: it waits
        for the legacy and blocking streams, not for non-blocking ones). kind DEFAULT lets the
        runtime tell device memory from host memory (managed memory)."""
        return self.copy_out(ptr, nbytes, kind).raw

    def copy_out(self, ptr, nbytes, kind=DEVICE_TO_HOST):
        """copy_to_host() into a ctypes buffer, which it returns."""
        buf = ctypes.create_string_buffer(nbytes)
        if nbytes:
            self._call("cudaMemcpy", buf, ptr, nbytes, kind)
        return buf

    def read_on(self, stream, ptr, nbytes):
        """What a consumer reading on `stream` sees: a copy of nbytes at ptr enqueued on that
        stream, then that stream synchronized alone (STR-01's observation)."""
        buf = ctypes.create_string_buffer(nbytes)
        if nbytes:
            self._call("cudaMemcpyAsync", buf, ptr, nbytes, DEVICE_TO_HOST, stream)
        self._call("cudaStreamSynchronize", stream)
        return buf.raw

    # ---- streams and events
    def stream(self, non_blocking=True):
        """A new `Stream` (cudaStreamCreateWithFlags)."""
        h = _vp()
        self._call("cudaStreamCreateWithFlags", ctypes.byref(h), NON_BLOCKING if non_blocking else 0)
        return Stream(self, h.value)

    def synchronize(self, stream=None):
        """cudaStreamSynchronize of `stream`, or cudaDeviceSynchronize when None."""
        if stream is None:
            self._call("cudaDeviceSynchronize")
        else:
            self._call("cudaStreamSynchronize", stream)

    def idle(self, stream):
        """Whether everything enqueued on `stream` has run (cudaStreamQuery, never blocks)."""
        return self._call("cudaStreamQuery", stream, ok=(0, NOT_READY)) == 0

    def destroy_stream(self, stream):
        self._call("cudaStreamDestroy", stream)

    def event(self):
        """A new `Event` (cudaEventCreateWithFlags, timing disabled)."""
        h = _vp()
        self._call("cudaEventCreateWithFlags", ctypes.byref(h), DISABLE_TIMING)
        return Event(self, h.value)

    def record(self, event, stream):
        self._call("cudaEventRecord", event, stream)

    def wait(self, stream, event):
        """Makes `stream` wait for the event's latest record (cudaStreamWaitEvent)."""
        self._call("cudaStreamWaitEvent", stream, event, 0)

    # ---- the helper library and the simulation's count
    def slow_fill(self, stream, ptr, nbytes, byte, cycles):
        """Enqueues on `stream` work of `cycles` clock cycles, then a write of `byte` into the
        nbytes at ptr (dlc_slow_fill); returns at once."""
        fn = self._slow_fill()
        code = fn(stream, ptr, nbytes, byte, cycles)
        if code:
            self.lib.cudaGetLastError()
            raise CudaError("dlc_slow_fill", code, self.error_string(code))

    def _slow_fill(self):
        with self._fill_lock:
            if self._fill is None:
                self._fill = _helper(self.lib)
                if isinstance(self._fill, ctypes._CFuncPtr):  # a C function; the PTX launcher checks its own
                    self._fill.argtypes, self._fill.restype = SLOW_FILL, _int
            return self._fill

    def host_syncs(self):
        """How many calls have blocked the host on device work so far, where the runtime counts
        them (the simulated one); None otherwise."""
        return self.lib.dlcsim_host_syncs() if self.simulated else None


class Stream:
    """A stream this kit made: `handle` (int, the cudaStream_t), `synchronize()`, `idle()`,
    `destroy()`."""

    def __init__(self, runtime, handle):
        self.runtime, self.handle = runtime, handle

    def synchronize(self):
        self.runtime.synchronize(self.handle)

    def idle(self):
        return self.runtime.idle(self.handle)

    def destroy(self):
        self.runtime.destroy_stream(self.handle)


class Event:
    """An event this kit made: `handle`, `record(stream)`, `synchronize()`, `done()`,
    `destroy()`."""

    def __init__(self, runtime, handle):
        self.runtime, self.handle = runtime, handle

    def record(self, stream):
        self.runtime.record(self.handle, stream)

    def synchronize(self):
        self.runtime._call("cudaEventSynchronize", self.handle)

    def done(self):
        return self.runtime._call("cudaEventQuery", self.handle, ok=(0, NOT_READY)) == 0

    def destroy(self):
        self.runtime._call("cudaEventDestroy", self.handle)


def _helper(lib):
    """dlc_slow_fill: the runtime's own (the simulated one exports it), else the helper library
    (HELPER_ENV's, else `make cuda`'s), else its kernel's PTX launched through the CUDA driver
    (cuda_ptx: no nvcc needed). HELPER_ENV=ptx takes the PTX path (the simulated runtime
    exports the driver functions it calls)."""
    from .cuda_ptx import DRIVER, PtxFill

    choice = os.environ.get(HELPER_ENV)
    if choice != "ptx":
        if hasattr(lib, "dlc_slow_fill"):
            return lib.dlc_slow_fill
        path = choice or HELPER
        if path and os.path.exists(path):
            return ctypes.CDLL(path).dlc_slow_fill
    if hasattr(lib, "cuLaunchKernel"):
        return PtxFill(lib, CudaError)
    try:
        return PtxFill(ctypes.CDLL(DRIVER), CudaError)
    except (OSError, AttributeError) as e:
        raise CudaError("dlc_slow_fill", -1, "no helper library (`make cuda` builds %s with nvcc, or set %s) and "
                        "no CUDA driver to launch its PTX (%s)" % (HELPER or "build/cuda/libdlc_cuda.so",
                                                                    HELPER_ENV, e))


_CACHE, _LOCK = {}, threading.Lock()


def load(wrap):
    """(wrap(library, name) or None, why not) for the runtime library ENV names (unset: the
    system's, SYSTEM_NAMES in order), once per `wrap` and value of ENV. `wrap` builds the
    caller's runtime object (the kit's Runtime, pyref's own) and raises CudaError or
    AttributeError when the library is no usable runtime; one with no device is none either.
    Shared by the kit and pyref."""
    choice = os.environ.get(ENV) or None
    with _LOCK:
        if (wrap, choice) not in _CACHE:
            _CACHE[wrap, choice] = _open(choice, wrap)
        return _CACHE[wrap, choice]


#: the real paths of the runtimes ENV named in this process: a search without ENV passes them
#: over (a run that named the simulation, then one that did not, in one process: the tests')
_NAMED = set()


def _loaded():
    """The paths of the CUDA runtimes this process has loaded already (a library under test's:
    torch's, jax's), from /proc/self/maps: the kit uses the same one, not a second copy."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            found = [line.split(None, 5)[-1].strip() for line in f if "/libcudart.so" in line]
    except OSError:
        return ()
    return tuple(dict.fromkeys(p for p in found if os.path.isabs(p) and os.path.exists(p)))


def _wheels():
    import sys

    return tuple(os.path.join(d, f) for d in sys.path if d and os.path.isdir(os.path.join(d, "nvidia"))
                 for f in WHEEL_FILES if os.path.exists(os.path.join(d, f)))


def candidates():
    """The libraries tried, in order, when ENV is unset: the runtimes loaded already, the
    loader's SYSTEM_NAMES, pip's wheels (WHEEL_FILES), the toolkits' (TOOLKIT_DIRS)."""
    toolkits = tuple(os.path.join(d, n) for d in TOOLKIT_DIRS for n in SYSTEM_NAMES
                     if os.path.exists(os.path.join(d, n)))
    return tuple(dict.fromkeys(_loaded() + SYSTEM_NAMES + _wheels() + toolkits))


def _open(choice, wrap):
    """The first candidate that loads, is a runtime and counts a device; one that fails says
    why and the next is tried (a libcudart.so.13 on a driver too old for it, say, before the
    .12 a library loaded)."""
    names = (choice,) if choice else candidates()
    where = "%s=%s" % (ENV, choice) if choice else "the system's libcudart"
    unloadable, unusable, seen = [], [], set()
    for name in names:
        if not choice and os.path.isabs(name) and os.path.realpath(name) in _NAMED:
            continue  # loaded for ENV earlier in this process (the simulation): no library's runtime
        try:
            lib = ctypes.CDLL(name)
        except OSError as e:
            unloadable.append(str(e))
            continue
        if choice:
            _NAMED.add(os.path.realpath(choice))
        if lib._handle in seen:  # another name of a library tried already (a symlink, its SONAME)
            continue
        seen.add(lib._handle)
        try:
            rt = wrap(lib, name)
        except CudaError as e:
            unusable.append("no CUDA device: %s says %s" % (name if not choice else where, e))
            continue
        except AttributeError as e:
            unusable.append("%s is not a CUDA runtime: %s" % (name if not choice else where, e))
            continue
        if rt.devices < 1:
            unusable.append("no CUDA device: %s counts 0 devices" % (name if not choice else where))
            continue
        return rt, None
    if unusable:
        return None, "; ".join(unusable)
    return None, "no CUDA runtime: %s cannot be loaded (%s)" % (where, "; ".join(unloadable))


def _resolve():
    return load(Runtime)


def runtime():
    """The CUDA runtime (DLCONFORM_CUDART's, else the system's) when it loads and counts a
    device; else None. Found once per DLCONFORM_CUDART value."""
    return _resolve()[0]


def addresses(rt, names):
    """{name: address} of the runtime's functions `names`: for C code (the reference's CUDA
    tensors) that calls the very library the kit loaded."""
    return {name: ctypes.cast(getattr(rt.lib, name), ctypes.c_void_p).value for name in names}


def why_not():
    """Why runtime() is None (no library, no device, not a runtime), or None when there is one."""
    return _resolve()[1]
