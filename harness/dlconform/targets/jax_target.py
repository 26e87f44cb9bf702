"""jax on the CPU: the built-in target `jax` (jax on the GPU is `jax@cuda`, targets/cuda_libs.py).

jax has no `from_dlpack` at its top level (it is `jax.dlpack.from_dlpack`), so `--target jax`
cannot be the generic target; this is the generic target over `jax.dlpack` (targets/generic.py:
jax's arrays are imports of the kit's host tensors, each verified to hold what it was given
before a producer check uses it; a consumer result read by a reader jax's export cannot taint),
with jax's configuration in the results: `jax_enable_x64` decides whether jax has 64-bit types
at all (without it an int64 import is an int32 array: those dtypes are not offered, and the
consumer checks judge the narrowing), and the backend jax's arrays are on.
"""
from .base import TargetError
from .generic import GenericTarget


def cpu_device(jax):
    """jax's CPU device, what jax.dlpack.from_dlpack's `device` takes for the host (a string is
    not a jax device); "cpu" where jax has no CPU backend."""
    try:
        return jax.devices("cpu")[0]
    except Exception:  # noqa: BLE001 - no CPU backend: the check meets jax's own answer to "cpu"
        return "cpu"


def x64(jax):
    """jax_enable_x64 of the module `jax` (64-bit types on), read as its config's property (its
    `config.read` is a stopgap in jax); "unknown" where this jax's config has no such property.
    Both jax targets record it (this one, cuda_libs.JaxTarget)."""
    try:
        return bool(getattr(jax.config, "jax_enable_x64"))
    except Exception:
        return "unknown"


class JaxCpuTarget(GenericTarget):
    def __init__(self, name=None, device=None):
        if device is not None:  # the loader gives jax@cuda to cuda_libs.JaxTarget
            raise TargetError("jax@%s is not this target's: jax@cuda (cuda_libs.JaxTarget)" % device)
        try:
            import jax
            import jax.dlpack
        except Exception as e:
            first = str(e).splitlines()[0] if str(e) else ""
            raise TargetError("cannot import jax (%s: %s)" % (type(e).__name__, first))
        self.jax = jax
        super().__init__(name or "jax", module=jax.dlpack)
        self.library = "jax"

    def available(self):
        try:
            cpus = self.jax.devices("cpu")
        except Exception as e:
            return False, "jax %s has no CPU backend here (jax.devices('cpu'): %s: %s)" % (
                self._version("jax"), type(e).__name__, e)
        return (True, "") if cpus else (False, "jax %s counts no CPU device" % self._version("jax"))

    def host_device(self):
        return cpu_device(self.jax)

    @staticmethod
    def _version(dist):
        try:
            from importlib import metadata

            return metadata.version(dist)
        except Exception:
            return "unknown"

    def versions(self):
        out = {"jax": str(getattr(self.jax, "__version__", None) or self._version("jax")),
               "jax_enable_x64": str(x64(self.jax))}
        jaxlib = self._version("jaxlib")
        if jaxlib != "unknown":
            out["jaxlib"] = jaxlib
        try:
            out["jax backend"] = "%s (default %s)" % (self.jax.devices("cpu")[0], self.jax.default_backend())
        except Exception as e:
            out["jax backend"] = "unknown (%s)" % type(e).__name__
        return out
