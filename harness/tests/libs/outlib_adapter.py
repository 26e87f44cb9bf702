"""outlib's dlconform adapter, written as harness/README.md ("An adapter for a library with native
constructors") says: `dlconform run --target harness/tests/libs/outlib_adapter.py:OutlibTarget`.

outlib has no from_dlpack, so the generic target (`--target outlib`) cannot load it: the generic
target makes its tensors by importing the kit's through the library's own consumer. The adapter
says how outlib makes, views and reads back its tensors; it offers the producer role alone."""
from dlconform.targets.base import LibraryTarget


class OutlibTarget(LibraryTarget):
    library = "outlib"
    lacks = "DLPack export"

    def offers(self, outlib):
        return hasattr(outlib.Tensor, "__dlpack__"), hasattr(outlib, "from_dlpack")

    def dtypes(self):
        return list(self.module.DTYPES)

    def make(self, dtype, shape, values):
        return self.module.make(tuple(shape), dtype, bytes(values))

    def transpose(self, x, perm):
        return x.transpose(*perm)

    def slice(self, x, dim, start, stop, step=1):
        return x.narrow(dim, start, stop, step)

    def flip(self, x, dim):
        return x.flip(dim)

    def readonly(self, x):
        return x.as_readonly()

    def expected(self, x):
        return x.tobytes()

    def native_layout(self, x):
        """(shape, strides in elements, address of the first element), read from outlib's own
        fields: what the producer checks compare an export's metadata with (LAY-03, LAY-05)."""
        return x.shape, x.strides, x._buf[1] + x.offset * x.itemsize
