"""Import: from_dlpack(x, /, *, device=None, copy=None).

Invariants:
  - x.__dlpack_device__() is asked before x.__dlpack__() (API-04); what either raises passes
    through unchanged (ERR-02), and an object without them raises AttributeError (ERR-03);
  - only CPU memory is imported: another device raises BufferError (DEV-07) unless
    device="cpu" asks the producer for a host copy (DEV-06); the stream is always None
    (STR-10, STR-12);
  - a capsule is taken only under its unconsumed name (CAP-04) and renamed used_* at once
    (CAP-03). From then on the import owns the tensor: every path either hands it to the result
    or gives it back, calling the deleter once and skipping a NULL one (OWN-01, OWN-03);
  - a versioned tensor of another major has its deleter called and nothing else read (VER-08);
  - metadata is validated before it is trusted: flags and dtype against DLPack 1.3 (VER-09),
    device, ndim, shape (LAY-09), strides (NULL: row-major, LAY-07), data (NULL only when
    zero-size, LAY-04) and the byte span (no wrap, at most 2**63 - 1 bytes); every refusal is a
    BufferError raised after the tensor was given back.
"""
import ctypes

from . import _capi, _dtypes, _faults
from ._array import MAX_NDIM, Array, numel, row_major_strides
from ..kit.abi import DEFINED_FLAGS as KNOWN_FLAGS
from ..kit.abi import DLPACK_VERSION as MAX_VERSION
from ..kit.abi import FLAG_IS_COPIED, FLAG_READ_ONLY, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned

DLPACK_MAJOR_VERSION = MAX_VERSION[0]
INT64_MAX = (1 << 63) - 1
ADDRESS_LIMIT = 1 << (8 * ctypes.sizeof(ctypes.c_void_p))

#: unconsumed name -> (struct, name after consumption); the used names are never freed (CAP-09)
_KINDS = {
    b"dltensor": (DLManagedTensor, _capi.keep_forever(b"used_dltensor")),
    b"dltensor_versioned": (DLManagedTensorVersioned, _capi.keep_forever(b"used_dltensor_versioned")),
}
_USED = {used: name for name, (_, used) in _KINDS.items()}


class _Import:
    """Owns one imported managed tensor and gives it back (calls its deleter) once: when
    release() is called, or when the last array over its memory dies."""

    __slots__ = ("_address", "_struct")
    #: the fault switch, kept here for __del__ at interpreter teardown, when globals are gone
    _fault = _faults.active

    def __init__(self, address, struct):
        self._address = address
        self._struct = struct

    def release(self):
        address, struct = self._address, self._struct
        self._address = self._struct = None
        if address is None or self._fault("consumer_no_delete"):
            return
        deleter = struct.from_address(address).deleter
        if deleter:  # OWN-01
            deleter(address)
            if self._fault("consumer_double_delete"):
                deleter(address)

    def __del__(self):
        self.release()


def _refuse(clause, message):
    """Refuses the import; import_capsule gives the tensor back on the way out."""
    raise BufferError("pyref.from_dlpack: %s (%s)" % (message, clause))


def _layout(tensor):
    """(dtype, shape, strides) of a CPU tensor, validated; refuses otherwise."""
    if tensor.device.device_type != DLDeviceType.kDLCPU:
        _refuse("DEV-07", "memory on device %r; pyref imports CPU memory only"
                % ((tensor.device.device_type, tensor.device.device_id),))
    return _layout_fields(tensor)


def _layout_fields(tensor):
    """(dtype, shape, strides) of a tensor on any device, validated; refuses otherwise."""
    lanes = 1 if _faults.active("consumer_ignores_lanes") else tensor.dtype.lanes
    fields = (tensor.dtype.code, tensor.dtype.bits, lanes)
    dtype = _dtypes.BY_FIELDS.get(fields)
    if dtype is None:
        _refuse("VER-09", "dtype (code, bits, lanes) = %r is not one pyref knows" % (fields,))
    ndim = tensor.ndim
    if not 0 <= ndim <= MAX_NDIM:
        _refuse("LAY-09", "ndim %d (pyref takes 0 to %d)" % (ndim, MAX_NDIM))
    if ndim and not tensor.shape:
        _refuse("LAY-09", "ndim %d with a NULL shape" % ndim)
    shape = tuple(tensor.shape[i] for i in range(ndim))
    if any(n < 0 for n in shape):
        _refuse("LAY-09", "negative extent in shape %r" % (shape,))
    strides = tuple(tensor.strides[i] for i in range(ndim)) if tensor.strides else row_major_strides(shape)
    if tensor.strides and _faults.active("consumer_strides_as_bytes"):
        strides = tuple(-(-s // dtype.itemsize) if s < 0 else s // dtype.itemsize for s in strides)
    return dtype, shape, strides


def check_span(tensor, dtype, shape, strides):
    """Refuses data that is NULL for a non-empty tensor, or elements that reach outside the
    address space or span more than an int64 counts."""
    if numel(shape) == 0:
        return
    if not tensor.data and not _faults.active("consumer_accepts_null_data"):
        _refuse("LAY-04", "NULL data for a tensor of shape %r" % (shape,))
    if _faults.active("consumer_accepts_huge_shape"):
        return
    size = numel(shape) * dtype.itemsize
    low = sum((n - 1) * s for n, s in zip(shape, strides) if s < 0) * dtype.itemsize
    high = sum((n - 1) * s for n, s in zip(shape, strides) if s > 0) * dtype.itemsize + dtype.itemsize
    first = (tensor.data or 0) + tensor.byte_offset
    if ((size > INT64_MAX or high - low > INT64_MAX or first + low < 0 or first + high > ADDRESS_LIMIT)
            and not _faults.active("consumer_accepts_overflow")):
        _refuse("LAY-09", "shape %r, strides %r and byte_offset %d reach outside the address space"
                % (shape, strides, tensor.byte_offset))


def header_flags(struct, managed):
    """The flags of the managed tensor (0 for a legacy one), once its header is one pyref reads:
    refuses a major other than its own (VER-08) and unknown flag bits (VER-09). Shared by
    from_dlpack and device_from_dlpack."""
    if struct is not DLManagedTensorVersioned:
        return 0
    major = managed.version.major
    if major != DLPACK_MAJOR_VERSION and not _faults.active("consumer_reads_major2"):
        _refuse("VER-08", "DLPack major version %d; pyref reads major %d only" % (major, DLPACK_MAJOR_VERSION))
    flags = managed.flags
    if flags & ~KNOWN_FLAGS:
        _refuse("VER-09", "unknown flag bits %#x" % (flags & ~KNOWN_FLAGS))
    if flags & FLAG_IS_COPIED and _faults.active("consumer_refuses_is_copied"):
        _refuse("FLG-05", "the tensor is flagged IS_COPIED")
    return flags


def _import_struct(owner, struct, address, copy):
    """The result of importing the tensor `owner` holds; refuses what it cannot take."""
    managed = struct.from_address(address)
    flags = header_flags(struct, managed)
    tensor = managed.dl_tensor
    dtype, shape, strides = _layout(tensor)
    check_span(tensor, dtype, shape, strides)
    result = Array._over(owner, tensor.data or 0, tensor.byte_offset, dtype, shape, strides,
                         flags & FLAG_READ_ONLY)  # FLG-03
    if copy and not flags & FLAG_IS_COPIED:  # CPY-06; an IS_COPIED export is already ours (FLG-05)
        result = result.copy()
        owner.release()
    return result


def import_capsule(capsule, copy):
    owner, struct, address = take_capsule(capsule)
    try:
        return _import_struct(owner, struct, address, copy)
    except BaseException:
        owner.release()
        raise


def take_capsule(capsule):
    """(the _Import that now owns the capsule's tensor, its struct type, its address): the
    capsule taken under its unconsumed name (CAP-04) and renamed used_* (CAP-03). Shared by
    from_dlpack and device_from_dlpack; BufferError for a used or foreign capsule."""
    name = current = _capi.capsule_get_name(id(capsule))
    if name in _USED and _faults.active("consumer_accepts_used"):
        name = _USED[name]
    elif name in _USED:
        if _faults.active("consumer_releases_used"):
            # the refusal gives back a tensor that another consumer owns (OWN-03)
            _Import(_capi.capsule_get_pointer(id(capsule), name), _KINDS[_USED[name]][0]).release()
        raise BufferError("pyref.from_dlpack: the capsule was consumed already (named %r) (CAP-04)" % name.decode())
    if name not in _KINDS:
        raise BufferError("pyref.from_dlpack: %r is not a DLPack capsule name" % (name,))
    struct, used = _KINDS[name]
    address = _capi.capsule_get_pointer(id(capsule), current)
    if _faults.active("consumer_needs_manager_ctx") and not struct.from_address(address).manager_ctx:
        raise BufferError("pyref.from_dlpack: the tensor has no manager_ctx (OWN-06)")
    if _faults.active("consumer_used_name_per_capsule"):
        used = _capi.keep_forever(ctypes.create_string_buffer(used))
    elif _faults.active("consumer_used_name_temporary"):
        used = b"used_" + name  # a new object: freed when this function returns, while the capsule lives
    if not _faults.active("consumer_no_rename"):
        _capi.capsule_set_name(id(capsule), used)  # CAP-03: the tensor is ours now
    return _Import(address, struct), struct, address


def _wants_cpu(device):
    """True for device="cpu" or (kDLCPU, 0), False for None; BufferError for any other device
    (CPY-08)."""
    if device is None:
        return False
    if device == "cpu" or (isinstance(device, tuple) and device == (DLDeviceType.kDLCPU, 0)):
        return True
    raise BufferError("pyref.from_dlpack: device=%r; pyref arrays live on the CPU only (device='cpu')" % (device,))


def _ask(method, **kwargs):
    """method(**kwargs), a method of the producer: what it raises reaches our caller as it is
    (ERR-02)."""
    if not _faults.active("consumer_wraps_producer_errors"):
        return method(**kwargs)
    try:
        return method(**kwargs)
    except TypeError:
        raise  # the old producer's answer to the new keywords (VER-06)
    except Exception as e:
        raise BufferError("pyref.from_dlpack: the producer failed: %s" % e) from e


def _export(x, kwargs):
    """x.__dlpack__(**kwargs); VER-06: a producer older than array API 2023.12 raises TypeError
    for the new keywords, and is asked again with stream only."""
    try:
        return _ask(x.__dlpack__, **kwargs)
    except TypeError:
        return _ask(x.__dlpack__, stream=None)


def from_dlpack(x, /, *, device=None, copy=None):
    """An Array over the memory of `x`, an object with __dlpack__ and __dlpack_device__ (or a
    DLPack capsule). copy=True always copies, copy=False never does, None copies only when it
    must; device="cpu" asks a producer on another device for a copy in host memory."""
    if copy is not None and not isinstance(copy, bool):
        raise TypeError("copy must be None, True or False, not %r" % (copy,))
    to_cpu = _wants_cpu(device)
    if _capi.is_capsule(x):
        return import_capsule(x, copy)
    if _faults.active("consumer_no_methods_typeerror") and not hasattr(x, "__dlpack__"):
        raise TypeError("pyref.from_dlpack: %s is not a DLPack producer" % type(x).__name__)
    if _faults.active("consumer_skips_device"):
        device_type, device_id = DLDeviceType.kDLCPU, 0
    else:
        device_type, device_id = _ask(x.__dlpack_device__)
    kwargs = {"stream": None, "max_version": list(MAX_VERSION) if _faults.active("consumer_max_version_list")
              else MAX_VERSION}
    if copy is not None:
        kwargs["copy"] = copy
    if device_type != DLDeviceType.kDLCPU:
        if not to_cpu:
            raise BufferError("pyref.from_dlpack: the data is on device %r; pyref imports CPU memory only "
                              "(device='cpu' asks for a copy) (DEV-07)" % ((device_type, device_id),))
        if copy is False:
            raise BufferError("pyref.from_dlpack: copy=False, but the data on device %r needs a copy to reach "
                              "the CPU (CPY-07)" % ((device_type, device_id),))
        kwargs["dl_device"] = (DLDeviceType.kDLCPU, 0)
    capsule = _export(x, kwargs)
    if not _capi.is_capsule(capsule):
        raise TypeError("__dlpack__ returned %s, not a PyCapsule" % type(capsule).__name__)
    return import_capsule(capsule, copy)
