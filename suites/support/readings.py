"""Catalogue readings that decide a verdict or a misreading from what a check observed. Each
returns a (verdict, message) or (misread, how) pair for the test to record; the readings
themselves are in suites/clauses.json. `CombinationTable` records what a table of keyword
combinations found, per clause, the first few messages of each."""
from dlconform import kit
from dlconform.kit import breach

from . import seedrules as sr
from .attempts import describe_exc

#: the sentence of each clause whose own words say a producer refuses an argument, quoted by
#: check.must_refuse (suites/README.md, Grading)
REFUSAL_RULES = {
    "STR-10": "\"On CPU and other device types without streams, only None is accepted\" (array API, __dlpack__)",
    "STR-02": "stream is \"an integer\" or None; a value of any other type is an error (array API, __dlpack__)",
    "DEV-05": "\"BufferError\" is what a producer raises for a dl_device it cannot serve; a dl_device that names "
              "no device cannot be served (array API, __dlpack__)",
}


#: what 0 calls of an unconsumed capsule's deleter mean (CAP-05): the count is of calls through
#: the struct's `deleter` field, the one the spec's example destructor calls
UNCALLED_DELETER = ("0: the tensor leaks, or the destructor frees it without calling the struct's deleter, "
                    "which CAP-05 asks it to run")


def copy_refused(exc):
    """(verdict, message) of a producer that refuses copy=True with BufferError: CPY-01 says
    it must copy, ERR-01 lets __dlpack__ raise BufferError for an export it cannot make, so a
    producer that cannot copy at all sits between the two (warn); any other exception fails."""
    if isinstance(exc, BufferError):
        return "warn", ("copy=True raised %s: CPY-01 requires a copy, ERR-01 allows BufferError for an export the "
                        "producer cannot make (reading: a producer that cannot copy at all)" % describe_exc(exc))
    return "fail", "copy=True raised %s" % describe_exc(exc)


def strides_in_bytes(info):
    """Whether an export's strides (a kit.inspect() dict) count bytes (LAY-05): divided by the
    item size they lay the shape out compactly (row-major in some order of the dimensions of
    extent > 1), which they themselves do not. False where nothing tells (no strides, items of
    one byte, no dimension of extent > 1)."""
    strides, shape = info.get("strides"), tuple(info.get("shape") or ())
    size = kit.abi.itemsize(tuple(info["dtype"])) if info.get("dtype") else 0
    if strides is None or size <= 1 or not any(n > 1 for n in shape):
        return False

    def compact(steps):
        step = 1
        for s, n in sorted((s, n) for s, n in zip(steps, shape) if n > 1):
            if s != step:
                return False
            step *= n
        return True

    return (all(s % size == 0 for s in strides) and compact([s // size for s in strides])
            and not compact(strides))


def copy_values(check, clause, cap, expected, what, plain=None):
    """`clause` on the values of an export that is a copy: `expected`. The layout the copy
    describes is the layout checks' to judge on every export (LAY-05, LAY-09, LAY-10), not the
    copy's clause: where it cannot be read (kit.read_elements: ValueError), or where the copy
    reads as the library's plain export of the same tensor does (plain(): that capsule), both
    wrong alike, the copy's values are unsupported here. A copy whose strides look counted in
    bytes (strides_in_bytes) is read that way first, within the compact extent the reading
    gives: holding `expected` so, it is LAY-05's finding (read as elements, its strides would
    reach past the copy's memory); otherwise it is read as it says."""
    info = kit.inspect(cap)
    if info.get("readable", True) and info.get("data") and strides_in_bytes(info):
        size = kit.abi.itemsize(tuple(info["dtype"]))
        steps = tuple(s // size for s in info["strides"])
        if kit.gather(info["data"] + info["byte_offset"], tuple(info["shape"]), steps, size) == expected:
            check.record("LAY-05", "fail", "%s: the copy's strides %r count bytes: as element strides %r they read "
                         "the tensor's values" % (what, tuple(info["strides"]), steps))
            check.record(clause, "unsupported", "%s: its strides count bytes (LAY-05's finding)" % what)
            return
    try:
        got = kit.read_elements(cap)
    except ValueError as e:
        check.record(clause, "unsupported", "%s: the copy's values cannot be read (%s); its layout is the layout "
                     "checks' to judge" % (what, e))
        return
    if got != expected and plain is not None:
        try:
            alike = kit.read_elements(plain()) == got
        except Exception:  # noqa: BLE001 - no plain export to compare with: the copy is judged alone
            alike = False
        if alike:
            check.record(clause, "unsupported", "%s: the copy reads as the plain export of the tensor does (%s, "
                         "expected %s): the layout both describe is the layout checks' to judge"
                         % (what, got[:16].hex(), expected[:16].hex()))
            return
    check.equal(got, expected, clause, what)


class NoDLPack:
    """An object with neither DLPack method (API-06, ERR-03)."""

    def __repr__(self):
        return "NoDLPack()"


class DeviceOnly:
    """An object with __dlpack_device__ but no __dlpack__ (ERR-03)."""

    def __dlpack_device__(self):
        return (1, 0)


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
    # one string shared by every capsule, never freed while they live: what a pure-Python
    # library has (a bytes constant); the rule's point, a name outliving its capsules, holds
    # (the catalogue's reading of CAP-09)
    return "pass", ("one shared name string at %s, outside the static storage of a shared object: a "
                    "process-lifetime string serves CAP-09's purpose (the catalogue's reading)" % kinds)


def unknown_dtype_reading(target, y, forged, expected, read=None, describe=None):
    """How a result imported from a capsule of a dtype the consumer cannot know (`forged`, with
    element bytes `expected`) holds it: (misread, how); seedrules.unknown_dtype_reading over the
    target's describe() (or `describe`, and `read`, for a result in device memory)."""
    return sr.unknown_dtype_reading(describe or target.describe, y, forged, expected, read)


unknown_device_reading = sr.unknown_device_reading


def unknown_value_verdict(target, att, what, dtype=None, device=None, device_reader=None):
    """(verdict, message) of an attempt that imported a capsule carrying a dtype code (`dtype`)
    or a device type (`device`) the consumer cannot know: fail when the result misreads it, warn
    when it carries it unread (the header calls a tensor usable only when the consumer can
    interpret every field: the catalogue's reading of VER-09). A result in device memory comes
    with `device_reader`, (its expected bytes, read(y), describe(y))."""
    if dtype is not None and device_reader is not None:
        expected, read, describe = device_reader
        misread, how = unknown_dtype_reading(target, att.result, dtype, expected, read, describe)
    elif dtype is not None:
        misread, how = unknown_dtype_reading(target, att.result, dtype, att.forge.expected_elements())
    else:
        misread, how = unknown_device_reading(att.result, device)
    if misread:
        return "fail", "%s: %s" % (what, how)
    return "warn", ("%s: %s; not misread, but the header calls a tensor usable only when the consumer can interpret "
                    "every field" % (what, how))


#: messages kept per clause: a table of combinations repeats one fault many times
MAX_MESSAGES = 3


class CombinationTable:
    """The combinations' findings per clause, the first few messages of each."""

    def __init__(self, check, target):
        self.check, self.target = check, target
        self.found = {}
        self.reached = set()

    def add(self, clause, verdict, message):
        """Records `verdict`; "accepted" is check.accepted()'s verdict (the test's feeds), a
        sentence of REFUSAL_RULES is check.must_refuse()'s (the clause's breach)."""
        msgs = self.found.setdefault(clause, [])
        rule = verdict in REFUSAL_RULES.values()
        msgs.append(breach(self.check.level(clause)) if rule else
                    "warn" if verdict == "accepted" and self.check.feeds != "valid" else verdict)
        if len(msgs) > MAX_MESSAGES:
            return
        if rule:
            self.check.must_refuse(clause, message, verdict)
        elif verdict == "accepted":
            self.check.accepted(clause, message)
        else:
            self.check.record(clause, verdict, message)

    def close(self, clauses):
        """pass for each clause some combination reached, unsupported for the rest."""
        for clause in clauses:
            n = len(self.found.get(clause, ()))
            if n > MAX_MESSAGES:
                self.check.record(clause, self.found[clause][-1], "... and %d more combinations" % (n - MAX_MESSAGES))
            if clause in self.reached or n:
                self.check.record(clause, "pass", "")
            else:
                self.check.record(clause, "unsupported", "no combination reached it: the producer takes none of the "
                                  "keywords it needs (a legacy-only producer is asked with stream alone)")
