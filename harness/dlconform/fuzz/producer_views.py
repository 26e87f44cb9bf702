"""Native views for the producer fuzz target (fuzz/target_producer.c).

`build(name, dtype_index, shape, strides, offset, readonly, seed)` makes, in producer `name`
(numpy, torch or ref), a base of BASE_ELEMENTS elements of dtype DTYPES[dtype_index] whose
byte i is (i * 131 + seed) & 0xff, and a view of it with `shape`, element `strides` and an
element `offset` into the base; read-only when asked and the library can say so. It returns
(view, expected, itemsize, base_address, base_nbytes) or None when the library cannot express
that view (negative strides in torch, read-only in torch, a dtype it lacks, a view leaving the
base). `expected` is the view's logical row-major element bytes, computed here from the base
bytes and the view parameters alone: what any export of the view must show (the value oracle).

Any other module NAME (a library under test: producer-NAME) makes its array with its own
from_dlpack of a compact export of the view's values: ref's Tensor (or CudaTensor in the CUDA
mode), read-only when asked. So only the shape, dtype and keywords vary, not the strides, and a
bug of the library's import can hardly pass for one of its export: the consumer target judges
imports. A sixth item then gives that export: (address, bytes, read-only). An export of the
array that lies in it views it: it must say READ_ONLY when that is read-only (FLG-02), and with
copy=True it copied nothing (CPY-01). A seventh item keeps it alive. base_address is the
array's memory, where its array or CUDA array interface, buffer, data_ptr or int `address`
says where it lies, else 0 (unknown: the zero-copy oracles on it are not judged). A refused
import is None (the library cannot hold it).

device="cuda" (the target's CUDA mode, producer-NAME@cuda): the tensor lies in CUDA memory on
dlconform.kit.cuda's runtime (fuzz/producer_cuda.h). torch and cupy view a base copied to
cuda:0 (torch: no negative strides); ref (CudaTensor) and dlconform.pyref (DeviceArray) hold
compact arrays only, so theirs is a compact array of the view's shape holding its values.
base_address is then a device address; read-only is not asked (the C target clears it).
"""
BASE_ELEMENTS = 64
# (name, itemsize): the array-API dtypes (DT-12), names as in numpy / torch / _ref
DTYPES = (("bool", 1), ("int8", 1), ("int16", 2), ("int32", 4), ("int64", 8), ("uint8", 1),
          ("uint16", 2), ("uint32", 4), ("uint64", 8), ("float32", 4), ("float64", 8),
          ("complex64", 8), ("complex128", 16))


def _base_bytes(itemsize, seed, is_bool):
    n = BASE_ELEMENTS * itemsize
    if is_bool:  # only 0/1 are valid bools
        return bytes((i * 131 + seed) & 1 for i in range(n))
    return bytes((i * 131 + seed) & 0xFF for i in range(n))


def _expected(base, itemsize, shape, strides, offset):
    out = bytearray()
    idx = [0] * len(shape)
    total = 1
    for s in shape:
        total *= s
    for _ in range(total):
        e = offset + sum(i * st for i, st in zip(idx, strides))
        out += base[e * itemsize:(e + 1) * itemsize]
        for d in range(len(shape) - 1, -1, -1):
            idx[d] += 1
            if idx[d] < shape[d]:
                break
            idx[d] = 0
    return bytes(out)


def _inside(shape, strides, offset):
    if any(s == 0 for s in shape):
        return 0 <= offset < BASE_ELEMENTS
    lo = offset + sum(min(0, (s - 1) * st) for s, st in zip(shape, strides))
    hi = offset + sum(max(0, (s - 1) * st) for s, st in zip(shape, strides))
    return lo >= 0 and hi < BASE_ELEMENTS


def build(name, dtype_index, shape, strides, offset, readonly, seed, device=None):
    dname, itemsize = DTYPES[dtype_index % len(DTYPES)]
    shape, strides = tuple(shape), tuple(strides)
    if not _inside(shape, strides, offset):
        return None
    base = _base_bytes(itemsize, seed, dname == "bool")
    expected = _expected(base, itemsize, shape, strides, offset)
    if device == "cuda":
        return _build_cuda(name, dname, itemsize, shape, strides, offset, base, expected)
    if name == "numpy":
        import numpy as np
        from numpy.lib.stride_tricks import as_strided

        b = np.frombuffer(bytearray(base), dtype=dname)
        v = as_strided(b[offset:], shape=shape, strides=tuple(s * itemsize for s in strides),
                       writeable=not readonly)
        return v, expected, itemsize, b.__array_interface__["data"][0], len(base)
    if name == "torch":
        import torch

        if readonly or any(s < 0 for s in strides) or not hasattr(torch, dname):
            return None
        b = torch.frombuffer(bytearray(base), dtype=getattr(torch, dname)) if dname != "bool" else \
            torch.frombuffer(bytearray(base), dtype=torch.uint8).to(torch.bool)
        v = torch.as_strided(b, shape, strides, offset)
        return v, expected, itemsize, b.data_ptr(), len(base)
    if name == "ref":
        from .. import _ref

        b = _ref.Tensor(dname, (BASE_ELEMENTS,), data=base, readonly=bool(readonly))
        try:
            v = b.view(shape, strides, offset * itemsize)
        except ValueError:
            return None
        return v, expected, itemsize, b.data_ptr, len(base)
    return _build_generic(name, dname, itemsize, shape, expected, readonly, None)


_bound = []


def _cuda_tensor(dname, shape, data):
    """ref's CudaTensor of the bytes `data`, on kit.cuda's runtime (bound into _ref once)."""
    from .. import _ref
    from . import devmem

    if not _bound:
        devmem.consumer_entry("ref")  # binds the runtime into _ref
        _bound.append("ref")
    return _ref.CudaTensor(dname, shape, data)


def _build_cuda(name, dname, itemsize, shape, strides, offset, base, expected):
    """build() in the CUDA mode: (view, expected, itemsize, device address, nbytes) or None."""
    if name == "torch":
        import torch

        if any(s < 0 for s in strides) or not hasattr(torch, dname):
            return None
        b = torch.frombuffer(bytearray(base), dtype=torch.uint8 if dname == "bool" else getattr(torch, dname))
        b = (b.to(torch.bool) if dname == "bool" else b).to("cuda:0")
        return torch.as_strided(b, shape, strides, offset), expected, itemsize, b.data_ptr(), len(base)
    if name == "cupy":
        import cupy
        import numpy as np

        b = cupy.asarray(np.frombuffer(bytearray(base), dtype=dname))
        v = cupy.lib.stride_tricks.as_strided(b[offset:], shape=shape, strides=tuple(s * itemsize for s in strides))
        return v, expected, itemsize, b.data.ptr, len(base)
    if name == "ref":
        t = _cuda_tensor(dname, shape, expected)
        return t, expected, itemsize, t.ptr, len(expected)
    if name == "dlconform.pyref":
        from .. import pyref

        d = pyref.to_device(pyref.frombuffer(expected, dname, shape))
        return d, expected, itemsize, d.ptr, d.nbytes
    return _build_generic(name, dname, itemsize, shape, expected, False, "cuda")


def unusable(name, device=None):
    """Why the producer target cannot fuzz `name` (one line), or None. It must make a plain
    float32 array of (2,) (a library without a view maker here: import it with from_dlpack), and
    what it makes must have __dlpack__ (the target's start-up asks; it exits 2 with the reason).
    So a library that cannot reach the device (torch without a GPU) is no finding per input."""
    where = "%s@%s" % (name, device) if device else name
    try:
        made = build(name, DTYPES.index(("float32", 4)), (2,), (1,), 0, 0, 1, device)
    except Exception as e:
        return "producer %s: making a plain float32 array of (2,) raised %s: %s" % (where, type(e).__name__, e)
    if made is None:
        return "producer %s: its from_dlpack refuses a plain float32 array of (2,)" % where
    if not callable(getattr(made[0], "__dlpack__", None)):
        return "producer %s: what its from_dlpack gives (%s) has no __dlpack__: it is no producer" % (
            where, type(made[0]).__name__)
    return None


def _memory_of(x, device):
    """The address of the first element of a library's array, where it says it: the consumer
    oracles' result_address (buffer protocol, CUDA array interface, data_ptr), else its array
    interface or an int `address`; None otherwise."""
    from .consumer_oracles import result_address

    addr, view = result_address(x, cuda=device == "cuda")
    if hasattr(view, "release"):
        view.release()
    if addr is not None:
        return addr
    try:
        return int(x.__array_interface__["data"][0])
    except Exception:
        pass
    try:
        v = x.address
    except Exception:
        return None
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _build_generic(name, dname, itemsize, shape, expected, readonly, device):
    """build() for a library with from_dlpack: its import of a compact export of the view's
    values (module docstring). Returns the tuple of seven or None."""
    import importlib

    from .. import _ref

    if device == "cuda":
        src = _cuda_tensor(dname, shape, expected)
        src_addr = src.ptr
    else:
        src = _ref.Tensor(dname, shape, data=expected, readonly=bool(readonly))
        src_addr = src.data_ptr + src.byte_offset
    try:
        x = importlib.import_module(name).from_dlpack(src)
    except Exception:
        return None  # the library cannot hold it: its import is the consumer target's to judge
    addr = _memory_of(x, device)
    return x, expected, itemsize, addr or 0, len(expected), (src_addr, len(expected), bool(readonly)), src
