"""The Target base class: what the suites may ask of a library under test.

Tensors handed to `make` and the view methods are the library's own ("native") objects.
Element values are given and compared as *logical row-major element bytes*: `itemsize` bytes
per element, elements in C order, whatever the strides.
"""

ROLES = frozenset({"producer", "consumer"})


class TargetError(Exception):
    """A target spec that cannot be used; str() is a one-line reason."""


class Target:
    """Base adapter. Subclasses override what their library offers.

    Members (see harness/README.md):
      name, roles, available(), versions(), dtypes(), make(), transpose(), slice(), flip(),
      readonly(), expected(), from_dlpack(), consumer_keywords(), describe(), discover_dtypes().
    Optional hooks (None when the library has no such thing): readonly_ways(), native_layout(),
    dtype_kind(), unexportable(), sparse(), byteswapped(), stream_device().
    `library` names the module under test. A reproducer calls these same methods: it builds the
    adapter as dlconform.targets.loader.construction() says and runs the check's own code.
    """

    name = "target"
    library = None
    roles = frozenset()
    #: the spec load() made this target from (None for one built another way)
    spec = None
    #: (device type, device id) of the tensors of a device variant (`NAME@cuda`); (1, 0): the CPU
    device = (1, 0)
    #: whether make() gives tensors on `device` that the host checks' producer side can judge
    #: (their elements read through kit.cuda): a device run then runs the element checks of
    #: cli.DEVICE_TESTS on them; False: a device variant runs the device checks alone
    device_tensors = False

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

    def discover_dtypes(self):
        """Every dtype the library has, found in the library at run time (not a fixed list):
        {the name make() takes: (the DLPack dtype name of targets/dtypes.py, or None when
        DLPack has no type for it; item size in bytes)}. The default knows only dtypes()."""
        from .dtypes import itemsize

        return {d: (d, itemsize(d)) for d in self.dtypes()}

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

    def readonly_ways(self, x):
        """Every way the library holds read-only data like x: [(what, tensor)]. The default is
        readonly(x), when the library has it; an import of a READ_ONLY capsule is the suites'
        own way (test_flags.py)."""
        ro = self.readonly(x)
        return [] if ro is None else [("a read-only view", ro)]

    def expected(self, x):
        raise NotImplementedError("%s has no value oracle" % self.name)

    # ---- consumer side
    def from_dlpack(self, obj, **kw):
        from ..kit.check import Unsupported

        raise Unsupported("%s is not a consumer" % self.name)

    def consumer_keywords(self):
        return frozenset()

    def host_device(self):
        """What from_dlpack's `device` keyword takes for the CPU in this library: "cpu" (numpy's,
        torch's, the array API's usual name), unless the library names its devices with objects
        of its own (jax: a jax Device)."""
        return "cpu"

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

    # ---- optional hooks: what only some libraries have
    def native_layout(self, x):
        """(shape, strides in elements, address of the first element) of a native tensor, or
        None when the adapter does not know its library's memory layout."""
        return None

    def dtype_kind(self, y):
        """The kind letter of a consumer result's dtype (b i u f c), or None when unknown."""
        return None

    def unexportable(self):
        """(what, tensor): a tensor of the library that __dlpack__ cannot export (ERR-01), or
        None."""
        return None

    def round_trips(self):
        """For a target that reads its consumer's results through the library's own export (the
        generic one, for a library with no other reader): [(case, how it differs, clause)] of the
        kit's tensors whose import does not read back as given; None when the adapter reads
        results itself, so each role is judged on its own."""
        return None

    def sparse(self):
        """A tensor that is not dense strided memory (SEM-02), or None."""
        return None

    def byteswapped(self, x):
        """x in non-native byte order (DT-02), or None when the library has no such arrays."""
        return None


class ReferenceTarget(Target):
    """A built-in reference library (ref in C, pyref in Python): both roles, or one with `role`
    (a fault's checks of its own side), and at most one of its built-in faults on. `module` is
    the library: it has from_dlpack(obj, device=, copy=) and tensors with tobytes()."""
    roles = frozenset({"producer", "consumer"})

    def __init__(self, module, faults, name=None, fault=None, role=None):
        super().__init__(name or spec_name(self.name, fault, role))
        self.module = module
        self.fault = fault
        if role is not None:
            self.roles = frozenset({role})
        if fault and fault not in faults:
            known = ", ".join(sorted(faults)) or "none"
            raise TargetError("unknown %s fault %r (known: %s)" % (type(self).name, fault, known))
        if fault:
            module.set_fault(fault)

    def expected(self, x):
        return x.tobytes()

    def from_dlpack(self, obj, **kw):
        return self.module.from_dlpack(obj, **kw)

    def consumer_keywords(self):
        return frozenset({"device", "copy"})


class LibraryTarget(Target):
    """An adapter of one importable library: `library` is imported at construction (a
    TargetError with a one-line reason when it cannot be), `self.module` holds it, its roles
    are what offers() finds, and the adapter is unavailable when it has neither role. The
    target's name is the library's."""

    #: what a library with no role lacks, for the reason available() gives
    lacks = "DLPack support"

    def __init__(self, name=None):
        super().__init__(name or self.library)
        self.module = import_library(self.library)
        self.roles = roles_of(*self.offers(self.module))

    def offers(self, module):
        """(exports, imports): whether the library has a DLPack producer and a consumer."""
        raise NotImplementedError

    def version(self):
        return getattr(self.module, "__version__", "?")

    def versions(self):
        return {self.library: self.version()}

    def available(self):
        if not self.roles:
            return False, "%s %s has no %s" % (self.library, self.version(), self.lacks)
        return True, ""


def import_library(name):
    """importlib.import_module(name), or TargetError with a one-line reason."""
    import importlib

    try:
        return importlib.import_module(name)
    except Exception as e:  # an import may fail in many ways
        raise TargetError("cannot import module %r (%s)" % (name, type(e).__name__))


def roles_of(producer, consumer):
    """The roles set of a library that can export (producer) and import (consumer)."""
    return frozenset(r for r, has in (("producer", producer), ("consumer", consumer)) if has)


def spec_name(base, fault=None, role=None):
    """The spec of ref or pyref with a fault and a role: `ref`, `ref:fault=NAME`,
    `ref:fault=NAME,role=consumer` (dlconform.targets.loader parses it back)."""
    options = ",".join("%s=%s" % kv for kv in (("fault", fault), ("role", role)) if kv[1])
    return base + (":" + options if options else "")
