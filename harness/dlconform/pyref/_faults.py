"""Built-in faults: named mutants of pyref, each breaking exactly one DLPack clause.

A test suite proves its checks can fail by running them against pyref with one fault on.
The active fault is process-wide: DLCONFORM_PYREF_FAULT=NAME in the environment at import,
or set_fault(NAME). Each fault has one site in the code, a single `active(NAME)` test; with
no fault on, every site behaves as the clean code. Adding a fault is one line of _TABLE and
one site.
"""
import collections
import os

Fault = collections.namedtuple("Fault", "clause side description")

#: one fault a line: NAME CLAUSE SIDE DESCRIPTION; an indented line goes on with the description
_TABLE = """
legacy_capsule_name             CAP-01  producer legacy capsules are named "DLTensor" instead of "dltensor"
destructor_leaks                CAP-05  producer the capsule destructor never calls the deleter of an unconsumed
                                                 capsule
destructor_ignores_used         CAP-06  producer the capsule destructor calls the deleter even when the capsule was
                                                 renamed used_*
deleter_frees_nothing           OWN-02  producer the deleter returns without releasing the struct or the array it
                                                 holds
ignore_max_version              VER-02  producer max_version=None still gives a versioned capsule
readonly_unflagged              FLG-02  producer a read-only array is exported without READ_ONLY
byte_strides                    LAY-05  producer strides are exported in bytes instead of elements
stream_accepted                 STR-10  producer an int stream is accepted on the CPU instead of raising BufferError
capsule_name_per_export         CAP-09  producer each capsule gets a name string of its own, made for it and never
                                                 freed, instead of one static name
device_list                     API-02  producer __dlpack_device__ answers a list [1, 0] instead of a tuple
no_dlpack_device                API-06  producer arrays have __dlpack__ but no __dlpack_device__
bad_max_version_buffererror     ERR-01  producer a max_version that is not a (major, minor) tuple of ints raises
                                                 BufferError instead of TypeError
stream_type_unchecked           STR-02  producer a stream that is not an int (a str, a float) is accepted
newer_minor_refused             VER-01  producer max_version of major 1 with a minor above 3 raises BufferError
                                                 instead of getting a (1, 3) capsule
bool_unexportable               DT-12   producer bool arrays cannot be exported (BufferError)
versioned_flags_before_deleter  VER-10  producer versioned structs hold flags where the ABI puts the deleter, and
                                                 the deleter after it (consumers call the flags value: NULL, or a
                                                 crash)
max_version_unchecked           VER-01  producer a max_version that is not a (major, minor) tuple of ints is taken
                                                 for None (a legacy capsule)
copy_none_copies                CPY-03  producer copy=None exports a copy (IS_COPIED) instead of the array's own
                                                 memory
dtype_code_past_enum            DT-01   producer float8_e8m0fnu is exported with code 18, past the header's last
                                                 DLDataTypeCode
complex_part_bits               DT-04   producer complex dtypes export the bits of one part (32 for complex64)
bfloat16_as_float16             DT-05   producer bfloat16 is exported with code kDLFloat
fp8_as_uint8                    DT-06   producer the fp8 formats are exported with code kDLUInt
int_two_lanes                   DT-10   producer int16 to int64 export two lanes of half the bits
unsigned_as_signed              DT-13   producer unsigned ints are exported with code kDLInt
byteswap_in_place               DT-02   producer an export turns the array's multi-byte elements big-endian, in
                                                 place
data_at_first_element           LAY-01  producer data points at the first element (byte_offset 0), so views export
                                                 unaligned data
byte_offset_dropped             LAY-03  producer views export byte_offset 0: data + byte_offset is the start of the
                                                 buffer, not the first element
leading_unit_dim                LAY-09  producer exports carry an extra leading dimension of extent 1 (0-d arrays
                                                 export ndim 1)
strided_views_refused           LAY-11  producer arrays that are not row-major are refused (BufferError)
bfloat16_typeerror              ERR-01  producer bfloat16 arrays refuse to export with TypeError, not BufferError
reexport_drops_readonly         FLG-02  producer an array imported read-only is re-exported without READ_ONLY
dl_device_unchecked_on_copy     DEV-05  producer with copy=True any dl_device is exported on the CPU
copy_none_versioned_copies      CPY-03  producer versioned exports with copy=None are copies (IS_COPIED)
cuda_no_wait                    STR-01  producer a device array's export returns without making the consumer's stream
                                                 wait for the array's stream
cuda_host_sync                  STR-01  producer a device array's export blocks the host until the array's stream is
                                                 done instead of making the consumer's stream wait (safe, costly: a
                                                 warn)
cuda_omitted_stream_no_sync     STR-04  producer a device array's export called without a stream makes no stream wait
                                                 (as stream=-1) instead of taking the array API's default, None:
                                                 the legacy default stream
cuda_wrong_stream               STR-07  producer a stream handle above 2 is taken for the legacy default stream: that
                                                 stream waits, the consumer's does not
cuda_minus_one_syncs            STR-03  producer stream=-1 synchronizes the array's stream (the host waits)
cuda_stream_zero_accepted       STR-08  producer stream=0 is taken for the legacy default stream instead of refused
cuda_host_copy_unsynced         STR-12  producer dl_device=(1, 0) copies to the host without synchronizing the array's
                                                 stream first
cuda_host_copy_unflagged        FLG-04  producer the host copy of dl_device=(1, 0) lacks IS_COPIED
cuda_host_copy_despite_false    CPY-05  producer dl_device=(1, 0) with copy=False copies to the host anyway
cuda_destroys_stream            STR-11  producer the export destroys the consumer's stream after making it wait
cuda_stream_type_unchecked      STR-02  producer a device array's export takes a stream of any type (a str, a
                                                 float) for the legacy default stream
cuda_copy_shares_memory         CPY-01  producer copy=True of a device array exports the array's own memory
                                                 (flagged IS_COPIED all the same)
cuda_copy_unflagged             FLG-04  producer copy=True of a device array exports the copy without IS_COPIED
cuda_consumer_passes_zero       STR-08  consumer device_from_dlpack names the legacy default stream 0 instead of 1
cuda_consumer_per_thread        STR-05  consumer device_from_dlpack names the per-thread default stream (2) while
                                                 it reads on the legacy default stream
cuda_consumer_ignores_context   STR-07  consumer device_from_dlpack names the legacy default stream inside a
                                                 cuda_stream() context, whose stream it reads on
cuda_consumer_no_sync           STR-01  consumer device_from_dlpack passes stream=-1 (no synchronisation) and
                                                 reads the import on its own stream regardless
cuda_consumer_ignores_offset    LAY-03  consumer device_from_dlpack reads a CUDA tensor from data, leaving its
                                                 byte_offset out
cuda_consumer_ignores_strides   LAY-11  consumer device_from_dlpack takes a strided CUDA tensor for a compact
                                                 row-major one (its strides left out)
cuda_consumer_float32_only      DT-13   consumer device_from_dlpack refuses every dtype but float32 (BufferError),
                                                 though pyref's device arrays hold them all
cuda_consumer_rejects_null_data LAY-04  consumer device_from_dlpack refuses a CUDA tensor whose data is NULL, even
                                                 one without elements
cuda_consumer_refuses_0d        LAY-08  consumer device_from_dlpack refuses 0-d CUDA tensors (BufferError)
cuda_consumer_column_major      LAY-11  consumer device_from_dlpack reads a CUDA tensor's elements in column-major
                                                 order (the strides of a Fortran-ordered array of its shape)
cuda_consumer_unchecked         LAY-09  consumer device_from_dlpack takes a CUDA tensor as given: its version, ndim,
                                                 shape, extents and data unchecked (a negative ndim read as 0, an
                                                 unknown dtype code as the unsigned int of its bits)
cuda_consumer_lands_on_host     API-05  consumer device_from_dlpack with device=None gives a host copy of the CUDA
                                                 memory (a pyref Array on the CPU)
cuda_consumer_copy_ignored      CPY-06  consumer device_from_dlpack(copy=True) neither asks the producer for a copy
                                                 nor makes one: the import views the producer's memory
cuda_consumer_host_copy_false   CPY-07  consumer device_from_dlpack(device="cpu", copy=False) asks the producer
                                                 for a host copy anyway and imports it
cuda_consumer_device_ignored    DEV-06  consumer device_from_dlpack(device="cpu") leaves the import on the GPU
cuda_consumer_valueerror        CPY-08  consumer device_from_dlpack refuses what it cannot serve with ValueError,
                                                 not BufferError: a producer's refusal of a host copy, memory on
                                                 another device (DEV-07)
cuda_consumer_max_version_list  VER-01  consumer device_from_dlpack passes max_version as a list [1, 3]
cuda_consumer_refuses_legacy    VER-05  consumer device_from_dlpack refuses a legacy capsule from a producer it asked
                                                 for max_version (BufferError), though it reads both kinds
cuda_consumer_no_retry          VER-06  consumer device_from_dlpack does not ask again with the stream alone when an
                                                 old producer raises TypeError for max_version or copy
cuda_consumer_refuses_read_only FLG-03  consumer device_from_dlpack refuses a READ_ONLY CUDA tensor (BufferError),
                                                 though ignoring the flag is preferred
consumer_no_rename              CAP-03  consumer from_dlpack does not rename the capsule it consumes
consumer_accepts_used           CAP-04  consumer from_dlpack imports a capsule already named used_*
consumer_no_delete              OWN-03  consumer the deleter of an imported tensor is never called
consumer_double_delete          OWN-03  consumer the deleter of an imported tensor is called twice when the result
                                                 dies
consumer_reads_major2           VER-08  consumer from_dlpack imports a tensor whose version.major is not 1
consumer_skips_device           API-04  consumer from_dlpack never asks __dlpack_device__ and takes every producer
                                                 for a CPU one
consumer_no_methods_typeerror   ERR-03  consumer from_dlpack raises TypeError, not AttributeError, for an object
                                                 without __dlpack__ (API-06 repeats the rule)
consumer_used_name_per_capsule  CAP-09  consumer the used_* name set on a consumed capsule is a string made for that
                                                 capsule (and never freed)
consumer_used_name_temporary    CAP-09  consumer the used_* name set on a consumed capsule is a temporary bytes
                                                 object, freed when from_dlpack returns (the name dangles)
consumer_wraps_producer_errors  ERR-02  consumer an exception (but TypeError) from __dlpack__ or __dlpack_device__
                                                 reaches the caller wrapped in a BufferError
consumer_max_version_list       VER-01  consumer from_dlpack passes max_version as a list [1, 3]
consumer_accepts_huge_shape     LAY-10  consumer from_dlpack imports tensors whose byte size overflows int64
consumer_ignores_lanes          DT-10   consumer from_dlpack reads a vector dtype as its scalar (lanes taken for 1)
consumer_strides_as_bytes       LAY-05  consumer from_dlpack reads strides as byte counts (each is divided by the
                                                 itemsize, rounding toward 0)
consumer_accepts_overflow       LAY-10  consumer from_dlpack imports byte spans past int64 or the address space
consumer_accepts_null_data      LAY-04  consumer from_dlpack imports NULL data for a tensor with elements
consumer_releases_used          OWN-03  consumer refusing a capsule named used_*, from_dlpack calls its deleter,
                                                 though another consumer owns the tensor
consumer_needs_manager_ctx      OWN-06  consumer from_dlpack refuses a tensor whose manager_ctx is NULL (BufferError)
consumer_refuses_is_copied      FLG-05  consumer from_dlpack refuses a tensor flagged IS_COPIED (BufferError)
"""


def _read(table):
    faults, last = {}, None
    for line in table.strip("\n").splitlines():
        if line.startswith(" "):
            faults[last] = faults[last]._replace(description=faults[last].description + " " + line.strip())
        else:
            last, clause, side, description = line.split(None, 3)
            faults[last] = Fault(clause, side, description)
    return faults


FAULTS = _read(_TABLE)
#: the faults only device arrays show (pyref.to_device): they are seen on a CUDA runtime, the
#: simulated one without a GPU (the target pyref@cuda)
CUDA_FAULTS = frozenset(name for name in FAULTS if name.startswith("cuda_"))

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
