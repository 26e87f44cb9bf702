"""Export: Array.__dlpack__, the managed structs it hands out, their deleter and the
standard capsule destructor.

Invariants:
  - every managed struct handed out is an entry of `_LIVE` (its address -> the struct, its
    shape and strides, the exported array) until its deleter runs: the entry keeps data,
    shape and strides valid however the array is used or dropped meanwhile (OWN-05);
  - the deleter drops the entry, which frees the struct and releases the array (OWN-02). It is
    a ctypes callback, which takes the GIL on any thread before running (OWN-04);
  - at interpreter exit the deleter of every struct still out is set to NULL and `_LIVE` is
    kept forever: after finalisation no Python may run, so those structs leak (OWN-04), and a
    NULL deleter is one consumers skip (OWN-01);
  - strides count elements and are non-NULL for ndim > 0 (LAY-05, LAY-06); data is NULL for a
    zero-size export (LAY-04); versioned exports carry version (1, 3) (VER-07) and only the
    READ_ONLY and IS_COPIED flags (FLG-01);
  - capsule names are module constants that are never freed (CAP-09).
"""
import atexit
import ctypes
import itertools

from . import _array, _capi, _cuda, _faults  # _array: partly loaded here; read at call time
from ..kit.abi import (DLPACK_VERSION, FLAG_IS_COPIED, FLAG_READ_ONLY, CapsuleDestructor, Deleter, DLDataTypeCode,
                       DLDeviceType, DLManagedTensor, DLManagedTensorVersioned)

DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION = DLPACK_VERSION

LEGACY_NAME = _capi.keep_forever(b"dltensor")  # CAP-01
VERSIONED_NAME = _capi.keep_forever(b"dltensor_versioned")  # CAP-02
FAULTY_LEGACY_NAME = _capi.keep_forever(b"DLTensor")

_LIVE = {}


def _release(address, live=_LIVE, active=_faults.active):
    """The deleter of every struct pyref hands out. Names it uses are bound as defaults, so it
    does not depend on module globals, which teardown clears."""
    if active("deleter_frees_nothing"):
        return
    live.pop(address, None)


_DELETER = _capi.keep_forever(Deleter(_release))


@atexit.register
def _orphan_live_structs(live=_LIVE):
    _capi.keep_forever(live)
    for struct, *_ in live.values():
        struct.deleter = Deleter()


def _destructor_for(struct_type, name, used_name):
    """The standard capsule destructor (CAP-05..08) for capsules named `name`: an unconsumed
    capsule's deleter runs; one renamed `used_name` belongs to its consumer and is left alone;
    a NULL deleter is skipped. An error is reported as unraisable (ctypes reports what a
    callback raises) and never propagates into the code that dropped the capsule.

    A capsule dropped while an exception is being raised (a temporary on the stack of a frame
    that unwinds) runs this with that exception pending. A ctypes callback cannot set it aside
    and restore it, as a C destructor does with PyErr_Fetch and PyErr_Restore: the first ctypes
    call fails with it. The tensor is still given back, and the exception is reported as
    unraisable instead of being lost silently; the code that raised it sees a SystemError."""
    is_valid, get_pointer, active = _capi.capsule_is_valid, _capi.capsule_get_pointer, _faults.active

    def destructor(capsule):
        try:
            used = is_valid(capsule, used_name)
            pending = None
        except Exception as e:  # PyCapsule_IsValid sets no error: this one was pending
            used = is_valid(capsule, used_name)
            pending = e
        consumed = used and not active("destructor_ignores_used")  # the consumer's now (CAP-06)
        leaked = not used and active("destructor_leaks")
        if not consumed and not leaked:
            try:
                address = get_pointer(capsule, used_name if used else name)
            except ValueError as e:
                raise BufferError("pyref: a capsule made as %r no longer holds a tensor under that name (%s)"
                                  % (name.decode(), e)) from pending
            managed = struct_type.from_address(address)
            if managed.deleter:
                managed.deleter(address)
        if pending is not None:
            raise pending

    return _capi.keep_forever(CapsuleDestructor(destructor))


_DESTRUCTORS = {
    LEGACY_NAME: _destructor_for(DLManagedTensor, LEGACY_NAME, b"used_dltensor"),
    FAULTY_LEGACY_NAME: _destructor_for(DLManagedTensor, FAULTY_LEGACY_NAME, b"used_DLTensor"),
    VERSIONED_NAME: _destructor_for(DLManagedTensorVersioned, VERSIONED_NAME, b"used_dltensor_versioned"),
}


# ---- arguments
def _check_stream(stream):
    """STR-10: a CPU array has no streams, so only None is valid; STR-02: ints only."""
    if stream is None:
        return
    if not isinstance(stream, int) or isinstance(stream, bool):
        if _faults.active("stream_type_unchecked"):
            return
        raise TypeError("stream must be None or an int, not %s" % type(stream).__name__)
    if not _faults.active("stream_accepted"):
        raise BufferError("stream=%d: pyref arrays live on the CPU, which has no streams; pass stream=None" % stream)


def _wants_versioned(max_version):
    """VER-02: None gets a legacy capsule; VER-03: major >= 1 a versioned one at (1, 3); VER-04:
    major 0 the legacy struct of DLPack 0.x."""
    if max_version is None:
        return _faults.active("ignore_max_version")
    if (not isinstance(max_version, tuple) or len(max_version) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in max_version)):
        if _faults.active("max_version_unchecked"):
            return False
        error = BufferError if _faults.active("bad_max_version_buffererror") else TypeError
        raise error("max_version must be None or a (major, minor) tuple of ints, not %r" % (max_version,))
    if (_faults.active("newer_minor_refused") and max_version[0] == DLPACK_MAJOR_VERSION
            and max_version[1] > DLPACK_MINOR_VERSION):
        raise BufferError("max_version=%r: pyref exports DLPack %d.%d" % (max_version, DLPACK_MAJOR_VERSION,
                                                                         DLPACK_MINOR_VERSION))
    return max_version[0] >= DLPACK_MAJOR_VERSION


def _check_dl_device(dl_device):
    """DEV-04: None or a (device_type, device_id) pair; DEV-05: BufferError for any device but
    the array's own (kDLCPU, 0), where the export is in place (DEV-06)."""
    if dl_device is None:
        return
    if (not isinstance(dl_device, tuple) or len(dl_device) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in dl_device)):
        raise TypeError("dl_device must be None or a (device_type, device_id) tuple, not %r" % (dl_device,))
    if tuple(dl_device) != (DLDeviceType.kDLCPU, 0):
        raise BufferError("dl_device=%r: pyref arrays live on the CPU (1, 0) and copy to no other device"
                          % (tuple(dl_device),))


# ---- export
def _fill(tensor, array, dims, ndim):
    """Fills a DLTensor for `array`; `dims` holds its `ndim` extents, then its strides."""
    tensor.data, tensor.byte_offset = _data(array)
    tensor.device.device_type, tensor.device.device_id = array.dl_device
    tensor.ndim = ndim
    tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes = _dl_dtype(array)
    if ndim:
        base = ctypes.addressof(dims)
        tensor.shape = ctypes.cast(base, ctypes.POINTER(ctypes.c_int64))
        tensor.strides = ctypes.cast(base + 8 * ndim, ctypes.POINTER(ctypes.c_int64))


def _data(array):
    """(data, byte_offset) of the export: data as the array holds it, byte_offset to the first
    element (LAY-01, LAY-03); data None for a zero-size export (LAY-04)."""
    data, byte_offset = array.dl_data
    if _faults.active("data_at_first_element"):
        data, byte_offset = data + byte_offset, 0
    if _faults.active("byte_offset_dropped"):
        byte_offset = 0
    return data or None, byte_offset


def _dl_dtype(array):
    """(code, bits, lanes) of the export: the array's element type (DT-01 to DT-13)."""
    code, bits, lanes = array.dl_dtype
    if _faults.active("dtype_code_past_enum") and code == DLDataTypeCode.kDLFloat8_e8m0fnu:
        code = max(DLDataTypeCode) + 1
    if _faults.active("complex_part_bits") and code == DLDataTypeCode.kDLComplex:
        bits //= 2
    if _faults.active("bfloat16_as_float16") and code == DLDataTypeCode.kDLBfloat:
        code = DLDataTypeCode.kDLFloat
    if _faults.active("fp8_as_uint8") and DLDataTypeCode.kDLFloat8_e3m4 <= code <= DLDataTypeCode.kDLFloat8_e8m0fnu:
        code = DLDataTypeCode.kDLUInt
    if _faults.active("int_two_lanes") and code == DLDataTypeCode.kDLInt and bits > 8:
        bits, lanes = bits // 2, 2
    if _faults.active("unsigned_as_signed") and code == DLDataTypeCode.kDLUInt:
        code = DLDataTypeCode.kDLInt
    return code, bits, lanes


def _dims(array):
    """(shape, strides) of the export: the array's, strides in elements (LAY-05, LAY-09)."""
    shape, strides = array.shape, array.strides
    if _faults.active("byte_strides"):
        strides = tuple(s * array.itemsize for s in strides)
    if _faults.active("leading_unit_dim"):
        shape, strides = (1,) + shape, (max(array.size, 1),) + strides
    return shape, strides


def _swap_bytes(array):
    """Reverses the bytes of every element of `array` in place (the byteswap_in_place fault)."""
    n = array.itemsize
    for index in itertools.product(*map(range, array.shape)):
        cell = (ctypes.c_char * n).from_address(array.address + n * sum(map(int.__mul__, index, array.strides)))
        cell[:] = cell[::-1]


def _managed(array, versioned, flags):
    """A new managed struct describing `array`, registered in _LIVE; its address."""
    struct = DLManagedTensorVersioned() if versioned else DLManagedTensor()
    shape, strides = _dims(array)
    dims = (ctypes.c_int64 * (2 * len(shape)))(*shape, *strides)
    _fill(struct.dl_tensor, array, dims, len(shape))
    address = ctypes.addressof(struct)
    struct.manager_ctx = address
    struct.deleter = _DELETER
    if versioned:
        struct.version.major = DLPACK_MAJOR_VERSION  # VER-07
        struct.version.minor = DLPACK_MINOR_VERSION
        struct.flags = flags
        if _faults.active("versioned_flags_before_deleter"):  # the ABI prefix broken (VER-10)
            words = (ctypes.c_uint64 * 2).from_address(address + DLManagedTensorVersioned.deleter.offset)
            words[0], words[1] = words[1], words[0]
    _LIVE[address] = (struct, dims, array)
    return address


def export(array, *, stream=None, max_version=None, dl_device=None, copy=None):
    """array.__dlpack__(): a PyCapsule holding a DLManagedTensorVersioned (max_version >= (1, 0))
    or a DLManagedTensor."""
    _check_stream(stream)
    if array.dtype == "bfloat16" and _faults.active("bfloat16_typeerror"):
        raise TypeError("pyref: bfloat16 is not supported by DLPack")
    versioned = _wants_versioned(max_version)
    if not (copy is True and _faults.active("dl_device_unchecked_on_copy")):
        _check_dl_device(dl_device)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("copy must be None, True or False, not %r" % (copy,))
    if array.dtype == "bool" and _faults.active("bool_unexportable"):
        raise BufferError("pyref cannot export bool arrays")
    if _faults.active("strided_views_refused") and array.strides != _array.row_major_strides(array.shape):
        raise BufferError("pyref exports row-major arrays only")
    flags = 0
    if copy or (copy is None and (_faults.active("copy_none_copies") or
                                  versioned and _faults.active("copy_none_versioned_copies"))):
        # CPY-01: new memory; the copy is the consumer's to write (FLG-04, FLG-05)
        array = array.copy()
        flags |= FLAG_IS_COPIED
    elif array.readonly:  # CPY-02/03: in place, and read-only memory says so (FLG-02)
        if not versioned:
            raise BufferError("a read-only array needs the READ_ONLY flag of a versioned capsule: pass "
                              "max_version=(1, 0) or later, or copy=True")
        imported = type(array._owner).__name__ == "_Import"
        if not (_faults.active("readonly_unflagged") or imported and _faults.active("reexport_drops_readonly")):
            flags |= FLAG_READ_ONLY
    if _faults.active("byteswap_in_place") and array.itemsize > 1 and not array.readonly:
        _swap_bytes(array)
    return _capsule(array, versioned, flags)


def _capsule(array, versioned, flags):
    """A new capsule of a managed struct describing `array`."""
    address = _managed(array, versioned, flags)
    if versioned:
        name = VERSIONED_NAME
    else:
        name = FAULTY_LEGACY_NAME if _faults.active("legacy_capsule_name") else LEGACY_NAME
    destructor = _DESTRUCTORS[name]
    if _faults.active("capsule_name_per_export"):
        name = _capi.keep_forever(ctypes.create_string_buffer(name))
    try:
        return _capi.capsule_new(address, name, destructor)
    except BaseException:
        _release(address)
        raise


# ---- export from the device
def _check_cuda_stream(stream):
    """STR-02: None or an int; STR-08: 0 is ambiguous on CUDA and refused; -1 and above only."""
    if stream is None:
        return
    if not isinstance(stream, int) or isinstance(stream, bool):
        raise TypeError("stream must be None or an int, not %s" % type(stream).__name__)
    if stream == 0 and not _faults.active("cuda_stream_zero_accepted"):
        raise BufferError("stream=0 is ambiguous on CUDA: pass 1 for the legacy default stream, 2 for the "
                          "per-thread default stream or a stream handle")
    if stream < -1 or stream >= 1 << 64:
        raise BufferError("stream=%d is no CUDA stream" % stream)


def _make_safe(array, stream):
    """STR-01: before the export returns, the consumer's stream waits for the work enqueued on
    the array's stream (an event recorded there); None, 1 the legacy default stream (STR-04,
    STR-05), 2 the per-thread default stream (STR-06), above 2 that handle (STR-07); -1 asks for
    nothing (STR-03). The consumer's stream stays the consumer's (STR-11)."""
    rt = array._rt
    if stream == -1:
        if _faults.active("cuda_minus_one_syncs"):
            rt("cudaStreamSynchronize", array.stream)
        return
    if _faults.active("cuda_no_wait"):
        return
    if _faults.active("cuda_host_sync"):  # safe, but the host waits for the device
        rt("cudaStreamSynchronize", array.stream)
        return
    consumer = _cuda.LEGACY if stream in (None, 0, 1) else stream
    if _faults.active("cuda_wrong_stream") and consumer > _cuda.PER_THREAD:
        consumer = _cuda.LEGACY
    rt.order(consumer, array.stream)
    if _faults.active("cuda_destroys_stream") and consumer > _cuda.PER_THREAD:
        rt("cudaStreamDestroy", consumer)


def _to_host(array, stream, versioned, copy):
    """dl_device=(kDLCPU, 0): the producer synchronizes its stream, then copies to host memory
    flagged IS_COPIED (STR-12, FLG-04); copy=False is BufferError (CPY-05); a stream but None
    makes no sense for the host (STR-12)."""
    if copy is False and not _faults.active("cuda_host_copy_despite_false"):
        raise BufferError("dl_device=(1, 0) needs a copy of device memory, and copy=False forbids one")
    if stream is not None:
        raise BufferError("stream=%r with dl_device=(1, 0): the host has no streams; pass stream=None" % (stream,))
    if not _faults.active("cuda_host_copy_unsynced"):
        array._rt("cudaStreamSynchronize", array.stream)
    host = _array.compact(array._dtype, array.shape, array._to_host())
    return _capsule(host, versioned, 0 if _faults.active("cuda_host_copy_unflagged") else FLAG_IS_COPIED)


def export_device(array, *, stream=None, max_version=None, dl_device=None, copy=None):
    """DeviceArray.__dlpack__(): as export(), with CUDA's stream semantics."""
    if _faults.active("cuda_stream_type_unchecked") and (not isinstance(stream, int) or isinstance(stream, bool)):
        stream = None  # taken for the legacy default stream
    _check_cuda_stream(stream)
    versioned = _wants_versioned(max_version)
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("copy must be None, True or False, not %r" % (copy,))
    if dl_device is not None:
        if (not isinstance(dl_device, tuple) or len(dl_device) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in dl_device)):
            raise TypeError("dl_device must be None or a (device_type, device_id) tuple, not %r" % (dl_device,))
        if tuple(dl_device) == (DLDeviceType.kDLCPU, 0):
            return _to_host(array, stream, versioned, copy)
        if tuple(dl_device) != array.dl_device:
            raise BufferError("dl_device=%r: pyref copies device arrays to the host (1, 0) only"
                              % (tuple(dl_device),))
    _make_safe(array, stream)
    if copy:  # CPY-04: the copy runs on the consumer's stream, after its wait
        if stream == -1:
            raise BufferError("copy=True with stream=-1: pyref copies on the consumer's stream, and -1 names none")
        if not _faults.active("cuda_copy_shares_memory"):
            array = array.copy_on(_cuda.LEGACY if stream in (None, 0, 1) else stream)
        return _capsule(array, versioned, 0 if _faults.active("cuda_copy_unflagged") else FLAG_IS_COPIED)
    return _capsule(array, versioned, 0)


def live_exports():
    """How many managed structs pyref handed out whose deleter has not run yet."""
    return len(_LIVE)
