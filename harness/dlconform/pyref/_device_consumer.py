"""Import of CUDA memory: device_from_dlpack(x), pyref's consumer for producers on kDLCUDA,
and the current stream it reads on (current_stream(), cuda_stream(handle)).

Invariants:
  - the producer is asked on pyref's current stream of this thread: 1, the legacy default
    stream, unless `with cuda_stream(handle):` names another (2, the per-thread default
    stream, or a handle). pyref names it explicitly, never None or 0 (STR-05, STR-06, STR-07,
    STR-08, STR-14), and the producer makes it safe to read there
    before __dlpack__ returns (STR-01);
  - the import is a DeviceArray over the producer's memory, read on that stream; it owns the
    managed tensor and gives it back (its deleter, once) when it dies (OWN-01, OWN-03);
  - the header and the layout are validated as from_dlpack validates them (VER-08, VER-09,
    LAY-04, LAY-09, LAY-10) before anything is read; a refusal gives the tensor back once;
  - pyref's DeviceArray is compact row-major: a tensor of any other layout (LAY-11) is
    copied into a new one on the reading stream, a run of contiguous elements at a time, and
    given back once that stream has done the copy (OWN-03: the consumer is done with it then);
  - a producer that raises TypeError for max_version or copy is asked again with the stream
    alone (VER-06);
  - the array API's keywords: device=None keeps the data on the GPU (API-05), "cpu" asks the
    producer for a host copy (DEV-06, never with copy=False: CPY-07), any other device is
    BufferError (CPY-08); copy=True copies on the reading stream unless the export is
    IS_COPIED, copy=False never copies (CPY-06).
"""
import contextlib
import itertools
import threading

from . import _capi, _cuda, _dtypes, _faults
from ._array import frombuffer, numel, row_major_strides
from ._consumer import MAX_VERSION, _ask, _layout_fields, check_span, header_flags, import_capsule, take_capsule
from ..kit.abi import FLAG_IS_COPIED, FLAG_READ_ONLY, DLDeviceType, DLManagedTensorVersioned

_local = threading.local()


def current_stream():
    """The stream pyref reads imports on in this thread (DLPack's int: 1 the legacy default)."""
    return getattr(_local, "stream", _cuda.LEGACY)


@contextlib.contextmanager
def cuda_stream(handle):
    """Makes `handle` (2, the per-thread default stream, or a cudaStream_t as an int above 2)
    pyref's current stream inside the block."""
    if not isinstance(handle, int) or isinstance(handle, bool) or handle < _cuda.PER_THREAD:
        raise ValueError("cuda_stream takes 2 (the per-thread default stream) or a stream handle (an int above 2), "
                         "not %r" % (handle,))
    before = current_stream()
    _local.stream = handle
    try:
        yield handle
    finally:
        _local.stream = before


def _named_stream():
    """The stream device_from_dlpack names to the producer (the faults' one site each)."""
    stream = current_stream()
    if _faults.active("cuda_consumer_no_sync"):
        return -1
    if _faults.active("cuda_consumer_ignores_context"):
        return _cuda.LEGACY
    if stream == _cuda.LEGACY and _faults.active("cuda_consumer_passes_zero"):
        return 0
    if stream == _cuda.LEGACY and _faults.active("cuda_consumer_per_thread"):
        return _cuda.PER_THREAD
    return stream


def device_from_dlpack(x, *, device=None, copy=None):
    """A DeviceArray over the CUDA memory `x` exports (an object with __dlpack__ and
    __dlpack_device__ on kDLCUDA), read on pyref's current stream, which it names to x.

    `device`: None, "cuda" or (kDLCUDA, 0) keep the data on the GPU (API-05); "cpu" or
    (kDLCPU, 0) asks x, on any device, for a copy in host memory and gives a pyref Array
    (DEV-06), which copy=False cannot have (CPY-07); any other device is BufferError (CPY-08). `copy`: True
    always copies (an IS_COPIED export is a copy already, else pyref copies on its stream),
    False never does (a layout pyref holds only as a copy is then BufferError), None copies
    only such a layout (CPY-06). A producer's refusal reaches the caller as it is (ERR-02)."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("copy must be None, True or False, not %r" % (copy,))
    rt = _cuda._need()
    to_host = _wants_host(device)
    device_type, device_id = _ask(x.__dlpack_device__)
    if to_host:  # DEV-06: a host copy may be asked of a producer on any device
        return _host_copy(x, copy, (device_type, device_id))
    if device_type != DLDeviceType.kDLCUDA:
        raise _refusal("pyref.device_from_dlpack: the data is on device %r, not CUDA (pyref.from_dlpack imports "
                       "CPU memory) (DEV-07)" % ((device_type, device_id),))
    if device is None and _faults.active("cuda_consumer_lands_on_host"):
        return _host_copy(x, copy, (device_type, device_id))
    reader = current_stream()
    kwargs = {"stream": _named_stream(), "max_version": list(MAX_VERSION) if _faults.active(
        "cuda_consumer_max_version_list") else MAX_VERSION}
    ignore_copy = _faults.active("cuda_consumer_copy_ignored")
    if copy is not None and not ignore_copy:
        kwargs["copy"] = copy
    capsule = _ask_device(x, kwargs)
    if not _capi.is_capsule(capsule):
        raise TypeError("__dlpack__ returned %s, not a PyCapsule" % type(capsule).__name__)
    owner, struct, address = take_capsule(capsule)
    try:
        if struct is not DLManagedTensorVersioned and "max_version" in kwargs and _faults.active(
                "cuda_consumer_refuses_legacy"):
            raise BufferError("pyref.device_from_dlpack: asked for a versioned capsule, got a legacy one")
        managed = struct.from_address(address)
        unchecked = _faults.active("cuda_consumer_unchecked")
        flags = 0 if unchecked else header_flags(struct, managed)  # VER-08, VER-09
        if flags & FLAG_READ_ONLY and _faults.active("cuda_consumer_refuses_read_only"):
            raise BufferError("pyref.device_from_dlpack: the tensor is read-only")
        tensor = managed.dl_tensor
        if tensor.device.device_type != DLDeviceType.kDLCUDA:
            raise BufferError("pyref.device_from_dlpack: the export is on device %r, not CUDA"
                              % ((tensor.device.device_type, tensor.device.device_id),))
        if unchecked:
            dtype, shape, strides = _as_given(tensor)
        else:
            dtype, shape, strides = _layout_fields(tensor)  # LAY-09
            check_span(tensor, dtype, shape, strides)  # LAY-04, LAY-09, LAY-10
        if dtype.name != "float32" and _faults.active("cuda_consumer_float32_only"):
            raise BufferError("pyref.device_from_dlpack: %s is not supported" % dtype.name)
        if not tensor.data and _faults.active("cuda_consumer_rejects_null_data"):
            raise BufferError("pyref.device_from_dlpack: NULL data")
        if not shape and _faults.active("cuda_consumer_refuses_0d"):
            raise BufferError("pyref.device_from_dlpack: 0-d tensors are not supported")
        if _faults.active("cuda_consumer_column_major"):
            strides = tuple(numel(shape[:i]) for i in range(len(shape)))
        offset = 0 if _faults.active("cuda_consumer_ignores_offset") else tensor.byte_offset  # LAY-03
        first = (tensor.data or 0) + offset
        compact = numel(shape) == 0 or _row_major(shape, strides)
        if _faults.active("cuda_consumer_ignores_strides"):
            compact = True
        if not compact and copy is False:
            raise BufferError("pyref.device_from_dlpack: copy=False, but pyref's device arrays are compact row-major "
                              "and this strided tensor would need a copy (CPY-06)")
        # CPY-06; an IS_COPIED export is already the consumer's alone (FLG-05)
        if not compact or (copy and not flags & FLAG_IS_COPIED and not ignore_copy):
            return _compact_copy(rt, owner, dtype, shape, strides, first, reader)
        return _cuda.DeviceArray._over(rt, owner, dtype, shape, first, reader, flags & FLAG_READ_ONLY)
    except BaseException:
        owner.release()
        raise


def _ask_device(x, kwargs):
    """x.__dlpack__(**kwargs); VER-06: a producer older than array API 2023.12 raises TypeError
    for max_version and copy, and is asked again with the stream alone (which a CUDA export
    still needs: STR-01). A copy asked for is then pyref's to make (the legacy capsule has no
    IS_COPIED to say the producer made one)."""
    try:
        return _ask(x.__dlpack__, **kwargs)
    except TypeError:
        if _faults.active("cuda_consumer_no_retry"):
            raise
        return _ask(x.__dlpack__, stream=kwargs["stream"])


def _wants_host(device):
    """True for device="cpu" or (kDLCPU, 0), False for None, "cuda" or (kDLCUDA, 0); BufferError
    for any other (CPY-08). The fault cuda_consumer_device_ignored takes "cpu" for None."""
    if device is None or device == "cuda" or (isinstance(device, tuple) and device == (DLDeviceType.kDLCUDA, 0)):
        return False
    if device == "cpu" or (isinstance(device, tuple) and device == (DLDeviceType.kDLCPU, 0)):
        return not _faults.active("cuda_consumer_device_ignored")
    raise _refusal("pyref.device_from_dlpack: device=%r; pyref arrays live on the CPU or CUDA device 0" % (device,))


def _refusal(message):
    """The exception that refuses a device request pyref cannot serve: BufferError (DEV-07,
    CPY-08), ValueError under the fault cuda_consumer_valueerror."""
    return (ValueError if _faults.active("cuda_consumer_valueerror") else BufferError)(message)


def _host_copy(x, copy, where):
    """A pyref Array of x's elements in host memory: the copy the producer on `where` makes when
    asked with dl_device=(kDLCPU, 0) (STR-12: it synchronises first), imported as from_dlpack
    imports host memory; copy=False cannot have it unless x is on the host (CPY-07). A producer
    older than that keyword (TypeError, VER-06) gives its own device's export: pyref imports a
    CUDA one and copies it to the host itself, imports a host one as it is, and refuses another
    device's (BufferError)."""
    on_host = tuple(where) == (DLDeviceType.kDLCPU, 0)
    if copy is False and not on_host and not _faults.active("cuda_consumer_host_copy_false"):
        raise BufferError("pyref.device_from_dlpack: copy=False, but the data on the GPU needs a copy to reach the "
                          "CPU (CPY-07)")
    kwargs = {"stream": None, "max_version": MAX_VERSION, "dl_device": (DLDeviceType.kDLCPU, 0)}
    if copy is not None and (copy or on_host):
        kwargs["copy"] = copy
    try:
        try:
            capsule = x.__dlpack__(**kwargs)
        except TypeError:
            if _faults.active("cuda_consumer_no_retry"):
                raise
            if where[0] == DLDeviceType.kDLCUDA:
                on_device = device_from_dlpack(x, device="cuda")  # on the GPU, whatever a fault says
                return frombuffer(on_device.tobytes(), on_device.dtype, on_device.shape)
            if not on_host:
                raise BufferError("pyref.device_from_dlpack: device='cpu', but the producer on %r takes no "
                                  "dl_device (VER-06) and its memory is not the host's" % (tuple(where),)) from None
            capsule = x.__dlpack__()  # the old protocol: its host export
        if not _capi.is_capsule(capsule):
            raise TypeError("__dlpack__ returned %s, not a PyCapsule" % type(capsule).__name__)
        return import_capsule(capsule, copy)
    except BufferError as e:
        if _faults.active("cuda_consumer_valueerror"):
            raise ValueError(str(e)) from None
        raise


def _as_given(tensor):
    """(dtype, shape, strides) read as the tensor gives them, unchecked (the fault
    cuda_consumer_unchecked): a negative ndim reads as 0; a dtype code pyref does not know is
    read as the unsigned int of its bits (a VER-09 misread), refused only when there is none."""
    fields = (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes)
    dtype = _dtypes.BY_FIELDS.get(fields) or _dtypes.BY_FIELDS.get((1,) + fields[1:])
    if dtype is None:
        raise BufferError("pyref.device_from_dlpack: no dtype %r" % ((tensor.dtype.code, tensor.dtype.bits),))
    ndim = max(tensor.ndim, 0)
    shape = tuple(tensor.shape[i] for i in range(ndim))  # a NULL shape: ValueError from ctypes
    strides = tuple(tensor.strides[i] for i in range(ndim)) if tensor.strides else row_major_strides(shape)
    return dtype, shape, strides


def _row_major(shape, strides):
    """Whether `strides` (in elements) are those of a compact row-major tensor of `shape` (a
    dimension of one element may have any stride)."""
    return all(n <= 1 or s == r for n, s, r in zip(shape, strides, row_major_strides(shape)))


#: the most runs _compact_copy copies, one call each
MAX_RUNS = 1 << 16


def _compact_copy(rt, owner, dtype, shape, strides, first, stream):
    """A new DeviceArray of the elements of the tensor at `first` (strides in elements), copied
    on `stream` a run at a time (a run: the whole tensor when it is compact row-major, else the
    whole last dimension when its stride is 1, else one element); `owner` is released once the
    copy has run (LAY-11, CPY-06). A layout of more than MAX_RUNS runs is BufferError: one
    copy call a run makes a stride-0 giant take minutes (LAY-11 lets a consumer refuse it)."""
    if numel(shape) and not _row_major(shape, strides):
        runs = numel(shape[:-1]) if strides[-1] == 1 else numel(shape)
        if runs > MAX_RUNS:
            raise BufferError("pyref.device_from_dlpack: this strided tensor would take %d copies of a run to "
                              "compact; pyref makes at most %d (LAY-11)" % (runs, MAX_RUNS))
    out = _cuda.DeviceArray._new(rt, dtype, shape, stream=stream)
    item = dtype.itemsize
    if out.nbytes and _row_major(shape, strides):
        rt("cudaMemcpyAsync", out.ptr, first, out.nbytes, _cuda.DEVICE_TO_DEVICE, stream)
    elif out.nbytes:
        run = shape[-1] if strides[-1] == 1 else 1
        outer = shape[:-1] if run > 1 else shape
        for k, index in enumerate(itertools.product(*map(range, outer))):
            src = first + sum(i * s for i, s in zip(index, strides)) * item
            rt("cudaMemcpyAsync", out.ptr + k * run * item, src, run * item, _cuda.DEVICE_TO_DEVICE, stream)
    rt("cudaStreamSynchronize", stream)  # the producer's memory is read: it can go back now
    owner.release()
    return out
