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
from dlconform import kit

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
    """The Attempt of one import of `kit.Forge(**valid_kwargs(forge_kwargs))` capsules through
    `route`, from_dlpack getting `kw`. `versioned` fixes the kind for "capsule" (default:
    versioned when the consumer asks for versioned capsules). `.table` is the route's
    ApiForge (None off the "xapi" route)."""
    fk = valid_kwargs(forge_kwargs or {})
    table = None
    if route == "dlpack":
        att = Attempt(target, kit.RecordingProducer(kit.forges(**fk), keep=True, device=device), **kw)
    elif route in ("unasked", "capsule"):
        if versioned is None:
            versioned = (unasked_kind(target) == "versioned" if route == "unasked"
                         else consumer_takes_versioned(target))
        p = kit.RecordingProducer(kit.Forge(versioned=versioned, **fk), keep=True, device=device)
        att = (Attempt if route == "unasked" else CapsuleAttempt)(target, p, **kw)
    elif route == "xapi":
        from dlconform import _ref  # the C table forge, needed by this route alone

        table = _ref.ApiForge(0, null=TABLE_NULL)
        att = Attempt(target, handout_producer(kit.forges(**fk), table, device=device), **kw)
    else:
        raise ValueError("unknown route %r" % (route,))
    att.forge_kwargs = fk
    att.table = table
    return att


def table_used(att):
    """True when the consumer took the tensor from the route's exchange table."""
    return att.table is not None and att.table.calls["managed_tensor_from_py_object_no_sync"] > 0


_OFFERED = {}


def plain_import(target, check, route):
    """offered()'s probe, a case of its own (require() makes it the reproducer while it runs):
    a plain float32 (2, 3) tensor through `route`. Returns why the route is not offered, or ""."""
    att = attempt(target, route, {"shape": (2, 3)})
    if att.exc is not None:
        why = "the consumer refused a plain capsule through it (%s)" % describe_exc(att.exc, 200)
    elif route == "xapi" and not table_used(att):
        why = "the consumer does not use the C exchange API (it called __dlpack__)"
    else:
        why = ""
    att.settle()
    settle()
    return why


def offered(target, route):
    """(True, "") when the consumer imports a plain float32 (2, 3) tensor through `route`, else
    (False, why); cached per target. "dlpack" is always offered."""
    key = (target.name, route)
    if key not in _OFFERED:
        why = "" if route == "dlpack" else plain_import(target, None, route)
        _OFFERED[key] = (not why, why)
    return _OFFERED[key]


WHAT = {"dlpack": "__dlpack__", "unasked": "__dlpack__ handing out the kind not asked for",
        "capsule": "from_dlpack(capsule)", "xapi": "the C exchange API"}


def _probe_crash(target, route):
    """What a death while offered() probes `route` is (Check.set_case's crash_as): through
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
    probe is the test's reproducer while it runs (plain_import), so that a death in it is
    reported with the plain import that caused it; the test is its own reproducer again after."""
    probing = check is not None and route != "dlpack" and (target.name, route) not in _OFFERED
    if probing:
        check.set_case(plain_import, {"route": route}, crash_as=_probe_crash(target, route))
    ok, why = offered(target, route)
    if probing:
        check.set_case(None)
    if not ok:
        raise kit.Unsupported("route %s not offered: %s%s" % (WHAT[route], why, {
            "capsule": "; the array API does not require from_dlpack to take capsules",
            "unasked": "; refusing a capsule of a kind it did not ask for is its right",
            "xapi": "; the exchange table is optional for consumers (XAPI-20)"}.get(route, "")))
