"""Not jax.dlpack: pyref's from_dlpack under jax's name (see the package's docstring)."""
from dlconform.pyref import from_dlpack  # noqa: F401
