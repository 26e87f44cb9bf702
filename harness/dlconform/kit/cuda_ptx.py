"""dlc_slow_fill without nvcc: the helper's kernel as PTX, loaded through the CUDA driver API.

A machine whose CUDA came with the frameworks' pip wheels has a driver (libcuda.so.1, part of
the GPU driver) and a runtime, but no nvcc to build build/cuda/libdlc_cuda.so (`make cuda`).
The stream checks need one kernel there: spin a number of clock cycles, then write a byte over
a range (probes/cuda/dlc_cuda.cu). Here it is written by hand in PTX, which the driver compiles
for whatever GPU it finds (ISA 7.0, target sm_52: any driver of CUDA 11 or newer, any GPU
since Maxwell), and launched with cuLaunchKernel on the caller's stream: a stream handle of
the runtime API is a CUstream of the driver API, 1 and 2 included (CU_STREAM_LEGACY,
CU_STREAM_PER_THREAD).

The launch runs in the runtime's primary context, made current by the runtime (its first
call), which the kit calls before (kit.cuda: the runtime allocated the memory filled): no
context of ours, nothing a library under test could see. dlconform's simulated runtime
exports the few driver functions used here, so this path is tested without a GPU
(DLCONFORM_CUDA_HELPER=ptx chooses it there).
"""
import ctypes
import threading

#: the kernel: every thread spins `cycles` clock cycles (%clock64), then the grid writes the
#: low byte of `byte` into the n bytes at ptr, grid-stride; nothing is written before the spin
#: ends, so a reader ordered after the kernel sees every byte and one that is not sees none at
#: first (the invariant of dlc_cuda.cu's slow_fill)
PTX = r"""
.version 7.0
.target sm_52
.address_size 64

.visible .entry dlc_slow_fill(
    .param .u64 dlc_ptr,
    .param .u64 dlc_n,
    .param .u32 dlc_byte,
    .param .u64 dlc_cycles
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<6>;
    .reg .b64 %rd<12>;

    ld.param.u64 %rd1, [dlc_ptr];
    ld.param.u64 %rd2, [dlc_n];
    ld.param.u32 %r1, [dlc_byte];
    ld.param.u64 %rd3, [dlc_cycles];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u64 %rd4, %clock64;
SPIN:
    mov.u64 %rd5, %clock64;
    sub.s64 %rd6, %rd5, %rd4;
    setp.lt.s64 %p1, %rd6, %rd3;
    @%p1 bra SPIN;
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %nctaid.x;
    mul.wide.u32 %rd7, %r2, %r3;
    cvt.u64.u32 %rd8, %r4;
    add.s64 %rd9, %rd7, %rd8;
    mul.wide.u32 %rd10, %r3, %r5;
FILL:
    setp.ge.u64 %p2, %rd9, %rd2;
    @%p2 bra DONE;
    add.s64 %rd11, %rd1, %rd9;
    st.global.u8 [%rd11], %r1;
    add.s64 %rd9, %rd9, %rd10;
    bra FILL;
DONE:
    ret;
}
"""
ENTRY = b"dlc_slow_fill"
#: the launch's shape, as dlc_cuda.cu's: 256 threads a block, at most 1024 blocks
THREADS, MAX_BLOCKS = 256, 1024
#: the driver library of a GPU machine
DRIVER = "libcuda.so.1"

_vp, _int, _uint = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
#: the driver functions used, with their argument types (all return CUresult, 0 success)
PROTOTYPES = {
    "cuCtxGetCurrent": (ctypes.POINTER(_vp),),
    "cuModuleLoadData": (ctypes.POINTER(_vp), ctypes.c_char_p),
    "cuModuleGetFunction": (ctypes.POINTER(_vp), _vp, ctypes.c_char_p),
    "cuLaunchKernel": (_vp, _uint, _uint, _uint, _uint, _uint, _uint, _uint, _vp, ctypes.POINTER(_vp), _vp),
}


class PtxFill:
    """dlc_slow_fill(stream, ptr, n, byte, cycles) over `driver` (a CDLL of the driver API):
    0 once enqueued; a failing driver call raises the kit's CudaError, named after it. The
    module is loaded at the first call, in the context current then, once."""

    def __init__(self, driver, error):
        self.driver, self._error = driver, error
        for name, args in PROTOTYPES.items():
            fn = getattr(driver, name)
            fn.argtypes, fn.restype = args, _int
        self._text = getattr(driver, "cuGetErrorString", None)
        if self._text is not None:
            self._text.argtypes, self._text.restype = (_int, ctypes.POINTER(ctypes.c_char_p)), _int
        self._function, self._lock = None, threading.Lock()

    def _check(self, name, code):
        if code:
            text = ctypes.c_char_p()
            known = self._text is not None and self._text(code, ctypes.byref(text)) == 0 and text.value
            raise self._error(name, code, text.value.decode(errors="replace") if known else "CUresult %d" % code)

    def _kernel(self):
        with self._lock:
            if self._function is None:
                ctx = _vp()
                self._check("cuCtxGetCurrent", self.driver.cuCtxGetCurrent(ctypes.byref(ctx)))
                if not ctx.value:  # the runtime made none current on this thread: not ours to make
                    raise self._error("cuCtxGetCurrent", -1, "no current CUDA context (the runtime's primary context "
                                      "is made current by its first call on this thread)")
                module, function = _vp(), _vp()
                self._check("cuModuleLoadData", self.driver.cuModuleLoadData(ctypes.byref(module), PTX.encode()))
                self._check("cuModuleGetFunction",
                            self.driver.cuModuleGetFunction(ctypes.byref(function), module, ENTRY))
                self._module, self._function = module, function
            return self._function

    def __call__(self, stream, ptr, n, byte, cycles):
        if cycles < 0 or (n > 0 and not ptr):
            raise self._error("dlc_slow_fill", 1, "invalid argument (cycles %d, ptr %#x, %d bytes)"
                              % (cycles, ptr or 0, n))
        if n == 0:
            return 0
        function = self._kernel()
        args = (ctypes.c_uint64(ptr), ctypes.c_uint64(n), ctypes.c_uint32(byte & 0xFF), ctypes.c_int64(cycles))
        params = (_vp * len(args))(*(ctypes.cast(ctypes.byref(a), _vp) for a in args))
        blocks = min(MAX_BLOCKS, (n + THREADS - 1) // THREADS)
        self._check("cuLaunchKernel", self.driver.cuLaunchKernel(function, blocks, 1, 1, THREADS, 1, 1, 0,
                                                                 stream or None, params, None))
        return 0
