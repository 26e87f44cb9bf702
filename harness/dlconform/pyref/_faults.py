"""Built-in faults: named mutants of pyref, each breaking exactly one DLPack clause.

A test suite proves its checks can fail by running them against pyref with one fault on.
The active fault is process-wide: DLCONFORM_PYREF_FAULT=NAME in the environment at import,
or set_fault(NAME). Each fault has one site in the code, a single `active(NAME)` test; with
no fault on, every site behaves as the clean code. Adding a fault is one FAULTS entry and
one site.
"""
import collections
import os

Fault = collections.namedtuple("Fault", "clause side description")

P, C = "producer", "consumer"

FAULTS = {
    "legacy_capsule_name": Fault("CAP-01", P, 'legacy capsules are named "DLTensor" instead of "dltensor"'),
    "destructor_leaks": Fault("CAP-05", P, "the capsule destructor never calls the deleter of an unconsumed capsule"),
    "destructor_ignores_used": Fault("CAP-06", P, "the capsule destructor calls the deleter even when the capsule "
                                     "was renamed used_*"),
    "deleter_frees_nothing": Fault("OWN-02", P, "the deleter returns without releasing the struct or the array "
                                   "it holds"),
    "ignore_max_version": Fault("VER-02", P, "max_version=None still gives a versioned capsule"),
    "bfloat16_typeerror": Fault("ERR-01", P, "bfloat16 arrays refuse to export with TypeError, not BufferError"),
    "reexport_drops_readonly": Fault("FLG-02", P, "an array imported read-only is re-exported without READ_ONLY"),
    "readonly_unflagged": Fault("FLG-02", P, "a read-only array is exported without READ_ONLY"),
    "byte_strides": Fault("LAY-05", P, "strides are exported in bytes instead of elements"),
    "stream_accepted": Fault("STR-10", P, "an int stream is accepted on the CPU instead of raising BufferError"),
    "dl_device_unchecked_on_copy": Fault("DEV-05", P, "with copy=True any dl_device is exported on the CPU"),
    "copy_none_versioned_copies": Fault("CPY-03", P, "versioned exports with copy=None are copies (IS_COPIED)"),
    "consumer_no_rename": Fault("CAP-03", C, "from_dlpack does not rename the capsule it consumes"),
    "consumer_accepts_used": Fault("CAP-04", C, "from_dlpack imports a capsule already named used_*"),
    "consumer_no_delete": Fault("OWN-03", C, "the deleter of an imported tensor is never called"),
    "consumer_double_delete": Fault("OWN-03", C, "the deleter of an imported tensor is called twice when the "
                                    "result dies"),
    "consumer_reads_major2": Fault("VER-08", C, "from_dlpack imports a tensor whose version.major is not 1"),
    "consumer_accepts_overflow": Fault("LAY-10", C, "from_dlpack imports byte spans past int64 or the address space"),
    "consumer_accepts_null_data": Fault("LAY-04", C, "from_dlpack imports NULL data for a tensor with elements"),
}

ENV = "DLCONFORM_PYREF_FAULT"


class _Switch:
    """The active fault. Its bound methods carry their state with them: the capsule destructor
    and the deleter use them when interpreter teardown has cleared module globals."""

    def __init__(self, known):
        self.known = known
        self.name = None

    def set(self, name):
        if name and name not in self.known:
            raise ValueError("unknown pyref fault %r (known: %s)" % (name, ", ".join(sorted(self.known))))
        self.name = name or None

    def active(self, name):
        """True when fault `name` is on (the one test at each fault's site)."""
        assert name in self.known, name
        return self.name == name


_switch = _Switch(FAULTS)
#: set_fault(NAME) turns on a fault, set_fault(None) turns faults off; ValueError for unknown names
set_fault = _switch.set
active = _switch.active


def current():
    return _switch.name


set_fault(os.environ.get(ENV))
