"""CAP (the PyCapsule protocol) and API (method and function signatures).

Producer checks export the target's own tensors and look at the capsules with the kit
without consuming them (or consume them through `kit.consume`, which owns the tensor and
gives it back). Consumer checks hand `from_dlpack` forged capsules through Python producers
and count the forge's deleter calls.
"""
import ctypes
import sys

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import readings as rd
from support import repros as rp
from support import tensors as tns
from support.marks import consumer, producer


def _views(target, x):
    """[(label, native view)] of a 2-d tensor: itself, transposed, sliced, flipped, when
    offered."""
    return [("x", x)] + tns.views(target, x, (("x.T", ("transpose", (1, 0))), ("x[:, ::2]", ("slice", 1, 0, None, 2)),
                                              ("flip(x, 0)", ("flip", 0))))


# ============================================================================ producer: names
def _check_names(target, check, clause, kind):
    """Exports of `kind` (legacy or versioned) of a few dtypes, each tensor and its views: a
    PyCapsule of the kind's name whose managed struct describes the tensor's elements."""
    want = pycap.NAMES[kind]
    for dtype in dty.pick(target)[:4]:
        x, values = tns.make(target, dtype, (2, 3))
        for label, v in _views(target, x):
            cap = v.__dlpack__() if kind == "legacy" else pycap.export_versioned(v)
            if not check.that(pycap.is_capsule(cap), clause, "%s %s: the %s export is a %s, not a PyCapsule"
                              % (dtype, label, kind, type(cap).__name__)):
                continue
            info = kit.inspect(cap)
            if kind == "legacy" and info["name"] == pycap.VERSIONED:
                check.not_reached(clause, "%s %s: __dlpack__() without max_version handed out a versioned capsule, "
                                          "named as one: VER-02's finding (test_versioning.py), not a misnamed "
                                          "legacy capsule" % (dtype, label))
                continue
            check.equal(info["name"], want, clause, "%s %s: %s capsule name" % (dtype, label, kind))
            # an export whose layout does not describe the tensor is the layout checks' finding
            # (LAY-03, LAY-05, LAY-09): its elements say nothing of the name
            if info["name"] == want and info.get("readable") and not tns.compare_layout(
                    target, v, info, dty.itemsize(dtype)):
                check.equal(kit.read_elements(cap), target.expected(v), clause, "%s %s: elements read through the %s"
                            % (dtype, label, "DLManagedTensor" if kind == "legacy" else "DLManagedTensorVersioned"))
            del cap


@producer("CAP-01")
def test_legacy_capsule_named_dltensor(target, check):
    """A legacy export (no max_version) is a PyCapsule named exactly "dltensor" whose pointer is
    a DLManagedTensor describing the tensor's elements."""
    _check_names(target, check, "CAP-01", "legacy")


@producer("CAP-02")
def test_versioned_capsule_named_dltensor_versioned(target, check):
    """With max_version >= (1, 0) the capsule is named "dltensor_versioned" and holds a
    DLManagedTensorVersioned."""
    _check_names(target, check, "CAP-02", "versioned")


# ============================================================================ producer: lifetime
@producer("CAP-04")
def test_each_export_is_a_fresh_capsule(target, check):
    """A capsule is consumed once, so after one capsule was consumed the next __dlpack__ call must
    hand out a new, unconsumed capsule, itself consumable."""
    x, values = tns.make(target)
    for kind, export in pycap.readable_exports(target, x):
        cap1 = export()
        h1 = kit.consume(cap1)
        cap2 = export()
        check.that(cap2 is not cap1, "CAP-04", "%s: __dlpack__ returned the capsule it handed out before" % kind)
        name = kit.inspect(cap2)["name"]
        if check.that(name in (pycap.LEGACY, pycap.VERSIONED), "CAP-04",
                      "%s: the second export is named %r after the first was consumed" % (kind, name)):
            info = kit.inspect(cap2)
            h2 = kit.consume(cap2)
            # each export is of a fresh contiguous tensor: element strides other than row-major
            # are the layout checks' finding (LAY-05), and its elements say nothing of CAP-04
            strides = info.get("strides")
            if strides is None or tuple(strides) == dty.row_major_strides(tuple(info.get("shape") or ())):
                check.equal(h2.read_elements(), values, "CAP-04", "%s: elements of the second export" % kind)
            h2.release()
        h1.release()
        # consumed capsules are kept: their destructor is CAP-06's business, not this check's
        kit.keep_forever(cap1)
        kit.keep_forever(cap2)
        del cap1, cap2


@producer("CAP-05")
def test_unconsumed_capsule_calls_deleter(target, check):
    """The capsule destructor calls the deleter when the capsule dies with its unconsumed name."""
    for kind, export, values in pycap.export_cases(target):
        cap = export()
        tracker = kit.instrument(cap)
        del cap
        tries.settle()
        check.equal(tracker.calls, 1, "CAP-05", "%s: calls of the struct's deleter after an unconsumed capsule "
                    "died (%s)" % (kind, rd.UNCALLED_DELETER))


@producer("CAP-06")
def test_used_capsule_destructor_does_nothing(target, check):
    """After a consumer renamed the capsule used_*, the capsule destructor must not call the
    deleter (the consumer owns the tensor and calls it once)."""
    for kind, export, values in pycap.export_cases(target):
        cap = export()
        tracker = kit.instrument(cap)
        handle = kit.consume(cap)
        del cap
        tries.settle()
        if not check.equal(tracker.calls, 0, "CAP-06",
                           "%s: deleter calls made by the destructor of a capsule renamed used_*" % kind):
            kit.keep_forever(handle)  # the destructor already freed it: never release twice
        else:
            check.that(handle.release(), "CAP-06", "%s: the consumer's release found no deleter to call" % kind)
            check.equal(tracker.calls, 1, "CAP-06", "%s: deleter calls after the consumer released" % kind)


def _null_deleter_case(target, check, kind):
    """CAP-07, run in a fresh interpreter: an export of x taken over (consumed), its deleter set
    to NULL and the capsule renamed back to its unconsumed name, then let die; stdout says how
    far it got (BEFORE, AFTER, CAP-07 OK)."""
    x, values = tns.make(target)
    cap = pycap.export_kind(x, kind == "versioned")
    info = kit.inspect(cap)
    handle = kit.consume(cap)  # we own the managed struct now
    slot = info["pointer"] + pycap.deleter_offset(kind)
    orig = ctypes.c_void_p.from_address(slot).value or 0
    if orig != info["deleter"]:
        print("ABI-MISMATCH", hex(orig), hex(info["deleter"]), flush=True)
        raise kit.Unsupported("%s: the managed struct's deleter is not where dlpack.h puts it" % kind)
    ctypes.c_void_p.from_address(slot).value = None  # deleter = NULL
    kit.rename(cap, pycap.NAMES[kind])  # back to the unconsumed name
    print("BEFORE", flush=True)
    del cap
    tries.settle()  # the capsule destructor must skip the NULL deleter
    print("AFTER", flush=True)
    ctypes.c_void_p.from_address(slot).value = orig  # give the tensor back
    handle.release()
    print("CAP-07 OK", flush=True)


@producer("CAP-07")
def test_destructor_skips_null_deleter(target, check):
    """The capsule destructor must skip a NULL deleter. When the producer exports NULL deleters
    itself, its capsules just die; otherwise the deleter is set to NULL in a separate process
    (after taking ownership) and the capsule dies there."""
    for kind, export, values in pycap.export_cases(target):
        cap = export()
        info = kit.inspect(cap)
        del cap
        tries.settle()
        if info["deleter"] == 0:
            check.that(True, "CAP-07")
            continue
        run = rp.run_case(check, target, _null_deleter_case, {"kind": kind})
        mismatch = [line for line in run.out.splitlines() if line.startswith("ABI-MISMATCH")]
        if mismatch:
            raise kit.Unsupported("%s: the managed struct's deleter is not where dlpack.h puts it (%s)"
                                  % (kind, mismatch[-1]))
        if run.rc == 0 and "CAP-07 OK" in run.out:
            check.that(True, "CAP-07")
        elif "BEFORE" in run.out and "AFTER" not in run.out:
            # The destructor dereferenced a NULL deleter. The producer never exports one itself,
            # so only a modified struct reaches this path: report, but not as a MUST breach.
            check.warn("CAP-07", "%s: the capsule destructor calls a NULL deleter (the process died, rc=%s); "
                       "the producer never sets deleter=NULL itself, so this path is reached only through a "
                       "modified struct (CAP-07, python_spec example destructor)" % (kind, run.rc))
        else:
            check.warn("CAP-07", "%s: could not run the NULL-deleter check (%s)" % (kind, run.describe()))


def _wrong_name_case(target, check, kind, wrong):
    """CAP-08, run in a fresh interpreter: an export of x taken over (consumed) and renamed
    `wrong`, a name the capsule destructor cannot get the pointer with, then let die; stdout
    says how far it got (BEFORE, AFTER, CAP-08 OK), a finding what went wrong."""
    x, values = tns.make(target)
    cap = pycap.export_kind(x, kind == "versioned")
    tracker = kit.instrument(cap)
    handle = kit.consume(cap)  # we own the tensor; the capsule is named used_*
    kit.rename(cap, wrong)  # a name the destructor cannot get the pointer with
    print("BEFORE", flush=True)
    leaked = None
    try:
        del cap
        tries.settle()
        len([0])  # an exception left pending by the destructor would surface here as SystemError
    except BaseException as e:  # noqa: BLE001
        leaked = e
    print("AFTER", flush=True)
    if leaked is not None:
        check.that(False, "CAP-08", "%s: an exception escaped the capsule destructor: %s"
                   % (kind, tries.describe_exc(leaked)))
        return
    check.equal(tracker.calls, 0, "CAP-08", "%s: deleter calls by the destructor of a capsule whose pointer it "
                "cannot get" % kind)
    handle.release()
    print("CAP-08 OK", flush=True)


def _dies_in_flight_case(target, check, kind):
    """CAP-08: an export of x that dies while an exception is handled leaves that exception
    alone, and its deleter runs once at most."""
    x, values = tns.make(target)
    cap = pycap.export_kind(x, kind == "versioned")
    tracker = kit.instrument(cap)
    try:
        raise KeyError("in flight")
    except KeyError as e:
        try:
            del cap
            tries.settle()
            current = sys.exc_info()[1]
            leaked = None
        except BaseException as inner:  # noqa: BLE001
            current, leaked = None, inner
        check.that(leaked is None and current is e, "CAP-08",
                   "%s: a capsule dying during exception handling replaced the exception in flight (%s)"
                   % (kind, tries.describe_exc(leaked) if leaked else repr(current)))
    check.that(tracker.calls <= 1, "CAP-08", "%s: %d deleter calls for a capsule that died during exception "
               "handling" % (kind, tracker.calls))


@producer("CAP-08")
def test_destructor_cannot_get_pointer(target, check):
    """A capsule destructor that cannot get the pointer (the capsule carries the other kind's
    used name) reports an unraisable error at most and never lets an exception escape. Runs in a
    separate process: reporting the error with the capsule being deallocated as its object (as
    the python_spec example does) makes CPython deallocate it again and again."""
    for kind, export, values in pycap.export_cases(target):
        wrong = pycap.USED_VERSIONED if kind == "legacy" else pycap.USED_LEGACY
        run = rp.run_case(check, target, _wrong_name_case, {"kind": kind, "wrong": wrong})
        rc, out, err = run.rc, run.out, run.err
        reported = "Exception ignored in" in err
        found = [m for c, m in run.findings if c == "CAP-08"]  # deleter calls, or an escaped exception
        if found:
            check.that(False, "CAP-08", "capsule renamed %s: %s" % (wrong, found[0]))
        elif rc == 0 and "CAP-08 OK" in out:
            check.record("CAP-08", "pass", "%s: %s" % (kind, "reported an unraisable error" if reported
                                                       else "the destructor left the capsule alone"))
        elif "BEFORE" in out and "AFTER" not in out and err.count("Exception ignored in") > 1:
            check.warn("CAP-08", "%s: the destructor reports the unraisable error with the dying capsule as its "
                       "object (PyErr_WriteUnraisable(self), as in the python_spec example); CPython resurrects "
                       "and deallocates it again, recursively, until the process dies (rc=%s). No exception "
                       "escapes; reached only with a capsule renamed to the other kind's used name" % (kind, rc))
        elif "BEFORE" in out and "AFTER" not in out:
            check.that(False, "CAP-08", "%s: the process died (rc=%s) in the destructor of a capsule whose pointer "
                       "it cannot get: %s" % (kind, rc, (err.strip().splitlines() or [""])[-1]))
        else:
            check.warn("CAP-08", "%s: could not run the check (%s)" % (kind, run.describe()))
        # a capsule dying while an exception is handled must leave that exception alone
        check.set_case(_dies_in_flight_case, {"kind": kind})
        _dies_in_flight_case(target, check, kind)


@producer("CAP-09")
def test_producer_capsule_names_static(target, check):
    """Capsule names are statically allocated: every export's name pointer lies in a loaded
    image (not the heap), and stays readable after the tensors are gone."""
    dtypes = dty.pick(target)[:2]
    x1, _ = tns.make(target, dtypes[0], (2, 3))
    x2, _ = tns.make(target, dtypes[-1], (3,), seed=1)
    for kind, _unused in pycap.readable_exports(target, x1):
        caps = [pycap.export_kind(x1, kind == "versioned"), pycap.export_kind(x2, kind == "versioned")]
        expected = pycap.NAMES[kind]
        names = [kit.inspect(c)["name"] for c in caps]
        if names != [expected, expected]:
            raise kit.Unsupported("%s: capsules are named %r (CAP-01/CAP-02), not checking their storage"
                                  % (kind, names))
        verdict, message = rd.static_name_verdict([pycap.name_pointer(c) for c in caps])
        check.record("CAP-09", verdict, "%s: %s" % (kind, message))
    # the names must still read right once the tensors are gone and memory was reused
    caps = [x1.__dlpack__(), x2.__dlpack__()]
    before = [kit.inspect(c)["name"] for c in caps]
    del x1, x2
    tries.settle()
    churn = [bytes(64) + bytes([i & 0xFF]) for i in range(2000)]
    del churn
    for c, name in zip(caps, before):
        check.equal(kit.inspect(c)["name"], name, "CAP-09",
                    "legacy capsule name after the exported tensor was freed and memory reused")


# ============================================================================ producer: API
@producer("API-01")
def test_dlpack_signature_keyword_only(target, check):
    """__dlpack__() and __dlpack__(stream=None) return a PyCapsule; arguments are keyword-only
    (a positional stream is an extension: warn, not fail)."""
    x, values = tns.make(target)
    for call, fn in (("__dlpack__()", lambda: x.__dlpack__()),
                     ("__dlpack__(stream=None)", lambda: x.__dlpack__(stream=None))):
        cap = fn()
        check.that(pycap.is_capsule(cap), "API-01", "%s returned %s, not a PyCapsule" % (call, type(cap).__name__))
        del cap
    try:
        cap = x.__dlpack__(None)
    except TypeError:
        check.that(True, "API-01")
    except SystemError as e:
        check.that(False, "API-01", "__dlpack__(None) raised %s" % tries.describe_exc(e))
    except Exception as e:  # noqa: BLE001
        check.warn("API-01", "__dlpack__(None) (a positional argument) raised %s; the signature is keyword-only, "
                   "so TypeError is the expected error" % tries.describe_exc(e))
    else:
        kind = kit.inspect(cap)["name"] if pycap.is_capsule(cap) else type(cap).__name__
        del cap
        check.warn("API-01", "__dlpack__ accepts a positional argument (__dlpack__(None) returned %s); the array "
                   "API signature is __dlpack__(self, /, *, stream=None, ...): keyword-only. A harmless "
                   "extension for callers using keywords" % kind)


@producer("API-01")
def test_dlpack_2023_keywords(target, check):
    """max_version, dl_device and copy (array API 2023.12) are accepted as keywords with their
    default None, alone and together with stream, and give a PyCapsule."""
    x, values = tns.make(target)
    rejected, accepted = [], []
    for kw in ("max_version", "dl_device", "copy"):
        try:
            cap = x.__dlpack__(**{kw: None})
        except TypeError as e:
            if pycap.keyword_rejected(e, kw):
                rejected.append((kw, e))
                continue
            raise
        accepted.append(kw)
        check.that(pycap.is_capsule(cap), "API-01", "__dlpack__(%s=None) returned %s" % (kw, type(cap).__name__))
        del cap
    if not accepted:
        raise kit.Unsupported("legacy producer (array API 2021.12 signature): __dlpack__ rejects %s (%s)"
                          % (", ".join(k for k, _ in rejected), tries.describe_exc(rejected[0][1])))
    if rejected:
        check.warn("API-01", "__dlpack__ accepts %s but rejects %s: a partial 2023.12 signature"
                   % (", ".join(accepted), ", ".join(k for k, _ in rejected)))
        return
    cap = x.__dlpack__(stream=None, max_version=None, dl_device=None, copy=None)
    check.that(pycap.is_capsule(cap), "API-01", "__dlpack__ with all four keywords None returned %s"
               % type(cap).__name__)


@producer("API-02")
def test_dlpack_device_tuple(target, check):
    """__dlpack_device__() returns a 2-tuple (device_type: int or IntEnum, device_id: int), for
    tensors and their views."""
    x, values = tns.make(target)
    for label, v in _views(target, x):
        d = v.__dlpack_device__()
        ok = (isinstance(d, tuple) and len(d) == 2 and isinstance(d[0], int) and not isinstance(d[0], bool)
              and isinstance(d[1], int) and not isinstance(d[1], bool))
        check.that(ok, "API-02", "%s.__dlpack_device__() returned %r (%s); expected (int, int)"
                   % (label, d, type(d).__name__))


@producer("API-06")
def test_producer_has_both_methods(target, check):
    """An exporting library offers both methods (only a library that can never export omits
    them, and then both)."""
    x, values = tns.make(target)
    for label, v in _views(target, x):
        has = (callable(getattr(v, "__dlpack__", None)), callable(getattr(v, "__dlpack_device__", None)))
        check.that(has == (True, True), "API-06", "%s has __dlpack__=%s, __dlpack_device__=%s" % (label, *has))


# ============================================================================ consumer
def _check_import(target, check, versioned):
    if versioned:
        tries.require_versioned_consumer(target)
    p = kit.RecordingProducer(kit.forges(shape=(2, 3), dtype=(2, 32, 1)), legacy_only=not versioned, keep=True)
    kind = "versioned" if versioned else "legacy"
    att = tries.Attempt(target, p)
    forge = p.forges.get(kind)
    if att.exc is not None and not versioned and tries.skipped_retry(att):
        check.warn("API-03", "import from an old producer (__dlpack__(stream=None) only) failed: the consumer "
                   "passed %r and did not retry without the new keywords (VER-06 SHOULD): %s"
                   % (p.calls[0], tries.describe_exc(att.exc)))
    elif att.exc is not None:
        check.that(False, "API-03", "from_dlpack refused a %s capsule from a foreign producer (calls %r): %s"
                   % (kind, p.calls, tries.describe_exc(att.exc)))
    elif forge is None:
        check.that(False, "API-03", "the producer handed out %s capsules, expected %s" % (p.last_kind, kind))
    if att.exc is not None or forge is None:
        for c in ("API-05", "CAP-03", "SEM-01", "OWN-03"):
            check.record(c, "skip", "not reached (API-03)")
        return
    got, d = tries.result_elements(target, att.result)
    check.equal(got, forge.expected_elements(), "API-03", "%s import: element values" % kind)
    tries.zero_copy(check, target, d["ptr"], forge.buffer_address, "%s import" % kind)
    dev = tries.result_device(att.result)
    check.that(dev in (None, (1, 0)), "API-05", "%s import: result device %r, producer device (1, 0)" % (kind, dev))
    life = att.lifetime()  # the result dies in there
    names, used = life["names"], "used_" + pycap.NAMES[kind]
    check.that(len(names) == 1, "CAP-03", "the consumer asked for %d capsules" % len(names))
    if not (names and names[-1] == used):
        # what the missing rename leads to, told once here (OWN-03 judges the deleter calls)
        held = bool(life["held"]) and life["held"][-1]
        why = ("the result keeps the capsule, so the producer's destructor runs the deleter when the result dies"
               if held else "the result does not keep the capsule: its destructor runs the deleter as soon as the "
               "capsule dies, whatever the consumer does")
        check.record("CAP-03", "fail", "%s capsule after import: %s; a capsule that does not say used_* still "
                     "looks unconsumed, so a second consumer can import the same capsule and the memory has two "
                     "owners (%s)" % (kind, pycap.name_problem(names[-1] if names else None, used), why))
    if not life["copied"]:  # a consumer that copied may give the tensor back at once (Attempt.copied)
        check.equal(life["alive"], 0, "OWN-03", "%s: deleter calls while the result is alive" % kind)
    check.equal(life["after"], 1, "OWN-03", "%s: deleter calls after the result died" % kind)
    tries.settle()
    check.equal(forge.deleter_calls, 1, "OWN-03", "%s: deleter calls after the capsule died too" % kind)


@consumer("API-03", "API-05", "CAP-03", "SEM-01", "OWN-03")
def test_import_legacy_from_foreign_producer(target, check):
    """from_dlpack takes an old-style Python producer (legacy capsule): right values, zero-copy,
    same device, capsule renamed used_dltensor, deleter called once when the result dies."""
    _check_import(target, check, versioned=False)


@consumer("API-03", "API-05", "CAP-03", "SEM-01", "OWN-03")
def test_import_versioned_from_foreign_producer(target, check):
    """The same with a versioned capsule: renamed used_dltensor_versioned."""
    _check_import(target, check, versioned=True)


@consumer("CAP-04")
def test_consumer_refuses_used_capsule(target, check):
    """A capsule already named used_* belongs to another consumer: from_dlpack must refuse it and
    never call its deleter (the owner does, exactly once)."""
    for versioned in [False] + ([True] if tries.consumer_takes_versioned(target) else []):
        tries.used_capsule_refused(check, target, versioned, "versioned" if versioned else "legacy", "CAP-04",
                                   shape=(2, 3))


@consumer("CAP-09")
def test_consumer_used_names_static(target, check):
    """The used_* name a consumer sets is a statically allocated string: it still reads as a name
    after the import (a temporary, freed when from_dlpack returned, holds something else by
    then), and it is one string for every capsule, in static storage."""
    versioned = tries.consumer_takes_versioned(target)
    pointers, names = [], []
    results = []
    for i in range(2):
        att = tries.Attempt(target, kit.RecordingProducer(kit.forges(shape=(3,)), keep=True))
        if att.exc is not None:
            raise kit.Unsupported("the consumer cannot import a plain float32 capsule: %s"
                                  % tries.describe_exc(att.exc))
        results.append(att.result)
        first = [(kit.inspect(c)["name"], pycap.name_pointer(c)) for c in att.producer.capsules]
        att.drop_capsules()
        garbled = [(ptr, name) for name, ptr in first if pycap.garbled_at(ptr)]
        if garbled:
            check.record("CAP-09", "fail", "the name string at %#x that the consumer set on the capsule did not "
                         "outlive it: right after the import it read %r, not a name, the memory holding something "
                         "else by then (a temporary, freed while the capsule lived)" % garbled[0])
            return
        names += [name for name, _ in first]
        pointers += [ptr for _, ptr in first]
    renamed = [ptr for ptr, n in zip(pointers, names) if n in pycap.USED_NAMES]
    if not renamed:
        check.record("CAP-09", "pass", "the consumer did not rename the capsules (names %r; see CAP-03), so it set "
                     "no name string" % names)
        return
    verdict, message = rd.static_name_verdict(renamed)
    check.record("CAP-09", verdict, "%s capsules renamed %s: %s" % ("versioned" if versioned else "legacy",
                                                                    names[0], message))


@consumer("API-04")
def test_consumer_calls_device_first(target, check):
    """from_dlpack calls __dlpack_device__ (to choose stream and device) before __dlpack__.
    Reading: a CPU consumer that skips it loses nothing, so missing or late is warn."""
    p = kit.RecordingProducer(kit.forges(shape=(3,)), keep=True)
    att = tries.Attempt(target, p)
    if att.exc is not None:
        raise kit.Unsupported("the consumer cannot import a plain float32 capsule: %s" % tries.describe_exc(att.exc))
    events = list(p.events)
    att.drop_capsules()
    if "__dlpack_device__" not in events:
        raise kit.Warn("API-04", "from_dlpack never calls __dlpack_device__ (calls: %s); the python spec has consumers "
                   "call it first to pick stream and device" % events)
    if events.index("__dlpack_device__") > events.index("__dlpack__"):
        raise kit.Warn("API-04", "from_dlpack calls __dlpack__ before __dlpack_device__ (calls: %s)" % events)
    check.that(True, "API-04")


@consumer("API-06")
def test_consumer_object_without_methods(target, check):
    """An object of a library that never exports has neither method: from_dlpack raises
    AttributeError. Reading: the design topic says from_dlpack "may raise" it, and the array
    API gives exception types in a Raises section as a should (design_topics/exceptions.rst):
    another ordinary exception is warn; a result or a SystemError is fail."""
    for obj in (rd.NoDLPack(), object()):
        att = tries.Attempt(target, obj)
        verdict, message = rd.missing_methods_verdict(obj, att.result, att.exc)
        check.record("API-06", verdict, message)
