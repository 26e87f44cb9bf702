"""The Target base class: what the suites may ask of a library under test.

Tensors handed to `make` and the view methods are the library's own ("native") objects.
Element values are given and compared as *logical row-major element bytes*: `itemsize` bytes
per element, elements in C order, whatever the strides.
"""

ROLES = frozenset({"producer", "consumer"})

#: dtype names as `_ref` (dlc_dtype_classify) spells them
STANDARD_DTYPES = (
    "bool",
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
    "complex32", "complex64", "complex128",
)

ITEMSIZE = {
    "bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex32": 4, "complex64": 8, "complex128": 16,
}


class TargetError(Exception):
    """A target spec that cannot be used; str() is a one-line reason."""


def row_major_strides(shape):
    strides = []
    acc = 1
    for n in reversed(tuple(shape)):
        strides.append(acc)
        acc *= max(int(n), 1)
    return tuple(reversed(strides))


def numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


class Target:
    """Base adapter. Subclasses override what their library offers.

    Members (see harness/README.md):
      name, roles, available(), versions(), dtypes(), make(), transpose(), slice(), flip(),
      readonly(), expected(), from_dlpack(), consumer_keywords(), describe(), repro_setup().
    Extras: `repro_make(dtype, shape, values, var)` gives reproducer lines that build the
    same tensor as `make`; `library` names the module under test.
    """

    name = "target"
    library = None
    roles = frozenset()

    def __init__(self, name=None):
        if name is not None:
            self.name = name

    def __repr__(self):
        return "<%s %s roles=%s>" % (type(self).__name__, self.name, sorted(self.roles))

    def has_role(self, role):
        if role in (None, "", "any"):
            return True
        if role == "both":
            return ROLES <= set(self.roles)
        return role in self.roles

    # ---- availability
    def available(self):
        return True, ""

    def versions(self):
        return {}

    def dtypes(self):
        return []

    # ---- producer side
    def make(self, dtype, shape, values):
        raise NotImplementedError("%s cannot make tensors" % self.name)

    def transpose(self, x, perm):
        return None

    def slice(self, x, dim, start, stop, step=1):
        return None

    def flip(self, x, dim):
        return None

    def readonly(self, x):
        return None

    def expected(self, x):
        raise NotImplementedError("%s has no value oracle" % self.name)

    # ---- consumer side
    def from_dlpack(self, obj, **kw):
        from ..verdicts import Unsupported

        raise Unsupported("%s is not a consumer" % self.name)

    def consumer_keywords(self):
        return frozenset()

    def describe(self, y):
        """Of a consumer result: {"ptr" (address of the first element, byte_offset applied),
        "shape", "strides" (elements), "itemsize", "readonly"}, and optionally "dtype": the
        (code, bits, lanes) the result holds, or "bytes" for untyped memory (a byte buffer that
        keeps no element type). Without "dtype" the dtype checks take the result for a typed
        array of the library's own dtypes."""
        raise NotImplementedError("%s cannot describe its tensors" % self.name)

    # ---- streams
    def stream_device(self):
        """A StreamDevice (see targets/ref.py: RefStreamDevice) for the producer side of the
        stream checks (STR-01..12, CPY-04/05), or None when the library has no device with
        streams on this machine."""
        return None

    # ---- reproducers
    def repro_setup(self):
        return []

    def repro_make(self, dtype, shape, values, var="x"):
        return ["%s = ...  # %s: a %s tensor of shape %r" % (var, self.name, dtype, tuple(shape))]
