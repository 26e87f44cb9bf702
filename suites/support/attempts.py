"""The consumer side: one import attempt (`Attempt`) and what it shows: the result's bytes,
device and dtype, the exception of a refusal, and the deleter accounting of the capsules its
producer handed out.

Deleter accounting needs a producer that keeps its capsules (RecordingProducer(keep=True)):
the capsules are let go while the result still lives (drop_capsules), then the forges' deleter
calls are counted while the result lives and after it died.
"""
import gc
import sys

from dlconform import kit
from dlconform.kit import RecordingProducer, Unsupported, forges

from . import capsules as pycap
from .dtypes import row_major_strides


def settle():
    gc.collect()
    gc.collect()


def describe_exc(e, limit=None):
    """'Type: first line of the message', the line cut at `limit` characters."""
    return kit.describe(e, limit or 10 ** 9)


class Attempt:
    """One target.from_dlpack(producer, **kw).

    - `.result`: what from_dlpack returned (None when it raised); `.refused`: no result;
    - `.exc`: the exception of a refusal (tracebacks dropped), else None; `.refusal()` says it;
    - `.producer`, and with a RecordingProducer `.forge` (of the kind handed out last) and
      `calls()` (deleter calls of its forges so far);
    - with a producer that keeps its capsules: `drop_capsules()`, `settle()` (capsules, then
      result, gone: the deleter calls in all) and `lifetime()`.
    `forge_kwargs`: the forge keywords of an attempt made by forged().
    """

    def __init__(self, target, producer, **kw):
        self.target = target
        self.producer = producer
        self.forge_kwargs = None
        # a consumer's frames may hold the capsule: attempt() drops the tracebacks
        self.result, self.exc = kit.attempt(lambda: self.import_(target, producer, kw))

    def import_(self, target, producer, kw):
        """The import itself; a subclass hands the consumer something else (routes.py)."""
        return target.from_dlpack(producer, **kw)

    @property
    def refused(self):
        return self.result is None

    @property
    def forge(self):
        p = self.producer
        return p.forges.get(p.last_kind) if p.last_kind else None

    def calls(self):
        return sum(f.deleter_calls for f in self.producer.forges.values())

    def copied(self):
        """Whether the result holds a copy instead of a view of the producer's memory: True when
        its first element lies outside every buffer the forges expose (theirs, or an owner's
        `ptr` and `nbytes`: device memory, cuda.DeviceBuffer), or when it is zero-size (there is
        nothing to view); False when it views one; None when unknown (no result, no buffer to
        compare with, an adapter that cannot describe the result).
        OWN-03 asks for the deleter "when it is done with the data", and a consumer that copied
        is done at once: a deleter call while such a result lives is no breach."""
        if self.result is None:
            return None
        try:
            d = self.target.describe(self.result)
            ptr, shape = int(d["ptr"]), [int(n) for n in d["shape"]]
        except Exception:  # noqa: BLE001 - an adapter that cannot describe the result: unknown
            return None
        if 0 in shape:
            return True
        spans = memory_spans(self.producer.forges.values())
        if not spans:
            return None
        return not any(a <= ptr < a + n for a, n in spans)

    def refusal(self):
        return describe_exc(self.exc, 300) if self.exc is not None else ""

    def drop_capsules(self):
        return drop_capsules(self.producer, imported=not self.refused)

    def settle(self):
        """Drops the kept capsules, then the result; returns the deleter calls afterwards. The
        capsules go first, while the result lives (drop_capsules): one the consumer did not
        rename but keeps then dies with the result, one it neither renamed nor keeps is kept
        alive (its destructor's extra deleter call is the CAP-03 breach's doing)."""
        self.drop_capsules()
        self.result = None
        gc.collect()
        return self.calls()

    def lifetime(self, collect=None):
        """The ownership of a successful import: lets go of the kept capsules while the result
        lives, then counts the deleter calls of the forges while it lives and after it died
        (the attempt's result is dropped here; `collect`, settle() by default, runs after each
        step). Returns {"names", "held", "renamed", "alive", "after", "copied"} (copied(): deleter
        calls while a copy lives are no breach)."""
        collect = collect or settle
        fs = list(self.producer.forges.values())
        copied = self.copied()
        kept = drop_capsules(self.producer, imported=True)
        collect()
        alive = sum(f.deleter_calls for f in fs)
        self.result = None
        collect()
        after = sum(f.deleter_calls for f in fs)
        names = [n for n, _ in kept]
        return {"names": names, "held": [h for _, h in kept],
                "renamed": bool(names) and all(n in pycap.USED_NAMES for n in names), "alive": alive, "after": after,
                "copied": bool(copied)}


def memory_spans(forges):
    """[(address, byte count)] of the memory the forges expose: a buffer of their own, or an
    owner's `ptr` and `nbytes` (device memory: cuda.DeviceBuffer)."""
    forges = list(forges)
    spans = [(f.buffer_address, f.buffer_size) for f in forges
             if getattr(f, "buffer_size", 0) and getattr(f, "buffer_address", None)]
    return spans + [(o.ptr, o.nbytes) for f in forges for o in [getattr(f, "owner", None)]
                    if getattr(o, "ptr", 0) and getattr(o, "nbytes", 0)]


# ---------------------------------------------------------------------------- forged capsules
def valid_kwargs(kw):
    """Forge keywords with explicit row-major strides unless the test gives strides: a
    versioned 1.3 capsule must not have NULL strides for ndim > 0 (LAY-06)."""
    kw = dict(kw)
    if "strides" not in kw:
        shape = tuple(kw.get("shape", (4,)))
        kw["strides"] = row_major_strides(shape) if shape else None
    return kw


def forged(target, forge_kwargs=None, forge=None):
    """The Attempt of a RecordingProducer(keep=True) handing out `kit.Forge(**forge_kwargs)`
    capsules (valid_kwargs), or the capsules of `forge` (any RecordingProducer forge)."""
    kw = valid_kwargs(forge_kwargs or {})
    att = Attempt(target, RecordingProducer(forge if forge is not None else forges(**kw), keep=True))
    att.forge_kwargs = kw
    return att


# ---------------------------------------------------------------------------- the capsules' fate
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
    names = [kit.inspect(c)["name"] for c in caps]
    held = held_elsewhere(caps)
    if imported:
        for c, name, h in zip(caps, names, held):
            if name not in pycap.USED_NAMES and not h:
                kit.keep_forever(c)
    del caps
    return list(zip(names, held))


_PLAIN_LIFETIME = {}


def plain_lifetime(target):
    """lifetime() of a plain import (a valid float32 (2, 3) capsule of the kind the consumer
    asks for), cached per target; None when the consumer refuses it. What the consumer does with
    every capsule: checks of other clauses report only departures from it, the rest being its
    CAP-03/OWN-03 behaviour, judged there."""
    key = target.name
    if key not in _PLAIN_LIFETIME:
        att = Attempt(target, RecordingProducer(forges(shape=(2, 3)), keep=True))
        if att.exc is not None:
            att.drop_capsules()
            _PLAIN_LIFETIME[key] = None
        else:
            _PLAIN_LIFETIME[key] = att.lifetime()
        settle()
    return _PLAIN_LIFETIME[key]


def over_deletes(target):
    """The deleter calls of the consumer's plain import once it died, when more than one (its
    OWN-03 finding), else 0: a check that hands such a consumer a peer library's tensor would
    see the peer's deleter run twice, and die there for the consumer's bug."""
    plain = plain_lifetime(target)
    return plain["after"] if plain is not None and plain["after"] > 1 else 0


def copy_breach(target, copies=None):
    """(verdict, reading) for a consumer result that copied where the producer's memory could be
    viewed (SEM-01; CPY-06 with copy=None): fail when the consumer's plain import views the
    memory (it can view, so the copy is its choice), warn when even that import copies. SEM-01
    asks for a view "whenever it can" and the array API for reuse "if possible": a library whose
    arrays own their memory cannot view, and from outside that is not told apart from one that
    chose to copy. `copies`: whether the plain import copies, where the caller knows (an import
    of device memory); copies_always(target) by default."""
    if copies is None:
        copies = copies_always(target)
    if copies:
        return "warn", (" (ambiguous: this consumer copies every import, even a plain contiguous one; SEM-01 asks "
                        "for a view whenever the library can hold one, and a library whose arrays own their "
                        "memory cannot: read as a library that cannot)")
    return "fail", ""


def copies_always(target):
    """Whether the consumer's plain import copies (copy_breach's warn case)."""
    plain = plain_lifetime(target)
    return bool(plain is not None and plain.get("copied"))


#: the clause each ownership departure breaks, whichever check saw it: a capsule left unrenamed
#: is CAP-03's, a deleter call while the result viewed the memory or a count other than one
#: is OWN-03's (the check of another clause that met it names the path in the message)
OWNERSHIP_CLAUSE = {"renamed": "CAP-03", "alive": "OWN-03", "after": "OWN-03"}


def departures(obs, plain, what=""):
    """(clause, message) for each way the observed lifetime `obs` departs from a correct import
    (renamed used_*, no deleter call while the result lives, exactly one after) that the
    consumer's plain import does not share (a shared departure is one CAP-03/OWN-03 fault,
    reported by the plain check). The clause is OWNERSHIP_CLAUSE's."""
    want = {"renamed": True, "alive": 0, "after": 1}
    text = {"renamed": "capsule renamed used_* after import", "alive": "deleter calls while the result is alive",
            "after": "deleter calls after the result died"}
    out = []
    for k in ("renamed", "alive", "after"):
        if obs[k] == want[k] or (plain is not None and plain[k] == obs[k]):
            continue
        if k == "alive" and obs.get("copied"):
            continue  # a copy: the consumer is done with the producer's memory at once
        got = obs["names"] if k == "renamed" else obs[k]
        out.append((OWNERSHIP_CLAUSE[k], "%s%s: got %r, expected %r%s" % (
            what, text[k], got, want[k] if k != "renamed" else "used_*",
            "" if plain is None else " (a plain import: %r)" % (plain["names"] if k == "renamed" else plain[k]))))
    return out


def ownership(check, obs, plain, what="", feeds="valid"):
    """Records departures(obs, plain, what) under their clauses (CAP-03, OWN-03), graded by
    ownership_breach."""
    for clause, message in departures(obs, plain, what):
        ownership_breach(check, clause, message, feeds)


def ownership_breach(check, clause, message, feeds="valid"):
    """An ownership departure: the clause's breach on valid input; on invalid input a warn, since
    what a consumer does with it is unspecified (suites/README.md, Grading)."""
    if feeds == "valid":
        check.that(False, clause, message)
    else:
        check.warn(clause, message + "; on invalid input, whose handling dlpack.h leaves unspecified "
                   "(suites/README.md, Grading)")


def deleter_once(check, calls, what, expected=1, calls_clause=None):
    """OWN-03 for the deleter calls `calls` counted once an import or a refusal was let go:
    exactly `expected` (1; 0 where no capsule was made). Whatever check counted them, a count
    other than that breaks OWN-03 ("calls deleter once, and only once"); `what` names the path.
    A deleter never called is also `calls_clause`'s where that clause asks for the call itself
    (VER-08: facing another major the consumer calls the deleter). Returns whether it held."""
    ok = check.that(calls == expected, "OWN-03", "%s: the deleter ran %d time(s), expected %d"
                    % (what, calls, expected))
    if calls_clause is not None:
        check.that(calls or not expected, calls_clause, "%s: the deleter was never called" % what)
    return ok


def deleter_accounting(check, att, alive_calls, clause="OWN-03", what=""):
    """Records `clause`: 0 deleter calls while the result lived (alive_calls, counted by the
    caller) unless the result is a copy (Attempt.copied), exactly 1 once the capsules and the
    result are gone (att.settle())."""
    imported = not att.refused
    copied = att.copied()
    after = att.settle()
    if imported:
        check.that(alive_calls == 0 or copied, clause, "%sthe deleter ran %d time(s) while the imported result "
                   "was alive and viewed the producer's memory" % (what, alive_calls))
    check.that(after == 1, clause, "%sthe deleter ran %d time(s) in all after the result died (expected exactly 1)"
               % (what, after))
    return after


def refusal_accounting(check, target, att, what, feeds="valid"):
    """OWN-03: no deleter call while the result lives, exactly one once everything is gone
    (none when no capsule was made). An import is judged against the consumer's plain import
    (ownership(): a departure it shares is the plain check's to report). A breach on invalid
    input is warn (ownership_breach). One collection per phase: these run hundreds of times."""
    made = sum(f.capsules_made for f in att.producer.forges.values())
    if att.refused:
        drop_capsules(att.producer, imported=False)
        gc.collect()
        after = att.calls()
        if after != (1 if made else 0):
            ownership_breach(check, "OWN-03", "%s: the deleter ran %d time(s) after the refusal (%s), expected %d"
                             % (what, after, att.refusal(), 1 if made else 0), feeds)
    else:
        ownership(check, att.lifetime(collect=gc.collect), plain_lifetime(target), "%s: " % what, feeds)
    check.record("OWN-03", "pass", "")


def interop_refused(check, att, what, clauses):
    """A consumer refused `what` (a peer's tensor) in an interop check: an unclean refusal fails
    each of `clauses`; a clean one is Unsupported, since LAY-11 lets a consumer raise instead of
    importing and no clause fixes the class for a layout or dtype it lacks (DEV-07 and CPY-07/08
    cover devices and copies)."""
    why = check.unclean(att.exc)
    if why:
        for clause in clauses:
            check.record(clause, "fail", "importing %s raised %s" % (what, why))
        return
    raise Unsupported("the consumer refused %s with %s (LAY-11 lets a consumer raise)" % (what, describe_exc(att.exc)))


def must_refuse(check, target, kw, clause, what):
    """The consumer must refuse the forged capsule `kw` cleanly (check.refusal), and the deleter
    must then run exactly once (deleter_once)."""
    att = forged(target, kw)
    if not att.refused:
        check.accepted(clause, "%s was imported (result %r)" % (what, Shown(target, att.result)))
    else:
        check.refusal(clause, att, what)
    deleter_once(check, att.settle(), "%s, let go" % what)


def null_data_refused(check, att, shape, control):
    """LAY-04 for the refusal att of a zero-size tensor of `shape` with NULL data: a fail, unless
    the same layout over real memory (`control()`, an Attempt, tried only after a clean refusal)
    is refused cleanly too: then the consumer refuses the layout, not the NULL pointer, which
    LAY-11 allows (a contiguity test that a zero extent defeats, say)."""
    why = check.unclean(att)
    ctl = control() if not why else None
    if ctl is not None and ctl.refused and not check.unclean(ctl):
        check.record("LAY-04", "pass", "zero-size shape %r refused with NULL data (%s) and over real memory alike "
                     "(%s): the layout is refused, not the NULL pointer (LAY-11 lets a consumer raise for a layout it "
                     "does not take)" % (shape, att.refusal(), ctl.refusal()))
    else:
        check.record("LAY-04", "fail", "zero-size tensor of shape %r with NULL data refused: %s%s"
                     % (shape, why or att.refusal(), "" if ctl is None else
                        "; the same shape and strides over real memory %s" % (
                            "import" if not ctl.refused else "are refused uncleanly: " + ctl.refusal())))
    if ctl is not None:
        ctl.settle()


_MAKES_0D = {}


def makes_0d(target):
    """Whether the library makes 0-d arrays of its own (its adapter makes a float32 of shape (),
    whatever roles the run judges: `role=consumer` limits the checks, not the library), cached
    per target spec: one that does and imports no 0-d tensor has no rank to lack."""
    key = getattr(target, "spec", None) or target.name
    if key not in _MAKES_0D:
        try:
            made = target.make("float32", (), bytes(4)) is not None
        except Exception:  # noqa: BLE001 - cannot make one: the library has no 0-d arrays to speak of
            made = False
        _MAKES_0D[key] = made
    return _MAKES_0D[key]


def ndim0_refused(check, att, null_shape, control=None):
    """LAY-08 for the refusal att of a 0-d tensor with NULL strides (and NULL shape where
    `null_shape`): a fail, but for a clean refusal of a NULL shape in a legacy capsule, which only
    v1.2 sanctions, and for a consumer that refuses 0-d tensors with a shape and strides too
    (plain_refusal, with `control` where att is a device capsule's) and has none of its own
    (makes_0d): no 0-d tensor reaches LAY-08. A library with 0-d arrays that imports none fails."""
    why = check.unclean(att)
    other = None if why else plain_refusal(att, control)
    if other is not None:
        refused = "0-d tensor with NULL %s refused (%s)" % ("shape" if null_shape else "strides", att.refusal())
        if makes_0d(att.target):  # a library with 0-d arrays of its own that imports none
            check.record("LAY-08", "fail", "%s, as is every 0-d tensor (%s), though the library makes 0-d arrays "
                         "itself" % (refused, other))
        else:
            check.not_reached("LAY-08", "%s, and so is one with a shape and strides (%s): the consumer takes no 0-d "
                                        "tensor, which says nothing of LAY-08" % (refused, other))
    elif not null_shape:
        check.record("LAY-08", "fail", "0-d tensor with NULL strides refused: %s" % (why or att.refusal()))
    elif why or att.producer.last_kind == "versioned":
        check.record("LAY-08", "fail", "0-d versioned 1.3 capsule with NULL shape refused: %s" % (why or att.refusal()))
    else:
        check.record("LAY-08", "pass", "")  # a legacy capsule: NULL shape is sanctioned only from v1.2


def expect_import(check, target, clause, forge, what):
    """The Attempt of the capsules of `forge` (a RecordingProducer(keep=True)): for an import,
    `clause` gets the values, and CAP-03 and OWN-03 each departure of its ownership (rename,
    deleter calls) from a correct import that the consumer's plain import does not share
    (ownership(); a shared one is reported by the plain check once), the result gone after. A
    refusal is the caller's to judge."""
    plain = plain_lifetime(target)
    att = Attempt(target, RecordingProducer(forge, keep=True))
    if att.exc is not None:
        return att
    got, d = result_elements(target, att.result)
    check.equal(got, forge.expected_elements(), clause, "%s: element values" % what)
    ownership(check, att.lifetime(), plain, "%s: " % what)
    return att


def expect_refusal(target, check, clause, forge, what):
    """Imports the capsules of `forge` (on its device), which must be refused (cleanly); then
    lets everything go. True when the consumer refused it."""
    att = Attempt(target, RecordingProducer(forge, keep=True, device=forge.device))
    if att.exc is None:
        check.that(False, clause, "%s: from_dlpack imported it (result %s)" % (what, type(att.result).__name__))
    else:
        check.refusal(clause, att, what)
    att.drop_capsules()  # while the result lives: it may be what keeps the capsule
    att.result = None
    settle()
    return att.exc is not None


def plain_refusal(att, control=None):
    """For a forged attempt refused cleanly: the refusal of its control, the same dtype and
    shape in a plain layout (row-major strides, non-NULL even for 0-d; byte_offset 0; data at
    the start of a buffer of its own; a deleter), when the consumer refuses that cleanly too;
    else None (it imports the control, or there is none: att was not made by forged() and no
    `control`, a function giving the control's Attempt, was given: a device capsule's). A
    consumer that refuses the control lacks the tensor (a dtype or a rank: DT-12's reading,
    LAY-11), not the feature the case is about."""
    kw = att.forge_kwargs
    if control is not None:
        ctl = control()
    elif kw is None:
        return None
    else:
        shape = tuple(kw.get("shape", (4,)))
        plain = dict(shape=shape, strides=row_major_strides(shape))
        if "dtype" in kw:
            plain["dtype"] = kw["dtype"]
        ctl = forged(att.target, plain)
    refusal = ctl.refusal() if ctl.refused and not kit.check.unclean(ctl.exc) else None
    ctl.settle()
    return refusal


def record_refused(check, clause, att, what, clean="warn"):
    """A valid capsule was refused: `clean` (warn by default) for a clean refusal, fail for an
    unclean one (check.unclean); a case that does not reach the clause when the plain control
    is refused too (plain_refusal: check.not_reached)."""
    why = check.unclean(att)
    other = None if why else plain_refusal(att)
    if other is not None:
        check.not_reached(clause, "%s refused (%s), and so is the same dtype and shape in a plain layout (%s): "
                                  "the consumer does not take this tensor at all, which says nothing of %s"
                          % (what, att.refusal(), other, clause))
        return
    check.record(clause, "fail" if why else clean, "%s refused: %s" % (what, why or att.refusal()))


def imported_elements(check, target, att, clause, what):
    """Records `clause` for the import `att` of a valid forged capsule: its refusal (record_refused,
    `what` names the capsule), or the result's elements against the forge's. Returns the result's
    describe() dict, None when refused."""
    if att.refused:
        record_refused(check, clause, att, what)
        return None
    got, d = result_elements(target, att.result)
    check.equal(got, att.forge.expected_elements(), clause, "result elements")
    return d


# ---------------------------------------------------------------------------- consumers
_CONSUMER_VERSIONED = {}


def consumer_max_versions(target):
    """(the max_version values the consumer passes on a plain import, the exception of that
    import or None), cached per target."""
    key = target.name
    if key not in _CONSUMER_VERSIONED:
        att = Attempt(target, RecordingProducer(forges(shape=(2,)), keep=True))
        att.drop_capsules()
        att.result = None
        settle()
        _CONSUMER_VERSIONED[key] = ([c.get("max_version") for c in att.producer.calls], att.exc)
    return _CONSUMER_VERSIONED[key]


def consumer_takes_versioned(target):
    return asks_versioned(consumer_max_versions(target)[0])


def asks_versioned(seen):
    """Whether any max_version of `seen` (one per __dlpack__ call) asks for versioned capsules."""
    return any(isinstance(m, tuple) and len(m) == 2 and isinstance(m[0], int) and m[0] >= 1 for m in seen)


def new_keywords_first(calls):
    """Whether the first of a producer's recorded __dlpack__ calls passed keywords other than
    stream (max_version, dl_device, copy: array API 2023.12; VER-06)."""
    return bool(calls) and bool(set(calls[0]) - {"stream", "args"})


def skipped_retry(att):
    """Whether the attempt was refused with a TypeError after the consumer passed new keywords
    first and never called __dlpack__ again without them (VER-06's retry, not made)."""
    calls = att.producer.calls
    retried = any(not (set(c) - {"stream"}) for c in calls[1:])
    return isinstance(att.exc, TypeError) and new_keywords_first(calls) and not retried


def require_versioned_consumer(target):
    if not consumer_takes_versioned(target):
        seen, exc = consumer_max_versions(target)
        how = "it passed %s" % (seen,) if seen else "it never called __dlpack__"
        if exc is not None:
            how += " and the import raised %s" % describe_exc(exc)
        raise Unsupported("consumer does not ask for versioned capsules (no max_version >= (1, 0); %s): it "
                          "imports legacy DLManagedTensor only (array API: consumers may delay using "
                          "max_version)" % how)


# ---------------------------------------------------------------------------- results
class Shown:
    """describe() of a result for a finding's message (%r shows it); where the adapter cannot
    describe it, that, so a message never turns a finding into an error."""

    def __init__(self, target, y):
        self.target, self.y = target, y

    def __repr__(self):
        try:
            return repr(self.target.describe(self.y))
        except Exception as e:  # noqa: BLE001 - only the message needs it
            return "<not described: %s>" % describe_exc(e)


def result_elements(target, y):
    """(logical row-major element bytes of consumer result y, its describe() dict). A result
    that says it lives on a device the host cannot read (a CPU import the consumer moved to its
    GPU: API-05's finding) is Unsupported here, never read from the host (kit.elements)."""
    d = dict(target.describe(y))
    d.setdefault("device", result_device(y))
    return kit.elements(d), d


def described_readonly(target, y):
    """Whether describe() says the consumer result y is read-only; None where the target has no
    describe() for it (a device target's import: cupy's, jax's), which is no finding of anyone's."""
    try:
        return bool(target.describe(y).get("readonly"))
    except (NotImplementedError, Unsupported):
        return None


def result_device(y):
    """y.__dlpack_device__() as (int, int), or None when y has no such method."""
    m = getattr(y, "__dlpack_device__", None)
    if m is None:
        return None
    try:
        dev = m()
        return (int(dev[0]), int(dev[1]))
    except Exception:  # noqa: BLE001 - a result that cannot say has no device
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


def require_keywords(target, *names):
    """Unsupported unless the consumer's from_dlpack takes every keyword of `names`."""
    missing = [n for n in names if n not in target.consumer_keywords()]
    if missing:
        raise Unsupported("from_dlpack takes no %s keyword (predates array API 2023.12)" % " or ".join(missing))


def zero_copy(check, target, ptr, address, what):
    """Records SEM-01 for a consumer result at `ptr` of the producer's memory at `address`: pass
    when it views that memory, else copy_breach's verdict."""
    if ptr == address:
        check.record("SEM-01", "pass")
        return
    verdict, reading = copy_breach(target)
    check.record("SEM-01", verdict, "%s: the result is at %#x, the producer's memory at %#x: the consumer "
                 "copied%s" % (what, ptr, address, reading))


def used_capsule_refused(check, target, versioned, what, count_clause, attempt=Attempt, make_forge=kit.Forge,
                         **forge_kwargs):
    """A capsule its owner consumed (named used_*; make_forge(versioned=, **forge_kwargs)'s memory)
    handed to the consumer in a CapsuleProducer on its device through `attempt` (Attempt, or a
    subclass that takes another route): CAP-04 wants it refused cleanly, and the refusing
    consumer never calls its deleter, which the owner's release then calls once (both counted
    under `count_clause`)."""
    forge = make_forge(versioned=versioned, **forge_kwargs)
    cap = forge.capsule()
    handle = kit.consume(cap)
    att = attempt(target, kit.CapsuleProducer(cap, device=forge.device))
    if att.exc is None:
        check.record("CAP-04", "fail", "%s: from_dlpack imported a capsule named %r" % (what, kit.inspect(cap)["name"]))
        kit.keep_forever(handle)  # the consumer now gives the tensor back; the handle must not
        att.result = None
        settle()
        return
    check.refusal("CAP-04", att, what)
    check.equal(forge.deleter_calls, 0, count_clause, "%s: deleter calls by the consumer that refused" % what)
    handle.release()
    del att, cap
    settle()
    check.equal(forge.deleter_calls, 1, count_clause, "%s: deleter calls after the owner released it" % what)


class ProducerError(Exception):
    """Raised by RaisingProducer: from_dlpack must let it through unchanged (ERR-02)."""


class ProducerBufferError(BufferError):
    """A BufferError subclass raised by RaisingProducer (ERR-02)."""


class RaisingProducer:
    """Raises `exc` from __dlpack__ or __dlpack_device__ (`where`); the other method works: it
    says `device` and exports export(**keywords) (capsule_asked_for: host memory)."""

    def __init__(self, exc, where, device=(1, 0), export=None):
        self.exc = exc
        self.where = where
        self.device = tuple(device)
        self.export = export or capsule_asked_for
        self.events = []

    def __dlpack_device__(self):
        self.events.append("__dlpack_device__")
        if self.where == "__dlpack_device__":
            raise self.exc
        return self.device

    def __dlpack__(self, **kw):
        self.events.append("__dlpack__")
        if self.where == "__dlpack__":
            raise self.exc
        return self.export(**kw)


def capsule_asked_for(max_version=None, make_forge=kit.Forge, **_):
    """A (2,) float32 capsule of the kind the call asks for (make_forge(shape=, versioned=)):
    versioned only with a max_version of major 1 or more, legacy otherwise (VER-02), so the
    consumer meets no other fault than the exception under test."""
    versioned = isinstance(max_version, tuple) and len(max_version) == 2 and max_version[0] >= 1
    return make_forge(shape=(2,), versioned=versioned).capsule()


def producer_error_propagates(check, target, where, device=(1, 0), make_forge=kit.Forge):
    """ERR-02: an exception the producer raises from `where` (__dlpack__ or __dlpack_device__),
    a plain Exception subclass and a BufferError subclass, reaches the caller of from_dlpack
    unchanged (the same object). The producer says `device`; its other method exports
    make_forge's memory. A consumer that never calls `where` has nothing to propagate."""
    def export(**kw):
        return capsule_asked_for(make_forge=make_forge, **kw)

    for cls in (ProducerError, ProducerBufferError):
        raised = cls("raised by the producer's %s" % where)
        p = RaisingProducer(raised, where, device, export)
        att = Attempt(target, p)
        exc = att.exc
        if where not in p.events:
            if exc is not None:
                check.refusal("ERR-02", exc, cls.__name__)
            check.record("ERR-02", "pass", "the consumer never calls %s (see API-04), so it has nothing to propagate"
                         % where)
        elif exc is None:
            check.that(False, "ERR-02", "%s raised %s but from_dlpack returned %s"
                       % (where, cls.__name__, type(att.result).__name__))
        else:
            check.that(exc is raised, "ERR-02", "%s raised %s; from_dlpack raised %s instead" % (
                where, cls.__name__, describe_exc(exc) if type(exc) is not cls else "another %s object" % cls.__name__))
        att.result = None
