"""Not jax.dlpack: pyref's from_dlpack under jax's name (see the package's docstring), whose
`device` is a jax Device, as jax's is: a string is refused."""
from dlconform import pyref

from . import Device


def from_dlpack(x, /, *, device=None, copy=None):
    if device is not None and not isinstance(device, Device):
        raise TypeError("device must be a jax Device or None, not %r" % (device,))
    return pyref.from_dlpack(x, device=None if device is None else "cpu", copy=copy)
