"""Every reason a consumer can refuse, through every route it takes tensors by, with exact
deleter accounting: the deleter runs exactly once, never while a view of the memory lives,
never twice. A refusal after the consumer took ownership (renamed the capsule, or took a
tensor from an exchange table) is where deleters run twice: the consumer gives the tensor
back and the capsule's destructor, seeing its name unchanged, gives it back again.

The routes are support/routes.py's: __dlpack__ (the kind asked for, or the other kind), the
capsule itself, the C exchange API. The reasons are generated from tables: dtypes (every
DLPack dtype, and invalid ones), every non-CPU device type, shape and numel overflow,
strides, version, used names. Each reason's own clause gets the refusal rule: a refusal must
be clean (check.refusal). Grading by what the check feeds (suites/README.md, Grading):
accepting what a rule says to refuse (VER-08, CAP-04, DT-07, DT-08) fails; an unknown
enumeration value imported is read by VER-09 (misread fails, carried unread is warn);
accepting malformed metadata (feeds "invalid") is warn (check.accepted); accepting valid input
passes. OWN-03 is recorded explicitly, so that a consumer that dies on an input has the crash
on the input's clause.
"""
import pytest

from dlconform import kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import readings as rd
from support import routes as rt
from support import reasons as rs
from support.marks import consumer


def _params():
    """Each reason through each route that can carry it: a versioned-only reason does not go
    the unasked route, which hands a versioned consumer legacy capsules (the plain unasked
    check covers a legacy consumer's versioned capsules)."""
    for reason in rs.REASONS:
        for route in rt.ROUTES:
            if reason.kind == "versioned" and route == "unasked":
                continue
            yield pytest.param(reason.id, route, id="%s-%s" % (reason.id, route),
                               marks=[pytest.mark.clause(reason.clause), pytest.mark.feeds(reason.feeds)])


def _versioned_for(target, reason, route):
    """The kind the route hands out for this reason; Unsupported where it cannot carry it."""
    if route in ("xapi",):
        return True
    if route == "capsule":
        return True if reason.kind == "versioned" else tries.consumer_takes_versioned(target)
    if route == "unasked":
        return rt.unasked_kind(target) == "versioned"
    if reason.kind == "versioned":
        tries.require_versioned_consumer(target)
    return tries.consumer_takes_versioned(target)


def _refusal(check, clause, att, what):
    """The clean-refusal rule; for DEV-07 also its class: BufferError (SHOULD)."""
    if check.refusal(clause, att, what) and clause == "DEV-07" and not isinstance(att.exc, BufferError):
        check.warn("DEV-07", "%s refused with %s; DEV-07 recommends BufferError" % (what, att.refusal()))


def _judge(check, target, reason, att, what):
    if att.refused:
        _refusal(check, reason.clause, att, what)
        return
    try:
        _judge_import(check, target, reason, att, what)
    except kit.Unsupported as e:  # the target cannot read the result: the import is not judged
        check.record(reason.clause, "unsupported", "%s was imported, but %s" % (what, e))


def _judge_import(check, target, reason, att, what):
    if reason.must == "refuse":
        check.record(reason.clause, "fail", "%s was imported (result %r)" % (what, tries.Shown(target, att.result)))
    elif reason.must == "read":
        check.record(reason.clause, *rd.unknown_value_verdict(target, att, what, dtype=reason.kw.get("dtype"),
                                                              device=reason.device))
    elif reason.must == "invalid":
        check.accepted(reason.clause, "%s was imported (result %r)" % (what, tries.Shown(target, att.result)))
    else:
        try:
            got, d = tries.result_elements(target, att.result)
        except kit.Unsupported:
            raise
        except Exception as e:  # noqa: BLE001
            check.record(reason.clause, "fail", "%s: the result cannot be read (%s)" % (what, tries.describe_exc(e)))
            return
        expected = att.forge.expected_elements()
        offset = (att.forge_kwargs or {}).get("byte_offset") or 0
        if got != expected and offset and got and d["ptr"] == att.forge.buffer_address:
            # a view at `data` of an export whose first element is byte_offset further on: the
            # offset is LAY-03's finding, and the layout of the reason cannot be judged from it
            check.record("LAY-03", "fail", "%s: the result starts at data (%#x): byte_offset %d ignored; element "
                         "values %s, expected %s" % (what, d["ptr"], offset, got[:16].hex(), expected[:16].hex()))
            check.record(reason.clause, "unsupported", "%s: byte_offset ignored (LAY-03), so the values say nothing "
                         "of the layout" % what)
            return
        check.equal(got, expected, reason.clause, "%s: element values" % what)


@pytest.mark.parametrize("reason, route", list(_params()))
@pytest.mark.role("consumer")
def test_consumer_refusal_and_deleter(target, check, reason, route):
    """One reason to refuse through one route: a clean refusal or a sound import, and the
    deleter once, never while the result lives. `reason` is the id of one of rs.REASONS."""
    reason = rs.REASON[reason]
    rt.require(target, route, check)
    versioned = _versioned_for(target, reason, route)
    what = "%s through %s (%s capsule)" % (reason.id, rt.WHAT[route], "versioned" if versioned else "legacy")
    att = rt.attempt(target, route, dict(reason.kw), reason.device, versioned=versioned)
    if route == "xapi" and not rt.table_used(att) and att.producer.last_kind != "versioned":
        what += " (the consumer called __dlpack__ for a legacy capsule instead)"
    _judge(check, target, reason, att, what)
    tries.refusal_accounting(check, target, att, what, reason.feeds)


# ---------------------------------------------------------------------------- used names
@pytest.mark.parametrize("route", ["dlpack", "capsule"])
@consumer("CAP-04", "OWN-03", feeds="valid")
def test_consumer_refuses_used_capsule_on_every_route(target, check, route):
    """A capsule named used_* (another consumer owns it) is refused through every route that
    takes capsules, and the refusing consumer never calls its deleter; the owner's release is
    the one call."""
    rt.require(target, route, check)
    for versioned in [False] + ([True] if route == "capsule" or tries.consumer_takes_versioned(target) else []):
        what = "%s used_* capsule through %s" % ("versioned" if versioned else "legacy", rt.WHAT[route])
        tries.used_capsule_refused(check, target, versioned, what, "OWN-03",
                                   rt.CapsuleAttempt if route == "capsule" else tries.Attempt, shape=(2, 3),
                                   strides=(3, 1))


# ---------------------------------------------------------------------------- plain imports
@pytest.mark.parametrize("route", ["unasked", "capsule", "xapi"])
@consumer("CAP-03", "OWN-03", "SEM-01", feeds="valid")
def test_consumer_plain_import_on_every_route(target, check, route):
    """A plain tensor through a route other than the one the consumer asks for: where the
    consumer takes it, the values are the producer's, the memory is shared (SEM-01), the
    capsule is renamed used_* (CAP-03) and the deleter runs once after the result died; where
    it refuses, the deleter still runs exactly once (OWN-03)."""
    what = "plain float32 (2, 3) through %s" % rt.WHAT[route]
    att = rt.attempt(target, route, {"shape": (2, 3)})
    if att.refused or (route == "xapi" and not rt.table_used(att)):
        why = check.unclean(att)
        if why:
            check.record("OWN-03", "fail", "%s refused uncleanly: %s" % (what, why))
        imported = not att.refused
        after = att.settle()
        check.that(after == (1 if att.producer.forges else 0), "OWN-03", "%s: deleter calls %d after %s"
                   % (what, after, "the import" if imported else "the refusal (%s)" % att.refusal()))
        for clause in ("CAP-03", "SEM-01"):  # the route was not taken: nothing of it to judge
            check.record(clause, "unsupported", "route not taken: the consumer imported through __dlpack__, not the "
                         "exchange table (the plain import's checks judge that)" if imported else
                         "route not offered: %s" % att.refusal())
    else:
        got, d = tries.result_elements(target, att.result)
        check.equal(got, att.forge.expected_elements(), "CAP-03", "%s: element values" % what)
        tries.zero_copy(check, target, d["ptr"], att.forge.buffer_address, what)
        life = att.lifetime()
        if route != "xapi":  # a table hand-out renames the capsule itself
            check.that(life["renamed"], "CAP-03", "%s: after the import, %s" % (
                what, "; ".join(pycap.name_problem(n, "used_*") for n in life["names"]) or "no capsule"))
        if d["ptr"] == att.forge.buffer_address:  # a copy may give the producer's tensor back at once
            check.that(life["alive"] == 0, "OWN-03", "%s: the deleter ran %d time(s) while the result viewed the "
                       "producer's memory" % (what, life["alive"]))
        tries.settle()
        check.that(att.calls() == 1, "OWN-03", "%s: deleter calls %d after the result and the capsule died"
                   % (what, att.calls()))
    if route == "unasked" and not tries.consumer_takes_versioned(target):
        _unasked_major(target, check)


def _unasked_major(target, check):
    """A consumer that asks for legacy capsules and takes a versioned one it did not ask for
    must still refuse a major other than 1 (VER-08) and give it back once."""
    what = "a version (2, 0) capsule handed out unasked"
    att = rt.attempt(target, "unasked", {"shape": (2, 3), "version": (2, 0)})
    if att.refused:
        check.refusal("VER-08", att, what)
    else:
        check.record("VER-08", "fail", "%s was imported (result %r)" % (what, tries.Shown(target, att.result)))
    tries.deleter_once(check, att.settle(), "%s, let go" % what, calls_clause="VER-08")


# ---------------------------------------------------------------------------- dtypes and devices
#: malformed dtypes no rule reads for a consumer: zero bits, a bool of 1 or 16 bits (DT-03 says
#: 8), a 24-bit IEEE float (DT-13): invalid input
MALFORMED_DTYPES = ((2, 0, 1), (0, 0, 1), (6, 1, 1), (6, 16, 1), (2, 24, 1))
#: every device type of dlpack.h v1.3 but kDLCPU
DEVICE_TYPES = (2, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18)


def _ruled_import(check, target, att, what, clause):
    """An rs.RULED_DTYPES dtype imported: fp6/fp4 with other bits fails (DT-07, DT-08); an unknown
    code misread fails, carried unread is warn (the VER-09 reading)."""
    if clause != "VER-09":
        check.record(clause, "fail", "%s was imported (result %r); dlpack.h: a consumer that sees other bits "
                     "stops the import" % (what, tries.Shown(target, att.result)))
        return
    check.record(clause, *rd.unknown_value_verdict(target, att, what, dtype=tuple(att.forge_kwargs["dtype"])))


def _malformed_import(check, target, att, what, clause):
    check.accepted(clause, "%s was imported (result %r)" % (what, tries.Shown(target, att.result)))


def _each(target, check, route, cases, feeds="valid", imported=None):
    """Imports each (what, forge kwargs, producer device, clause) through route: deleter
    accounting (OWN-03), the refusal rule under the case's clause when it has one, and
    `imported(check, target, attempt, what, clause)` for an import when given."""
    rt.require(target, route, check)
    for what, kw, device, clause in cases:
        what = "%s through %s" % (what, rt.WHAT[route])
        att = rt.attempt(target, route, kw, device)
        if att.refused and clause:
            _refusal(check, clause, att, what)
        elif not att.refused and imported:
            imported(check, target, att, what, clause)
        tries.refusal_accounting(check, target, att, what, feeds)
    for clause in sorted({c for *_, c in cases if c}):
        check.record(clause, "pass", "")


@pytest.mark.parametrize("route", ["dlpack", "capsule", "xapi"])
@consumer("OWN-03", feeds="valid")
def test_consumer_dtype_refusals_and_deleter(target, check, route):
    """Every dtype of dlpack.h v1.3: imported or refused cleanly, the deleter once."""
    cases = [("dtype %s %r" % (n, t), {"dtype": t, "shape": (4,)}, (1, 0), None) for n, t in dty.DTYPES.items()]
    _each(target, check, route, cases)


@pytest.mark.parametrize("route", ["dlpack", "capsule", "xapi"])
@consumer("VER-09", "DT-07", "DT-08", "OWN-03", feeds="valid")
def test_consumer_ruled_dtype_refusals_and_deleter(target, check, route):
    """dtypes whose reading the spec states: unknown codes never misread (VER-09), fp6/fp4
    with other bits never imported (DT-07, DT-08); a clean refusal passes, the deleter once."""
    cases = [("dtype %r" % (r.kw["dtype"],), dict(r.kw), r.device, r.clause) for r in rs.DTYPE_REASONS]
    _each(target, check, route, cases, imported=_ruled_import)


@pytest.mark.parametrize("route", ["dlpack", "capsule", "xapi"])
@consumer("DT-03", "DT-13", feeds="invalid")
def test_consumer_malformed_dtype_refusals_and_deleter(target, check, route):
    """Malformed dtypes (zero bits, a bool of 1 or 16 bits, a 24-bit float): a clean refusal passes,
    an import is warn (invalid input), and the deleter runs once (OWN-03, warn on a breach)."""
    cases = [("dtype %r" % (t,), {"dtype": t, "shape": (4,), "buffer_size": 64}, (1, 0),
              "DT-03" if t[0] == 6 else "DT-13") for t in MALFORMED_DTYPES]
    _each(target, check, route, cases, feeds="invalid", imported=_malformed_import)


@pytest.mark.parametrize("route", ["dlpack", "capsule", "xapi"])
@consumer("DEV-07", "OWN-03", feeds="valid")
def test_consumer_device_refusals_and_deleter(target, check, route):
    """Memory on each non-CPU device type: refused cleanly (DEV-07) or imported, and the
    deleter once in all."""
    cases = [("device (%d, 0)" % t, {"device": (t, 0), "shape": (2, 3)}, (t, 0), "DEV-07") for t in DEVICE_TYPES]
    _each(target, check, route, cases)
