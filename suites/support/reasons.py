"""The reasons a consumer can refuse a capsule, as a table (test_refusals.py runs each through
every route of a CPU consumer, test_cuda_refusals.py each over CUDA memory). A reason is the
forged capsule's keywords, the clause that judges it, what the check feeds (suites/README.md,
Grading) and what a consumer must do with it."""
import collections

#: must: "refuse" (a MUST clause says so), "read" (refusing or carrying it unread passes,
#: misreading fails: VER-09), "invalid" (accepting is warn), "any" (a valid input)
Reason = collections.namedtuple("Reason", "id clause feeds must kind kw device")


def _r(id_, clause, feeds, must, kind, device=(1, 0), **kw):
    """A reason; `device` is the forged memory's and the producer's."""
    if tuple(device) != (1, 0):
        kw["device"] = device
    return Reason(id_, clause, feeds, must, kind, kw, device)


REASONS = (
    _r("version-2.0", "VER-08", "valid", "refuse", "versioned", version=(2, 0), shape=(2, 3)),
    _r("version-0.9", "VER-08", "valid", "refuse", "versioned", version=(0, 9), shape=(2, 3)),
    _r("version-2.0-hostile", "VER-08", "valid", "refuse", "versioned", version=(2, 0), data="null",
       shape_null=True, ndim=3, shape=(2, 3)),
    _r("version-1.99-dtype-99", "VER-09", "valid", "read", "versioned", version=(1, 99), dtype=(99, 32, 1),
       shape=(2, 3)),
    _r("version-1.99-device-99", "VER-09", "valid", "read", "versioned", device=(99, 0), version=(1, 99),
       shape=(2, 3)),
    _r("shape-bytes-overflow", "LAY-10", "invalid", "invalid", "both", shape=(1 << 62, 4), buffer_size=64),
    _r("shape-numel-overflow", "LAY-10", "invalid", "invalid", "both", shape=(1 << 31, 1 << 31, 1 << 31),
       buffer_size=64),
    _r("shape-negative", "LAY-09", "invalid", "invalid", "both", shape=(2, -3), buffer_size=64),
    _r("ndim-negative", "LAY-09", "invalid", "invalid", "both", shape=(), ndim=-1, buffer_size=64),
    _r("shape-null", "LAY-09", "invalid", "invalid", "both", shape=(2, 3), shape_null=True, buffer_size=64),
    _r("ndim-40", "LAY-09", "valid", "any", "both", shape=(1,) * 40),
    _r("data-null", "LAY-04", "invalid", "invalid", "both", shape=(4,), data="null"),
    _r("strides-overflow", "LAY-10", "invalid", "invalid", "both", shape=(2,), strides=(1 << 62,), buffer_size=64),
    _r("strides-negative-overflow", "LAY-10", "invalid", "invalid", "both", shape=(2,), strides=(-(1 << 62),),
       buffer_size=64),
    _r("strides-negative", "LAY-11", "valid", "any", "both", shape=(3,), strides=(-1,), byte_offset=8),
    _r("strides-zero", "LAY-11", "valid", "any", "both", shape=(3,), strides=(0,)),
    _r("device-99", "VER-09", "valid", "read", "both", device=(99, 0), shape=(2, 3)),
)
#: dtypes whose reading a rule of the spec states, so valid input (suites/README.md, Grading):
#: codes no DLPack version defines (VER-09: never misread) and fp6/fp4 with other bits (DT-07,
#: DT-08: the consumer stops the import)
RULED_DTYPES = ((18, 8, 1), (99, 32, 1), (255, 8, 1), (15, 8, 1), (16, 4, 1), (17, 8, 1))


def ruled_clause(dtype):
    """The clause that reads a RULED_DTYPES dtype."""
    return {15: "DT-07", 16: "DT-07", 17: "DT-08"}.get(dtype[0], "VER-09")


#: RULED_DTYPES as reasons: test_refusals.py takes each through every route (one check a route),
#: test_cuda_refusals.py each over CUDA memory
DTYPE_REASONS = tuple(
    _r("dtype-%d-%d-%d" % t, ruled_clause(t), "valid", "read" if ruled_clause(t) == "VER-09" else "refuse", "both",
       dtype=t, shape=(4,), buffer_size=64) for t in RULED_DTYPES)
#: the reasons by id: a test takes the id (a literal its reproducer can pass)
REASON = {r.id: r for r in REASONS + DTYPE_REASONS}
