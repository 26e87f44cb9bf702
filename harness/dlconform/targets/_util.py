"""Helpers shared by the library adapters."""
import inspect


def keywords_of(func, candidates=("device", "copy")):
    """Which of `candidates` func accepts as keywords: from its signature, else (a compiled
    function without one: Cython without binding, a C builtin) by calling it (_probed); None
    when neither tells."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return _probed(func, candidates)
    params = sig.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return frozenset(candidates)
    return frozenset(
        p.name for p in params
        if p.name in candidates and p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    )


class _NoProducer:
    """What _probed hands a from_dlpack: no __dlpack__, no __dlpack_device__ (ERR-03's object)."""


def _probed(func, candidates):
    """Which of `candidates` func takes, found by calling func(_NoProducer(), KEYWORD=None) for
    each (None: every such keyword's default, so nothing is asked of the library): binding the
    arguments refuses an unknown keyword with a TypeError that says "keyword" before any of the
    function's code runs; a function that takes it fails on the object instead (AttributeError,
    or another complaint about it). None when a call says neither (it returned, or raised
    something that does not say which)."""
    taken = set()
    for kw in candidates:
        try:
            func(_NoProducer(), **{kw: None})
        except TypeError as e:
            if "keyword" not in str(e):
                taken.add(kw)
        except Exception:  # noqa: BLE001 - the object's complaint: the keyword itself was bound
            taken.add(kw)
        else:
            return None
    return frozenset(taken)


def version_tuple(v):
    out = []
    for part in str(v).split("+")[0].split("."):
        digits = ""
        for ch in part:
            if ch.isdigit():
                digits += ch
            else:
                break
        out.append(int(digits or 0))
    return tuple(out)


def index(ndim, dim, sl):
    idx = [slice(None)] * ndim
    idx[dim] = sl
    return tuple(idx)


def claims_cuda(obj):
    """Whether obj is a producer whose __dlpack_device__ names kDLCUDA (asked once more by the
    import itself, as any consumer asks it first)."""
    return _claimed_device(obj) == 2


def claims_device(obj):
    """Whether obj is a producer whose __dlpack_device__ names a device other than the CPU."""
    return _claimed_device(obj) not in (None, 1)


def _claimed_device(obj):
    """The device type obj's __dlpack_device__ names; None for an object that is no producer or
    whose answer is not a device."""
    ask = getattr(obj, "__dlpack_device__", None)
    if ask is None or not hasattr(obj, "__dlpack__"):
        return None
    try:
        return int(tuple(ask())[0])
    except Exception:  # the import asks again and meets the same error
        return None


class NumpyLikeViews:
    """transpose, slice and flip of a library with numpy's array API (numpy, cupy: `self.module`):
    views of the same memory, negative strides where the step is negative."""

    def transpose(self, x, perm):
        return x.transpose(tuple(perm))

    def slice(self, x, dim, start, stop, step=1):
        return x[index(x.ndim, dim, slice(start, stop, step))]

    def flip(self, x, dim):
        return self.module.flip(x, dim)
