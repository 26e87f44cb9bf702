"""Strided view arithmetic shared by the ref and generic targets (elements, not bytes)."""


def transpose(shape, strides, perm):
    perm = tuple(int(p) for p in perm)
    if sorted(perm) != list(range(len(shape))):
        raise ValueError("bad permutation %r for ndim %d" % (perm, len(shape)))
    return tuple(shape[p] for p in perm), tuple(strides[p] for p in perm), 0


def slice_(shape, strides, dim, start, stop, step):
    """(shape, strides, element offset) of x[..., start:stop:step, ...] along dim."""
    if step == 0:
        raise ValueError("slice step cannot be zero")
    shape, strides = list(shape), list(strides)
    n = shape[dim]
    lo, hi, st = slice(start, stop, step).indices(n)
    length = len(range(lo, hi, st))
    offset = lo * strides[dim] if length else 0
    shape[dim] = length
    strides[dim] = strides[dim] * st
    return tuple(shape), tuple(strides), offset


def flip(shape, strides, dim):
    shape, strides = list(shape), list(strides)
    n = shape[dim]
    offset = (n - 1) * strides[dim] if n > 0 else 0
    strides[dim] = -strides[dim]
    return tuple(shape), tuple(strides), offset
