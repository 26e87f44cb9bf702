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
from dlconform.xapi_forge import handout_producer

from . import repros as rp
from .attempts import Attempt, consumer_takes_versioned, describe_exc, settle, valid_kwargs

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


def lines(target, route, forge_kwargs=None, device=(1, 0), versioned=None, **kw):
    """The reproducer of attempt(): the import, the result, and the deleter calls while the
    result lives and after it died (exactly one after is expected)."""
    fk = valid_kwargs(forge_kwargs or {})
    args = ", ".join("%s=%r" % kv for kv in sorted(fk.items()))
    dev = "" if tuple(device) == (1, 0) else ", device=%r" % (tuple(device),)
    call = "%s" + "".join(", %s=%r" % kv for kv in sorted(kw.items()))
    out = rp.attempt_setup(target)
    if route == "dlpack":
        out += ["p = RecordingProducer(forges(%s)%s)" % (args, dev)]
        arg = "p"
    elif route in ("unasked", "capsule"):
        if versioned is None:
            versioned = (unasked_kind(target) == "versioned" if route == "unasked"
                         else consumer_takes_versioned(target))
        out += ["f = _ref.Forge(versioned=%r, %s)" % (versioned, args)]
        if route == "unasked":
            out += ["p = RecordingProducer(f%s)  # hands out %s capsules whatever is asked"
                    % (dev, "versioned" if versioned else "legacy")]
            arg = "p"
        else:
            out += ["cap = f.capsule()"]
            arg = "cap"
    else:
        out += ["from dlconform.xapi_forge import handout_producer",
                "a = _ref.ApiForge(0, null=%r)" % (list(TABLE_NULL),),
                "p = handout_producer(forges(%s), a%s)  # its type offers the table a" % (args, dev)]
        arg = "p"
    out += ["try:", "    y = %s" % target.repro_from_dlpack(call % arg),
            "    print('imported', repr(y)[:200])", "except Exception as e:",
            "    y = None; print('refused', type(e).__name__, e)"]
    if route == "xapi":
        out += ["print('exchange table calls', a.calls)"]
    if route != "capsule":
        out += ["f = p.forges[p.last_kind] if p.last_kind else None", "del p"]
    else:
        out += ["print('capsule name', _probe.inspect(cap)['name'])", "del cap"]
    out += ["gc.collect(); alive = f.deleter_calls if f else 0",
            "del y; gc.collect(); after = f.deleter_calls if f else 0",
            "print('deleter calls while the result lived', alive, 'after', after)",
            "assert after == (1 if f and f.capsules_made else 0), 'OWN-03: deleter calls %d' % after"]
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


def require(target, route):
    """Unsupported unless the consumer imports through `route` (offered())."""
    ok, why = offered(target, route)
    if not ok:
        raise Unsupported("route %s not offered: %s%s" % (WHAT[route], why, {
            "capsule": "; the array API does not require from_dlpack to take capsules",
            "unasked": "; refusing a capsule of a kind it did not ask for is its right",
            "xapi": "; the exchange table is optional for consumers (XAPI-20)"}.get(route, "")))
