"""The producer side: native tensors, native views, and the native layout that exported metadata
is compared with before any byte is read; the layouts and dtypes of the interop checks."""
from dlconform.kit import Unsupported

from .dtypes import row_major_strides, safe_values


#: the layouts of the interop checks (test_interop.py, test_cuda_interop.py): name -> (base
#: shape, the native view that makes it or None, result shape)
INTEROP_LAYOUTS = {
    "contiguous": ((3, 4), None, (3, 4)),
    "transposed": ((3, 4), ("transpose", ((1, 0),)), (4, 3)),
    "sliced-step": ((4, 6), ("slice", (1, 0, None, 2)), (4, 3)),
    "0-d": ((), None, ()),
    "zero-size": ((0, 3), None, (0, 3)),
}
#: the dtypes of the interop checks, and the layouts of INTEROP_LAYOUTS that are strided views
INTEROP_DTYPES = ("float32", "int16", "bool", "complex64")
INTEROP_STRIDED = ("transposed", "sliced-step")


def make(target, dtype="float32", shape=(2, 3), seed=0):
    """(native tensor, its values (safe_values))."""
    if dtype not in target.dtypes():
        raise Unsupported("target %s cannot make %s tensors" % (target.name, dtype))
    values = safe_values(dtype, shape, seed)
    return target.make(dtype, shape, values), values


def native_ptr(target, x):
    """Address of x's first element, or None when the adapter cannot tell."""
    try:
        return int(target.describe(x)["ptr"])
    except Exception:
        return None


def apply_views(target, x, ops):
    """Applies native view ops (strategies.view_ops) to x. Returns (view, None), or (None, the op
    the target lacks)."""
    cur = x
    for op in ops:
        if op[0] == "transpose":
            v = target.transpose(cur, op[1])
        elif op[0] == "slice":
            _, dim, start, stop, step = op
            v = target.slice(cur, dim, start, stop, step)
        else:
            v = target.flip(cur, op[1])
        if v is None:
            return None, op
        cur = v
    return cur, None


def native_layout(target, x):
    """(shape, element strides, first-element address) of a native tensor, or None when the
    adapter does not know its library's layout."""
    try:
        return target.native_layout(x)
    except Exception:
        return None


def compare_layout(target, x, info, itemsize):
    """Exported metadata (an inspect() dict) against the native layout, ignoring strides of
    dims of extent <= 1. Returns a list of (clause, message); empty when consistent or when the
    layout is unknown."""
    nat = native_layout(target, x)
    if nat is None:
        return []
    shape, strides, first = nat
    out = []
    if tuple(info["shape"] or ()) != shape:
        out.append(("LAY-09", "exported shape %r, the tensor's shape is %r" % (info["shape"], shape)))
        return out
    if any(n == 0 for n in shape):
        return out
    exp = info["strides"]
    if exp is None:
        exp = row_major_strides(shape)
    diff = [d for d, n in enumerate(shape) if n > 1 and exp[d] != strides[d]]
    if diff:
        if all(exp[d] == strides[d] * itemsize for d in diff):
            out.append(("LAY-05", "strides %r are in bytes: the tensor's element strides are %r (itemsize %d)"
                        % (tuple(exp), strides, itemsize)))
        else:
            out.append(("LAY-05", "exported strides %r do not describe the tensor (element strides %r)"
                        % (tuple(exp), strides)))
    if info["data"] is not None and info["data"] + info["byte_offset"] != first:
        out.append(("LAY-03", "data + byte_offset = %#x, but the first element is at %#x (%+d bytes)"
                    % (info["data"] + info["byte_offset"], first, info["data"] + info["byte_offset"] - first)))
    return out


def record_layout(check, target, x, info, itemsize, clauses=None):
    """Records each finding of compare_layout (those of `clauses`, when given) as a fail; True
    when there was one."""
    found = [(c, m) for c, m in compare_layout(target, x, info, itemsize) if clauses is None or c in clauses]
    for clause, message in found:
        check.record(clause, "fail", message)
    return bool(found)


def views(target, x, ops):
    """[(label, view)] of each (label, native view op) of `ops` that the target offers on x (an
    op the adapter lacks, or cannot do on x, is left out)."""
    out = []
    for label, op in ops:
        try:
            v, _ = apply_views(target, x, [op])
        except Exception:  # noqa: BLE001 - an op the adapter cannot do is not offered
            v = None
        if v is not None:
            out.append((label, v))
    return out
