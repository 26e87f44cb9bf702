"""The consumer's entry routes: the ways one forged tensor reaches from_dlpack, each an Attempt
with its deleter accounting (attempts.py).

- "dlpack": an object with __dlpack__ (RecordingProducer(keep=True)) that hands out the kind
  of capsule the consumer asks for;
- "unasked": the same object, handing out the other kind: a versioned capsule to a consumer
  that asked for none, a legacy one to a consumer that asked for a versioned one (VER-05: the
  consumer reads the name and version whatever it asked for);
- "capsule": the capsule itself, `from_dlpack(capsule)`, which several libraries still take
  (the array API does not require it: only what happens when they take it is judged);
- "xapi": an object whose type offers a C exchange table (xapi_forge.handout_producer) whose
  managed_tensor_from_py_object_no_sync hands out the forged tensor; its __dlpack__ hands out
  the same tensor to a consumer that does not use the table.

`offered(target, route)` says whether the consumer takes a plain capsule through the route
(cached per target); where it does not, the checks through that route are unsupported.
"""
from dlconform import _ref
from dlconform.producers import RecordingProducer, forges
from dlconform.verdicts import Unsupported

from . import capsules as pycap
from . import repros as rp
from .attempts import Attempt, consumer_takes_versioned, describe_exc, settle, valid_kwargs
from .xapi_forge import handout_producer

ROUTES = ("dlpack", "unasked", "capsule", "xapi")
#: the exchange table of the "xapi" route: no dltensor_from (XAPI-11 allows it), so that every
#: consumer takes the owning hand-out
TABLE_NULL = ("dltensor_from_py_object_no_sync",)


class CapsuleAttempt(Attempt):
    """from_dlpack(capsule): the capsule is the producer's next one, handed in directly."""

    def import_(self, target, producer, kw):
        return target.from_dlpack(producer.__dlpack__(), **kw)


def unasked_kind(target):
    """The kind the "unasked" route hands out: the one the consumer does not ask for."""
    return "legacy" if consumer_takes_versioned(target) else "versioned"


def attempt(target, route, forge_kwargs=None, device=(1, 0), versioned=None, **kw):
    """The Attempt of one import of `_ref.Forge(**valid_kwargs(forge_kwargs))` capsules through
    `route`, from_dlpack getting `kw`. `versioned` fixes the kind for "capsule" (default:
    versioned when the consumer asks for versioned capsules). `.table` is the route's
    ApiForge (None off the "xapi" route)."""
    fk = valid_kwargs(forge_kwargs or {})
    table = None
    if route == "dlpack":
        att = Attempt(target, RecordingProducer(forges(**fk), keep=True, device=device), **kw)
    elif route in ("unasked", "capsule"):
        if versioned is None:
            versioned = (unasked_kind(target) == "versioned" if route == "unasked"
                         else consumer_takes_versioned(target))
        p = RecordingProducer(_ref.Forge(versioned=versioned, **fk), keep=True, device=device)
        att = (Attempt if route == "unasked" else CapsuleAttempt)(target, p, **kw)
    elif route == "xapi":
        table = _ref.ApiForge(0, null=TABLE_NULL)
        att = Attempt(target, handout_producer(forges(**fk), table, device=device), **kw)
    else:
        raise ValueError("unknown route %r" % (route,))
    att.forge_kwargs = fk
    att.table = table
    return att


def table_used(att):
    """True when the consumer took the tensor from the route's exchange table."""
    return att.table is not None and att.table.calls["managed_tensor_from_py_object_no_sync"] > 0


class Expect:
    """What a route check requires of one import, as lines() asserts it.

    - `clause`, `what`: the refusal rule's clause (a refusal must be clean; None: no rule) and
      the case in words;
    - `imported`: None (an import is fine), "refuse" (an import is the finding: a MUST refusal,
      an unknown value VER-09 reads, invalid input check.accepted grades), "values" (an import
      holds the forge's elements, under `values_clause`, default `clause`);
    - `buffer_error`: a refusal must be a BufferError (DEV-07's SHOULD);
    - `zero_copy`: an import's first element is the forge's buffer (SEM-01);
    - `deleter`: the deleter accounting under `deleter_clause`: a refusal's one call once a
      capsule was made; an import's capsules renamed used_* (unless `renamed` is False; under
      `renamed_clause`, default `deleter_clause`), no call while the result views the
      producer's memory, one after, where `plain` (the consumer's plain lifetime,
      attempts.plain_lifetime; None: none) departs the same way excepted (attempts.departures);
    - `plain_only`: with the "xapi" route, an import the table did not serve is held to its
      one deleter call alone.
    """

    def __init__(self, clause, what, imported=None, values_clause=None, buffer_error=False, zero_copy=False,
                 deleter=True, deleter_clause="OWN-03", renamed=True, renamed_clause=None, plain=None,
                 plain_only=False):
        self.clause, self.what, self.imported = clause, what, imported
        self.values_clause = values_clause or clause
        self.buffer_error, self.zero_copy = buffer_error, zero_copy
        self.deleter, self.deleter_clause, self.renamed, self.plain = deleter, deleter_clause, renamed, plain
        self.plain_only, self.renamed_clause = plain_only, renamed_clause or deleter_clause


#: the deleter calls of a route snippet's producer `p` so far
CALLS = rp.Code("sum(g.deleter_calls for g in p.forges.values())")


def _accounting_lines(target, ex):
    """OWN-03 as test_refusals._accounting judges it: after a refusal exactly one deleter call
    once a capsule was made; after an import what departures() holds (capsules renamed used_*,
    no call while the result views the producer's memory, one after), a departure the plain
    import shares excepted. The capsules go as drop_capsules() lets them go."""
    w, dc, plain = ex.what, ex.deleter_clause, ex.plain
    out = ["if e is not None:",
           "    p.capsules.clear(); y = None; gc.collect()",
           "    " + rp.expect_equal(CALLS, rp.Code("1 if any(g.capsules_made for g in p.forges.values()) else 0"),
                                    dc, "%s: deleter calls after the refusal" % w),
           "else:",
           "    try:",
           "        d = %s" % target.repro_describe("y"),
           "        _spans = [(g.buffer_address, g.buffer_size) for g in p.forges.values() "
           "if getattr(g, 'buffer_size', 0) and getattr(g, 'buffer_address', None)]",
           "        copied = 0 in [int(n) for n in d['shape']] or (bool(_spans) and not any("
           "a <= int(d['ptr']) < a + n for a, n in _spans))",
           "    except Exception:",
           "        copied = False  # unknown: counted as a view",
           "    _names = [_probe.inspect(c)['name'] for c in p.capsules]",
           "    _ctl = object(); _pool = [_ctl] + p.capsules; _refs = [sys.getrefcount(o) for o in _pool]; del _pool",
           "    # a capsule neither renamed nor held by the result is kept for good: its destructor's",
           "    # deleter call would be the CAP-03 breach's doing (attempts.drop_capsules)",
           "    _pinned = [c for c, n, r in zip(p.capsules, _names, _refs[1:]) if n not in %r and r <= _refs[0]]"
           % (pycap.USED_NAMES,),
           "    p.capsules.clear(); c = None; gc.collect()"]
    renamed = "bool(_names) and all(n in %r for n in _names)" % (pycap.USED_NAMES,)
    if ex.renamed and (plain is None or plain["renamed"]):  # a plain import that keeps the name: no departure
        out.append("    " + rp.expect(renamed, ex.renamed_clause, rp.Code("%r + repr(_names)" % (
            "%s: capsule renamed used_* after import: got " % w))))
    ok = [0] if plain is None else sorted({0, plain["alive"]})
    out.append("    " + rp.expect("copied or %s in %r" % (CALLS, ok), dc, rp.Code(
        "%r %% %s" % ("%s: deleter calls while the result is alive (and views the producer's memory): %%d, "
                      "expected %s" % (w, " or ".join(map(str, ok))), CALLS))))
    ok = [1] if plain is None else sorted({1, plain["after"]})
    out += ["    y = d = None; gc.collect()",
            "    " + rp.expect("%s in %r" % (CALLS, ok), dc, rp.Code("%r %% %s" % (
                "%s: deleter calls after the result died: %%d, expected %s" % (w, " or ".join(map(str, ok))),
                CALLS)))]
    return out


def lines(target, route, forge_kwargs=None, device=(1, 0), versioned=None, expect=None, **kw):
    """The reproducer of attempt(): the import, then what `expect` (an Expect) requires of it:
    the refusal rule, the import, and the deleter accounting. Without `expect` the consumer may
    refuse cleanly or import, and the deleter accounting is strict."""
    ex = expect or Expect(None, "the import through %s" % WHAT[route])
    fk = valid_kwargs(forge_kwargs or {})
    args = ", ".join("%s=%r" % kv for kv in sorted(fk.items()))
    dev = "" if tuple(device) == (1, 0) else ", device=%r" % (tuple(device),)
    call = "%s" + "".join(", %s=%r" % kv for kv in sorted(kw.items()))
    out = rp.attempt_setup(target) + ["import sys"]
    if route == "dlpack":
        out += ["p = RecordingProducer(forges(%s), keep=True%s)" % (args, dev)]
        arg = "p"
    elif route in ("unasked", "capsule"):
        if versioned is None:
            versioned = (unasked_kind(target) == "versioned" if route == "unasked"
                         else consumer_takes_versioned(target))
        out += ["f = _ref.Forge(versioned=%r, %s)" % (versioned, args)]
        if route == "unasked":
            out += ["p = RecordingProducer(f, keep=True%s)  # hands out %s capsules whatever is asked"
                    % (dev, "versioned" if versioned else "legacy")]
            arg = "p"
        else:
            out += ["p = RecordingProducer(f, keep=True%s)  # keeps the capsule it hands out" % dev,
                    "cap = p.__dlpack__()"]
            arg = "cap"
    else:
        out += ["from support.xapi_forge import handout_producer",
                "a = _ref.ApiForge(0, null=%r)" % (list(TABLE_NULL),),
                "p = handout_producer(forges(%s), a%s)  # its type offers the table a" % (args, dev)]
        arg = "p"
    what = ex.what
    out += ["y, e = attempt(lambda: %s)" % target.repro_from_dlpack(call % arg)]
    if arg == "cap":
        out += ["del cap"]
    # the result by its type's name: repr() of an import of malformed metadata may read it and
    # crash (tvm_ffi's does for a NULL shape), where the check itself never calls it
    out += ["print('imported' if e is None else 'refused', type(y).__name__ if e is None else describe(e))"]
    if route == "xapi":
        out += ["print('exchange table calls', a.calls)"]
        if ex.plain_only:
            out += ["if e is None and a.calls['managed_tensor_from_py_object_no_sync'] == 0:",
                    "    e = 'the table was not used'  # held to its one deleter call alone"]
    if ex.clause:
        out += [rp.expect_clean("e", ex.clause, what)]
        if ex.buffer_error:
            out += [rp.expect("e is None or isinstance(e, BufferError)", ex.clause, rp.Code(
                "%r + (describe(e) if e is not None else '')" % (
                    "%s: a refusal other than BufferError (%s recommends it): " % (what, ex.clause),)))]
        if ex.imported == "refuse":
            out += [rp.expect("e is not None", ex.clause, rp.Code("%r + type(y).__name__" % (
                "%s was imported, as a " % what,)))]
    if ex.imported == "values":
        out += ["if e is None:",
                "    " + rp.expect_equal("elements(%s)" % target.repro_describe("y"),
                                         rp.Code("p.forges[p.last_kind].expected_elements()"), ex.values_clause,
                                         "%s: element values" % what)]
    if ex.zero_copy:
        out += ["if e is None:",
                "    " + rp.expect_equal("%s['ptr']" % target.repro_describe("y"),
                                         rp.Code("p.forges[p.last_kind].buffer_address"), "SEM-01",
                                         "%s: result address (a view of the producer's memory)" % what)]
    if ex.deleter:
        out += _accounting_lines(target, ex)
    out += ["print('deleter calls after', %s)" % CALLS]
    return out


_OFFERED = {}


def offered(target, route):
    """(True, "") when the consumer imports a plain float32 (2, 3) tensor through `route`, else
    (False, why); cached per target. "dlpack" is always offered."""
    key = (target.name, route)
    if key not in _OFFERED:
        if route == "dlpack":
            _OFFERED[key] = (True, "")
        else:
            att = attempt(target, route, {"shape": (2, 3)})
            if att.exc is not None:
                why = "the consumer refused a plain capsule through it (%s)" % describe_exc(att.exc, 200)
            elif route == "xapi" and not table_used(att):
                why = "the consumer does not use the C exchange API (it called __dlpack__)"
            else:
                why = ""
            att.settle()
            settle()
            _OFFERED[key] = (not why, why)
    return _OFFERED[key]


WHAT = {"dlpack": "__dlpack__", "unasked": "__dlpack__ handing out the kind not asked for",
        "capsule": "from_dlpack(capsule)", "xapi": "the C exchange API"}


def _probe_crash(target, route):
    """What a death while offered() probes `route` is (Check.repro's crash_as): through
    "unasked", VER-05's (a consumer reads the capsule's name and version, whatever it asked
    for): on valid input where the consumer asked for versioned capsules and got a legacy one
    (what a DLPack 0.x producer answers, VER-03), on invalid input where it asked for none and
    got a versioned one (the producer broke VER-02). Elsewhere the checks' own clauses."""
    doing = "probing whether the consumer imports a plain tensor through %s" % WHAT[route]
    if route != "unasked":
        return {"doing": doing}
    return {"doing": doing, "clauses": ["VER-05"],
            "input": "valid" if unasked_kind(target) == "legacy" else "invalid"}


def require(target, route, check=None):
    """Unsupported unless the consumer imports through `route` (offered()). With `check`, the
    probe's snippet is the test's reproducer while it runs, so that a death in it is reported
    with the plain import that caused it (the caller sets its own snippet afterwards)."""
    if check is not None and route != "dlpack" and (target.name, route) not in _OFFERED:
        check.repro(lines(target, route, {"shape": (2, 3)}, expect=Expect(
            None, "a plain import through %s" % WHAT[route])), crash_as=_probe_crash(target, route))
    ok, why = offered(target, route)
    if not ok:
        raise Unsupported("route %s not offered: %s%s" % (WHAT[route], why, {
            "capsule": "; the array API does not require from_dlpack to take capsules",
            "unasked": "; refusing a capsule of a kind it did not ask for is its right",
            "xapi": "; the exchange table is optional for consumers (XAPI-20)"}.get(route, "")))
