"""Not jax: a stand-in of the part of jax's surface the built-in `jax` target reads
(targets/jax_target.py), for the harness's tests on a machine without jax. Its arrays are
pyref's (jax.dlpack.from_dlpack is pyref.from_dlpack), a correct library; its config says
whether 64-bit types are on as jax's does, a property of `jax.config`."""
__version__ = "0.0+standin"


class _Config:
    jax_enable_x64 = False


config = _Config()


class Device:
    """jax's CPU device: what jax.dlpack.from_dlpack's `device` takes (an object, not a string)."""

    platform = "cpu"

    def __str__(self):
        return "TFRT_CPU_0"


_CPU = Device()


def devices(backend=None):
    if backend not in (None, "cpu"):
        raise RuntimeError("Unknown backend %s" % backend)
    return [_CPU]


def default_backend():
    return "cpu"
