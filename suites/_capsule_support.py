"""Private helpers of test_capsule, test_versioning, test_flags and test_errors.

Nothing here decides a verdict: the helpers build tensors, producers and reproducer lines,
and observe (capsule names, name pointers, deleter counts, who called what). The tests
decide, clause by clause.
"""
import ctypes
import gc
import os
import subprocess
import sys

from dlconform import HARNESS_DIR, _probe
from dlconform.producers import CopyingProducer, RecordingProducer, StreamDeviceProducer, forges  # noqa: F401 (re-exported)
from dlconform.verdicts import Unsupported

LEGACY = "dltensor"
VERSIONED = "dltensor_versioned"
USED_LEGACY = "used_dltensor"
USED_VERSIONED = "used_dltensor_versioned"
USED_NAMES = (USED_LEGACY, USED_VERSIONED)

FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_SUBBYTE_PADDED = 1 << 2
DEFINED_FLAGS = FLAG_READ_ONLY | FLAG_IS_COPIED | FLAG_SUBBYTE_PADDED

#: the newest DLPack version the suite knows (dlpack.h v1.3)
SUITE_VERSION = (1, 3)
#: max_version values a consumer at DLPack 1.x may pass
MAX_VERSIONS = ((1, 0), (1, 3), (1, 99), (2, 0), (99, 99))

_ITEMSIZE = {
    "bool": 1, "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "complex32": 4, "complex64": 8, "complex128": 16,
}

# Objects that must never be deallocated (a struct we could not give back safely, e.g. after a
# destructor already freed it): an extra reference keeps them alive past interpreter exit.
_PINNED = []


def pin_forever(obj):
    """Keeps obj alive for the life of the process, also through module teardown."""
    _PINNED.append(obj)
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(obj))


def _ref():
    from dlconform import _ref as ref

    return ref


def failed_so_far(check):
    return any(v != "pass" for _, v, _ in check.records)


def repro_unless_failed(check, lines):
    """Sets the reproducer, but keeps the one of the first case that did not pass."""
    if not failed_so_far(check):
        check.repro(lines)


def settle():
    gc.collect()
    gc.collect()


# ---------------------------------------------------------------------------- values
def itemsize(dtype):
    if dtype in _ITEMSIZE:
        return _ITEMSIZE[dtype]
    if dtype.startswith(("float8", "float6", "float4")):
        return 1  # fp8, and sub-byte types padded to one byte per element (FLG-06)
    raise KeyError(dtype)


def numel(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def values_for(dtype, shape, seed=0):
    """Logical row-major element bytes: bool 0/1, anything else bytes with the top two bits
    clear (no NaN or infinity patterns in any float format)."""
    n = numel(shape) * itemsize(dtype)
    if dtype == "bool":
        return bytes((i + seed) % 2 for i in range(n))
    return bytes(((i + seed) * 37 + 11) & 0x3F for i in range(n))


def pick_dtypes(target, wanted=("float32", "int64", "uint8", "complex64", "float16", "int8")):
    have = set(target.dtypes())
    out = [d for d in wanted if d in have]
    if not out:
        raise Unsupported("target %s offers none of the dtypes %s" % (target.name, ", ".join(wanted)))
    return out


def make(target, dtype="float32", shape=(2, 3), var="x", seed=0):
    """(native tensor, its values, reproducer lines that build it as `var`)."""
    if dtype not in target.dtypes():
        raise Unsupported("target %s cannot make %s tensors" % (target.name, dtype))
    values = values_for(dtype, shape, seed)
    x = target.make(dtype, shape, values)
    return x, values, list(target.repro_make(dtype, shape, values, var))


def native_ptr(target, x):
    """Address of x's first element, or None when the adapter cannot tell."""
    try:
        return int(target.describe(x)["ptr"])
    except Exception:
        return None


def readonly_line(target, src="x", var="ro"):
    """A reproducer line that builds a read-only tensor like target.readonly(src)."""
    lib = getattr(target, "library", None)
    if lib == "dlconform._ref":
        return "%s = _ref.Tensor(%s.dtype, %s.shape, data=%s.tobytes(), readonly=True)" % (var, src, src, src)
    if lib == "numpy":
        return "%s = %s.view(); %s.setflags(write=False)" % (var, src, var)
    return "%s = %s  # a read-only view of %s: target.readonly(%s)" % (var, src, src, src)


def setup_lines(target, *extra):
    lines = list(target.repro_setup())
    lines += ["import gc", "from dlconform import _probe, _ref"]
    lines += list(extra)
    return lines


# ---------------------------------------------------------------------------- capsules
def is_capsule(obj):
    t = type(obj)
    return t.__name__ == "PyCapsule" and t.__module__ == "builtins"


_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_void_p
_get_name.argtypes = [ctypes.py_object]


def name_pointer(capsule):
    """The address of the capsule's name string (PyCapsule_GetName); 0 for a NULL name."""
    return _get_name(capsule) or 0


def mapping_of(address):
    """('file', path) / ('heap', '[heap]') / ('anon', label) for the mapping that holds
    `address`, from /proc/self/maps; None when that cannot be read or nothing matches."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split(None, 5)
        if not parts:
            continue
        lo, hi = (int(v, 16) for v in parts[0].split("-"))
        if lo <= address < hi:
            path = parts[5].strip() if len(parts) > 5 else ""
            if path.startswith("/"):
                return ("file", path)
            if path == "[heap]":
                return ("heap", path)
            return ("anon", path or "anonymous mapping")
    return None


def static_name_verdict(pointers):
    """(verdict, message) for CAP-09 from the name pointers of several capsules of one kind."""
    where = [mapping_of(p) for p in pointers]
    if any(w is None for w in where):
        return "unsupported", "cannot map name pointers through /proc/self/maps on this system"
    if all(w[0] == "file" for w in where):
        return "pass", "name strings at %s in %s" % (
            ", ".join(hex(p) for p in sorted(set(pointers))), ", ".join(sorted({w[1] for w in where})))
    kinds = ", ".join("%s in %s" % (hex(p), w[1]) for p, w in zip(pointers, where))
    if len(set(pointers)) > 1:
        return "fail", ("capsule names are allocated per capsule (%s): a name string must be statically "
                        "allocated and outlive every capsule" % kinds)
    return "warn", ("the capsule name lives in dynamically allocated memory (%s), though one string is "
                    "shared; static storage is required" % kinds)


def export_legacy(x):
    return x.__dlpack__()


def keyword_rejected(exc, keyword):
    """True when a TypeError says the keyword is unknown (an old, pre-2023.12 producer)."""
    if not isinstance(exc, TypeError):
        return False
    text = str(exc)
    return keyword in text or "keyword" in text


def export_versioned(x, max_version=SUITE_VERSION, **kw):
    """x.__dlpack__(max_version=...): Unsupported when the producer predates the keyword."""
    try:
        return x.__dlpack__(max_version=max_version, **kw)
    except TypeError as e:
        if keyword_rejected(e, "max_version"):
            raise Unsupported("legacy-only producer: __dlpack__ rejects max_version (%s: %s); it predates "
                              "DLPack 1.0 / array API 2023.12" % (type(e).__name__, e))
        raise


def producer_is_legacy_only(x):
    try:
        cap = x.__dlpack__(max_version=SUITE_VERSION)
    except TypeError as e:
        if keyword_rejected(e, "max_version"):
            return True
        raise
    del cap
    return False


def versioned_with_flags(x, **kw):
    """A versioned capsule of x with its inspect() dict; Unsupported for legacy-only producers
    and when the producer returned a legacy capsule anyway."""
    cap = export_versioned(x, **kw)
    info = _probe.inspect(cap)
    if info["kind"] != "versioned":
        raise Unsupported("the producer returned a %r capsule for max_version=%r" % (info["name"], SUITE_VERSION))
    if not info.get("readable", True):
        raise Unsupported("the versioned capsule carries version %r: its fields are not read (VER-07)"
                          % (info.get("version"),))
    return cap, info


# ---------------------------------------------------------------------------- offsets
# ABI of dlpack.h (checked by probes/abi.h): the DLTensor is 48 bytes; DLManagedTensor =
# {DLTensor, manager_ctx, deleter}; DLManagedTensorVersioned = {version, manager_ctx, deleter,
# flags, DLTensor}.
def deleter_offset(kind):
    return {"legacy": 56, "versioned": 16}[kind]


def read_word(address):
    return ctypes.c_void_p.from_address(address).value or 0


def write_word(address, value):
    ctypes.c_void_p.from_address(address).value = value or None


# ---------------------------------------------------------------------------- producers
class CapsuleProducer:
    """A Python producer that hands out a capsule it was given (not the library's own type).
    Records the calls like RecordingProducer."""

    def __init__(self, capsule, device=(1, 0)):
        self.capsule = capsule
        self.device = tuple(device)
        self.calls = []
        self.events = []

    def __dlpack_device__(self):
        self.events.append("__dlpack_device__")
        return self.device

    def __dlpack__(self, *args, **kw):
        self.events.append("__dlpack__")
        rec = dict(kw)
        if args:
            rec["args"] = args
        self.calls.append(rec)
        return self.capsule


class Keep(RecordingProducer):
    """RecordingProducer that also keeps every capsule it hands out in `.capsules`."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        if not hasattr(self, "capsules"):
            self.capsules = []

    def __dlpack__(self, *a, **kw):
        cap = super().__dlpack__(*a, **kw)
        if not any(c is cap for c in self.capsules):
            self.capsules.append(cap)
        return cap


def held_elsewhere(caps):
    """For each object of the list `caps` (the only reference the caller keeps to each), whether
    something else holds it too: after an import, the consumer's result keeping the capsule.
    Measured against a control object referenced the same way (one list, one local)."""
    ctl = object()
    pool = [ctl] + list(caps)
    counts = [sys.getrefcount(o) for o in pool]
    del pool
    return [n > counts[0] for n in counts[1:]]


def drop_capsules(p, imported):
    """Lets go of the capsules a producer handed out; call it while the imported result is still
    alive, so the deleter accounting that follows sees what really happens. A capsule the
    consumer renamed used_* is inert. One it did not rename (CAP-03) after a successful import:
    - held by the consumer (its result keeps the capsule, whose destructor then runs the deleter
      when the result dies: the consumer's ownership goes through the producer's destructor) is
      let go, so OWN-03 judges what the consumer really does;
    - not held: kept alive for the life of the process. Its destructor would run the deleter
      behind the consumer's back, which is the consequence of the CAP-03 breach reported there,
      not a second fault; the consumer's own deleter calls are then counted alone.
    Returns [(name, held)] of the capsules."""
    caps = list(getattr(p, "capsules", []))
    if hasattr(p, "capsules"):
        p.capsules.clear()
    names = [_probe.inspect(c)["name"] for c in caps]
    held = held_elsewhere(caps)
    if imported:
        for c, name, h in zip(caps, names, held):
            if name not in USED_NAMES and not h:
                pin_forever(c)
    del caps
    return list(zip(names, held))


def lifetime(p, box):
    """The ownership of a successful import: box = [result] (emptied here, so the result dies).
    Lets go of p's kept capsules while the result lives (drop_capsules), then counts the deleter
    calls of p's forges while it lives and after it died. Returns {"names", "held", "renamed",
    "alive", "after"}."""
    fs = list(p.forges.values())
    kept = drop_capsules(p, imported=True)
    settle()
    alive = sum(f.deleter_calls for f in fs)
    box.clear()
    settle()
    after = sum(f.deleter_calls for f in fs)
    names = [n for n, _ in kept]
    return {"names": names, "held": [h for _, h in kept], "renamed": bool(names) and all(n in USED_NAMES for n in names),
            "alive": alive, "after": after}


_PLAIN_LIFETIME = {}


def plain_lifetime(target):
    """lifetime() of a plain import (a valid float32 (2, 3) capsule of the kind the consumer
    asks for), cached per target; None when the consumer refuses it. What the consumer does with
    every capsule: checks of other clauses report only departures from it, the rest being its
    CAP-03/OWN-03 behaviour, judged there."""
    key = target.name
    if key not in _PLAIN_LIFETIME:
        p = Keep(forges(shape=(2, 3)))
        y, exc = try_import(target, p)
        if exc is not None:
            drop_capsules(p, imported=False)
            _PLAIN_LIFETIME[key] = None
        else:
            box = [y]
            del y
            _PLAIN_LIFETIME[key] = lifetime(p, box)
        settle()
    return _PLAIN_LIFETIME[key]


def lifetime_departures(obs, plain, what=""):
    """Messages for each way the observed lifetime `obs` departs from a correct import (renamed
    used_*, no deleter call while the result lives, exactly one after) that the consumer's plain
    import does not share (a shared departure is one CAP-03/OWN-03 fault, reported there)."""
    want = {"renamed": True, "alive": 0, "after": 1}
    text = {"renamed": "capsule renamed used_* after import", "alive": "deleter calls while the result is alive",
            "after": "deleter calls after the result died"}
    out = []
    for k in ("renamed", "alive", "after"):
        if obs[k] == want[k] or (plain is not None and plain[k] == obs[k]):
            continue
        got = obs["names"] if k == "renamed" else obs[k]
        out.append("%s%s: got %r, expected %r%s" % (what, text[k], got, want[k] if k != "renamed" else "used_*",
                                                     "" if plain is None else " (a plain import: %r)"
                                                     % (plain["names"] if k == "renamed" else plain[k])))
    return out


class ProducerError(Exception):
    """Raised by RaisingProducer: from_dlpack must let it through unchanged (ERR-02)."""


class ProducerBufferError(BufferError):
    """A BufferError subclass raised by RaisingProducer (ERR-02)."""


class RaisingProducer:
    """Raises `exc` from __dlpack__ or __dlpack_device__ (`where`); the other method works."""

    def __init__(self, exc, where, capsule_factory=None):
        self.exc = exc
        self.where = where
        self.events = []
        self._factory = capsule_factory

    def __dlpack_device__(self):
        self.events.append("__dlpack_device__")
        if self.where == "__dlpack_device__":
            raise self.exc
        return (1, 0)

    def __dlpack__(self, **kw):
        self.events.append("__dlpack__")
        if self.where == "__dlpack__":
            raise self.exc
        return self._factory()


class NoDLPack:
    """An object with neither DLPack method (API-06, ERR-03)."""

    def __repr__(self):
        return "NoDLPack()"


class DeviceOnly:
    """An object with __dlpack_device__ but no __dlpack__."""

    def __dlpack_device__(self):
        return (1, 0)


# ---------------------------------------------------------------------------- consumers
def try_import(target, obj, **kw):
    """(result, exception) of target.from_dlpack(obj)."""
    try:
        return target.from_dlpack(obj, **kw), None
    except Exception as e:  # noqa: BLE001 - the tests classify it
        # drop the frames: a consumer's Python frames may hold the capsule, which must die
        # for the deleter accounting
        seen = set()
        cur = e
        while cur is not None and id(cur) not in seen:
            seen.add(id(cur))
            cur.__traceback__ = None
            cur = cur.__context__
        return None, e


def missing_methods_verdict(obj, y, exc):
    """(verdict, message) of from_dlpack(obj) for an obj without the DLPack methods (API-06,
    ERR-03): AttributeError passes; another ordinary exception is warn, because the array API
    phrases the exception types of a Raises section as a should (design_topics/exceptions.rst)
    and the design topic says from_dlpack "may raise" AttributeError; a result or a SystemError
    is fail."""
    if exc is None:
        return "fail", "from_dlpack(%r) returned %s" % (obj, type(y).__name__)
    if isinstance(exc, AttributeError):
        return "pass", ""
    if isinstance(exc, SystemError):
        return "fail", "from_dlpack(%r) raised %s" % (obj, describe_exc(exc))
    return "warn", ("from_dlpack(%r) raised %s; the from_dlpack Raises section names AttributeError, a should "
                    "for exception types in the array API (design_topics/exceptions.rst)" % (obj, describe_exc(exc)))


def describe_exc(e):
    return "%s: %s" % (type(e).__name__, str(e).splitlines()[0] if str(e) else "")


def result_elements(target, y):
    """(logical row-major element bytes of consumer result y, its describe() dict)."""
    d = target.describe(y)
    return _probe.gather(d["ptr"], tuple(d["shape"]), tuple(d["strides"]), d["itemsize"]), d


def result_device(y):
    """y.__dlpack_device__() as (int, int), or None when y has no such method."""
    m = getattr(y, "__dlpack_device__", None)
    if m is None:
        return None
    try:
        dev = m()
        return (int(dev[0]), int(dev[1]))
    except Exception:
        return None


def result_dtype(target, y):
    """The dtype the consumer's result holds, as target.describe() reports it under "dtype": a
    (code, bits, lanes) tuple, "bytes" for untyped memory (a byte buffer that keeps no element
    type), or None when the adapter does not say (a typed result of a library's own dtype)."""
    try:
        v = target.describe(y).get("dtype")
    except Exception:  # noqa: BLE001 - an adapter that cannot describe says nothing
        return None
    return tuple(v) if isinstance(v, (tuple, list)) else v


def unknown_dtype_reading(target, y, forged, expected):
    """How a result imported from a capsule of a dtype the consumer cannot know (`forged`, with
    element bytes `expected`) holds it: (misread, how). Carrying the dtype unchanged, or keeping
    untyped bytes, over the same bytes reads nothing into the unknown value; any other dtype, a
    typed result the adapter cannot name, or other bytes is a misread."""
    held = result_dtype(target, y)
    if held is None:
        return True, "imported as a typed result (the library's own dtype, which cannot be %r)" % (forged,)
    if held != "bytes" and held != tuple(forged):
        return True, "imported as dtype %r" % (held,)
    try:
        got, _ = result_elements(target, y)
    except Exception as e:  # noqa: BLE001
        return True, "imported, but its bytes cannot be read (%s)" % describe_exc(e)
    if got != expected:
        return True, "imported with other bytes (%s, expected %s)" % (got[:16].hex(), expected[:16].hex())
    if held == "bytes":
        return False, "imported as untyped bytes (the dtype is not kept)"
    return False, "imported carrying dtype %r unchanged" % (held,)


def unknown_device_reading(y, forged):
    """(misread, how) for a result imported from memory of a device type the consumer cannot
    know: a result on another device misreads it; one with no device at all (a bare address) or
    on the same device carries it."""
    dev = result_device(y)
    if dev is None:
        return False, "imported as memory with no device attached (a bare address)"
    if dev == tuple(forged):
        return False, "imported carrying device %r unchanged" % (dev,)
    return True, "imported as memory of device %r" % (dev,)


_CONSUMER_VERSIONED = {}


def consumer_max_versions(target):
    """The max_version values the consumer passes on a plain import (cached per target)."""
    key = target.name
    if key not in _CONSUMER_VERSIONED:
        p = Keep(forges(shape=(2,)))
        y, exc = try_import(target, p)
        drop_capsules(p, imported=exc is None)
        del y
        settle()
        _CONSUMER_VERSIONED[key] = ([c.get("max_version") for c in p.calls], exc)
    return _CONSUMER_VERSIONED[key]


def consumer_takes_versioned(target):
    seen, _ = consumer_max_versions(target)
    return any(isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], int) and m[0] >= 1 for m in seen)


def require_versioned_consumer(target):
    if not consumer_takes_versioned(target):
        seen, exc = consumer_max_versions(target)
        how = "it passed %s" % (seen,) if seen else "it never called __dlpack__"
        if exc is not None:
            how += " and the import raised %s" % describe_exc(exc)
        raise Unsupported("consumer does not ask for versioned capsules (no max_version >= (1, 0); %s): it "
                          "imports legacy DLManagedTensor only (array API: consumers may delay using "
                          "max_version)" % how)


def consumer_expr(target, arg="p"):
    """A Python expression that imports `arg` with the target's from_dlpack."""
    hook = getattr(target, "repro_from_dlpack", None)
    if callable(hook):
        return hook(arg)
    lib = getattr(target, "library", None) or target.name
    if lib == "dlconform._ref":
        return "_ref.from_dlpack(%s)" % arg
    if lib == "numpy":
        return "np.from_dlpack(%s)" % arg
    if lib == "torch":
        return "torch.utils.dlpack.from_dlpack(%s)" % arg
    return "__import__('importlib').import_module(%r).from_dlpack(%s)" % (lib, arg)


def forge_repr(kw):
    return "_ref.Forge(%s)" % ", ".join("%s=%r" % (k, v) for k, v in kw.items())


# ---------------------------------------------------------------------------- subprocess
def run_snippet(text, timeout=60):
    """Runs a reproducer snippet in a fresh interpreter: (returncode, stdout, stderr).
    A negative returncode is the signal that killed it."""
    env = dict(os.environ)
    env["PYTHONPATH"] = HARNESS_DIR + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    p = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, timeout=timeout, env=env,
                       cwd=os.path.dirname(HARNESS_DIR))
    return p.returncode, p.stdout, p.stderr


class UnraisableCapture:
    """Context manager collecting sys.unraisablehook calls."""

    def __enter__(self):
        self.seen = []
        self._old = sys.unraisablehook
        # never keep u.object: it is the capsule being deallocated
        sys.unraisablehook = lambda u: self.seen.append((u.exc_type, str(u.exc_value)))
        return self

    def __exit__(self, *exc):
        sys.unraisablehook = self._old
        return False


# ---------------------------------------------------------------------------- streams, devices
CUDA_PROBE = os.path.join(os.path.dirname(HARNESS_DIR), "build", "cuda", "stream_probe")


def no_stream_device_reason():
    """Why the producer-side stream checks cannot run for a target without a stream device:
    the answer of probes/cuda's stream_probe when `make cuda` built it, else that it is absent."""
    if os.access(CUDA_PROBE, os.X_OK):
        try:
            p = subprocess.run([CUDA_PROBE], capture_output=True, text=True, timeout=60)
            said = (p.stdout.strip().splitlines() or ["exit status %d" % p.returncode])[-1]
        except (OSError, subprocess.TimeoutExpired) as e:
            said = "the probe did not run (%s)" % e
    else:
        said = "probes/cuda not built (make cuda needs nvcc)"
    return ("needs a GPU or another device with streams; the target offers none here (%s)" % said)


def stream_calls(p):
    """[(stream value or None when absent, dl_device or None)] of a recording producer's calls."""
    return [(c.get("stream"), c.get("dl_device")) for c in p.calls]


def device_tuple(d):
    return None if d is None else tuple(int(v) for v in d)
