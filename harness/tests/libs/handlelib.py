"""handlelib: a kernel library's consumer, whose results are opaque handles.

`from_dlpack(x, /, *, device=None, copy=None)` imports as bytecopy does (a copy of the
elements, the tensor given back at once) and returns a `Handle`: it offers its memory's
address, shape, element strides and item size as attributes, and no `__array_interface__`,
buffer or `__dlpack__`. dlconform's generic target cannot read such a result; an adapter whose
describe() reads the attributes can (harness/README.md, "A consumer-only library").
Bugs are bytecopy's (BYTECOPY_BUG=ignore_strides, ...).
"""
import bytecopy

__version__ = "1.0"


class Handle:
    """What a kernel library hands back: where its copy lies, and how."""

    def __init__(self, copy):
        self._copy = copy  # keeps the memory alive
        self.shape = tuple(copy.shape)
        self.itemsize = (copy.dtype[1] * copy.dtype[2] + 7) // 8
        self.data_ptr = copy.__array_interface__["data"][0]
        steps, step = [], 1
        for n in reversed(self.shape):
            steps.append(step)
            step *= max(n, 1)
        self.strides = tuple(reversed(steps))


def from_dlpack(x, /, *, device=None, copy=None):
    return Handle(bytecopy.from_dlpack(x, device=device, copy=copy))
