"""Not jax: a stand-in of the part of jax's surface the built-in `jax` target reads
(targets/jax_target.py), for the harness's tests on a machine without jax. Its arrays are
pyref's (jax.dlpack.from_dlpack is pyref.from_dlpack), a correct library; its config says
whether 64-bit types are on as jax's does, a property of `jax.config`."""
__version__ = "0.0+standin"


class _Config:
    jax_enable_x64 = False


config = _Config()


def devices(backend=None):
    if backend not in (None, "cpu"):
        raise RuntimeError("Unknown backend %s" % backend)
    return ["TFRT_CPU_0"]


def default_backend():
    return "cpu"
