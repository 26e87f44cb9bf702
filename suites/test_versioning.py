"""VER: version negotiation (max_version), the version field, and the consumer's handling of
versions it did not ask for.

A producer whose __dlpack__ rejects max_version with TypeError is an old (pre-2023.12)
producer: the versioned checks report `unsupported` for it, with the reason. A consumer that
never passes max_version >= (1, 0) takes legacy capsules only ("consumers may delay using
max_version"): its versioned checks report `unsupported` too.
"""

from dlconform import _probe, kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import imports as imp
from support import readings as rd
from support import tensors as tns
from support.marks import consumer, producer


# ============================================================================ producer
@producer("VER-01")
def test_producer_accepts_max_version_tuple(target, check):
    """__dlpack__ takes max_version as a (major, minor) tuple of ints and returns a capsule for
    consumer versions of its own major (equal, newer minor) and a newer major (or BufferError).
    An older major (0, x) is VER-04's case, judged by test_older_major_gets_legacy_or_buffererror:
    a producer that mishandles it breaks VER-04, not the form of the argument."""
    x, values = tns.make(target)
    for mv in ((1, 0), (1, 3), (1, 99), (2, 0)):
        try:
            cap = pycap.export_versioned(x, mv)
        except BufferError as e:
            # allowed for an older major (VER-04) and a newer one the producer cannot serve
            check.that(mv[0] != 1, "VER-01", "max_version=%r: BufferError for the producer's own major: %s"
                       % (mv, tries.describe_exc(e)))
            continue
        check.that(pycap.is_capsule(cap), "VER-01", "max_version=%r returned %s, not a PyCapsule"
                   % (mv, type(cap).__name__))
        del cap


@producer("VER-02")
def test_no_max_version_gives_legacy(target, check):
    """Without max_version (or with None) the producer returns the legacy "dltensor" capsule.
    Reading: BufferError (allowed from March 2025) reports pass with a note."""
    x, values = tns.make(target)
    calls = [("__dlpack__()", lambda: x.__dlpack__())]
    if not pycap.producer_is_legacy_only(x):
        calls.append(("__dlpack__(max_version=None)", lambda: x.__dlpack__(max_version=None)))
    for label, fn in calls:
        try:
            cap = fn()
        except BufferError as e:
            check.record("VER-02", "pass", "%s raised BufferError (allowed from March 2025 for producers that "
                         "dropped DLManagedTensor): %s" % (label, tries.describe_exc(e)))
            continue
        name = kit.inspect(cap)["name"] if pycap.is_capsule(cap) else type(cap).__name__
        check.equal(name, pycap.LEGACY, "VER-02", "%s: capsule name" % label)
        del cap


@producer("VER-03")
def test_versioned_capsule_at_producer_version(target, check):
    """A consumer max of at least the producer's version, or the same major, gets a versioned
    capsule at the producer's own version (or at max_version itself, recommended)."""
    x, values = tns.make(target)
    # the producer's own version: what it answers to a consumer newer than anything
    info = kit.inspect(pycap.export_versioned(x, (99, 99)))
    name, own = info["name"], info.get("version")
    if name != pycap.VERSIONED or own is None:
        check.that(False, "VER-03", "max_version=(99, 99) gave a %r capsule with version %r" % (name, own))
        return
    for mv in pycap.MAX_VERSIONS:
        if not (mv >= tuple(own) or mv[0] == own[0]):
            continue
        cap = pycap.export_versioned(x, mv)
        info = kit.inspect(cap)
        if not check.equal(info["name"], pycap.VERSIONED, "VER-03", "max_version=%r: capsule name" % (mv,)):
            continue
        v = tuple(info["version"])
        check.that(v == tuple(own) or (v == mv and v[0] == own[0]), "VER-03",
                   "max_version=%r: capsule version %r; the producer's own version is %r" % (mv, v, tuple(own)))
        del cap


@producer("VER-04")
def test_older_major_gets_legacy_or_buffererror(target, check):
    """A consumer at major 0 gets the legacy DLManagedTensor capsule, or BufferError when the
    producer no longer has it."""
    x, values = tns.make(target)
    for mv in ((0, 8), (0, 0)):
        try:
            cap = pycap.export_versioned(x, mv)
        except BufferError as e:
            check.record("VER-04", "pass", "max_version=%r: BufferError (no legacy struct): %s"
                         % (mv, tries.describe_exc(e)))
        except kit.Unsupported:
            raise
        except Exception as e:  # noqa: BLE001
            check.that(False, "VER-04", "max_version=%r raised %s; expected a legacy capsule or BufferError"
                       % (mv, tries.describe_exc(e)))
        else:
            name = kit.inspect(cap)["name"] if pycap.is_capsule(cap) else type(cap).__name__
            check.equal(name, pycap.LEGACY, "VER-04", "max_version=%r: capsule name" % (mv,))
            del cap


@producer("VER-07")
def test_version_field(target, check):
    """DLManagedTensorVersioned.version is the DLPack version the producer implements: major >= 1,
    the same for every tensor, dtype and view."""
    seen = []
    for dtype in dty.pick(target)[:3]:
        x, values = tns.make(target, dtype, (2, 3))
        for label, t in [("x", x)] + tns.views(target, x, [("x.T", ("transpose", (1, 0)))]):
            cap = pycap.export_versioned(t)
            info = kit.inspect(cap)
            if info["kind"] != "versioned":
                raise kit.Unsupported("max_version=(1, 3) gave a %r capsule (see CAP-02/VER-03)" % info["name"])
            ver = info["version"]
            seen.append(tuple(ver))
            check.that(ver[0] >= 1, "VER-07", "%s %s: version %r in a DLManagedTensorVersioned (major 0 is the "
                       "legacy struct's era)" % (dtype, label, ver))
            del cap
    check.that(len(set(seen)) == 1, "VER-07", "versions differ between exports: %r" % sorted(set(seen)))
    if seen and max(seen) > pycap.SUITE_VERSION:
        check.record("VER-07", "pass", "version %r is newer than the suite's dlpack.h %r"
                     % (max(seen), pycap.SUITE_VERSION))


@producer("VER-10")
def test_abi_prefix_deleter(target, check):
    """The fields up to flags (version, manager_ctx, deleter, flags) sit at their ABI offsets, so
    a consumer of any version can call the deleter: it is found and called through them."""
    x, values = tns.make(target)
    cap = pycap.export_versioned(x)
    info = kit.inspect(cap)
    if info["kind"] != "versioned":
        raise kit.Unsupported("max_version=(1, 3) gave a %r capsule" % info["name"])
    word = pycap.read_word(info["pointer"] + pycap.deleter_offset("versioned"))
    check.equal(word, info["deleter"], "VER-10", "the word at the deleter's ABI offset")
    issues = [(c, m) for c, m in _probe.check(cap) if c == "VER-10"]
    check.that(not issues, "VER-10", "; ".join(m for _, m in issues))
    if not info["deleter"]:
        # the tracker below would put its own deleter in the NULL slot and always pass
        check.warn("VER-10", "the deleter at its ABI offset (%d) is NULL: allowed when the producer has nothing to "
                   "release (OWN-01), but then no consumer can give the tensor back, and a producer that lays out "
                   "the prefix otherwise shows the same NULL here" % pycap.deleter_offset("versioned"))
        return
    tracker = kit.instrument(cap)
    check.that(kit.consume(cap).release(), "VER-10", "no deleter found through the fixed-layout prefix")
    check.equal(tracker.calls, 1, "VER-10", "deleter calls through the fixed-layout prefix")


@producer("VER-11")
def test_producer_offers_both_structs(target, check):
    """During the transition a producer should export both DLManagedTensor (legacy) and
    DLManagedTensorVersioned."""
    x, values = tns.make(target)
    try:
        legacy = kit.inspect(x.__dlpack__())["name"]
    except BufferError as e:
        legacy = "BufferError: %s" % e
    try:
        versioned = kit.inspect(pycap.export_versioned(x))["name"]
    except kit.Unsupported as e:  # a legacy-only producer: the very gap VER-11 names
        versioned = "none (%s)" % e
    check.that(legacy == pycap.LEGACY and versioned == pycap.VERSIONED, "VER-11",
               "legacy export: %s; versioned export: %s" % (legacy, versioned))


# ============================================================================ consumer
@consumer("VER-01")
def test_consumer_passes_max_version_tuple(target, check):
    """A consumer that passes max_version passes a (major, minor) tuple of two ints."""
    imp.passes_max_version(check, tries.consumer_max_versions(target)[0])


@consumer("VER-05", "OWN-03")
def test_consumer_checks_name_and_version(target, check):
    """Whatever max_version it passed, the consumer follows the capsule it gets: a legacy capsule
    from a producer that accepts max_version, a versioned (1, 0) capsule, and refuses a capsule
    with an unknown name."""
    imp.follows_capsule_kind(check, target, kit.Forge, imp.HostResults(target))


@consumer("VER-06", "OWN-03")
def test_consumer_retries_without_new_keywords(target, check):
    """An old producer's __dlpack__ takes only stream and raises TypeError for max_version,
    dl_device or copy: the consumer retries without them and imports the legacy capsule."""
    imp.retries_legacy(check, target, kit.RecordingProducer(kit.forges(shape=(2, 3)), legacy_only=True, keep=True),
                       imp.HostResults(target))


@consumer("VER-06", feeds="valid")
def test_consumer_retries_for_every_keyword(target, check):
    """The VER-06 retry whatever from_dlpack was asked: an old producer's TypeError for the new
    keywords is retried without them also under copy=True, copy=False and device='cpu' (the
    consumer then meets the request itself). A refusal for another reason is left to the
    checks of that reason."""
    imp.retries_for_every_keyword(
        check, target, lambda: kit.RecordingProducer(kit.forges(shape=(2, 3)), legacy_only=True, keep=True),
        imp.HostResults(target))


@consumer("VER-08", "VER-10", "OWN-03")
def test_consumer_refuses_other_major(target, check):
    """A versioned capsule whose version.major is not 1 must be refused, reading nothing past
    flags (VER-10: only that prefix keeps its layout), and its deleter called (VER-08), exactly
    once (OWN-03's count). The hostile case has a NULL shape and NULL data behind the version."""
    tries.require_versioned_consumer(target)
    cases = [
        ("version (2, 0)", {"version": (2, 0)}),
        ("version (0, 9)", {"version": (0, 9)}),
        ("version (2, 0), hostile fields", {"version": (2, 0), "data": "null", "shape_null": True, "ndim": 3}),
    ]
    for what, extra in cases:
        forge = kit.Forge(versioned=True, shape=(2, 3), **extra)
        refused = tries.expect_refusal(target, check, "VER-08", forge, what)
        tries.deleter_once(check, forge.deleter_calls, "%s, once the capsule is gone" % what, calls_clause="VER-08")
        # VER-10: only the prefix up to flags keeps its layout across majors, so a consumer
        # may call the deleter through it and nothing else
        check.that(refused, "VER-10", "%s: imported, so fields past the ABI-stable prefix (version, "
                   "manager_ctx, deleter, flags) were used" % what)


@consumer("VER-09", "OWN-03")
def test_consumer_newer_minor(target, check):
    """Version (1, 99) with fields the consumer knows is usable; an unknown dtype code or device
    type must not be misread: refusing it passes, reading it as another dtype or device fails, and
    carrying it unchanged (or keeping no dtype or device at all) is warn (catalogue reading)."""
    tries.require_versioned_consumer(target)
    forge = kit.Forge(versioned=True, version=(1, 99), shape=(2, 3))
    att = tries.expect_import(check, target, "VER-09", forge, "version (1, 99), known fields")
    if att.exc is not None:
        check.that(False, "VER-09", "version (1, 99), known fields: from_dlpack raised %s"
                   % tries.describe_exc(att.exc))
    att.drop_capsules()
    tries.settle()
    for what, extra, device in (("unknown dtype code 99", {"dtype": (99, 32, 1)}, (1, 0)),
                                ("unknown device type 99", {"device": (99, 0)}, (99, 0))):
        forge = kit.Forge(versioned=True, version=(1, 99), shape=(2, 3), **extra)
        p = kit.RecordingProducer(forge, device=device, keep=True)
        att = tries.Attempt(target, p)
        if att.exc is None:
            # an unknown value must not be misread (VER-09); carrying it unchanged, or keeping
            # no dtype or device at all, reads nothing into it: the header calls such a tensor
            # safe only "as long as the consumer knows how to interpret all fields" (warn)
            check.record("VER-09", *rd.unknown_value_verdict(target, att, "version (1, 99), %s" % what,
                                                             dtype=extra.get("dtype"), device=extra.get("device")))
        else:
            check.refusal("VER-09", att, "version (1, 99), %s" % what)
        att.drop_capsules()  # while the result lives: it may be what keeps the capsule
        del p, att
        tries.settle()
        tries.deleter_once(check, forge.deleter_calls, "version (1, 99), %s, once the capsule is gone" % what,
                           expected=1 if forge.capsules_made else 0)


@consumer("VER-11")
def test_consumer_takes_both_structs(target, check):
    """During the transition a consumer should import both capsule kinds."""
    legacy = kit.RecordingProducer(kit.forges(shape=(3,)), legacy_only=True, keep=True)
    att = tries.Attempt(target, legacy)
    exc = att.exc
    legacy_ok = exc is None and legacy.last_kind == "legacy"
    att.drop_capsules()
    att.result = None
    if not tries.consumer_takes_versioned(target):
        if legacy_ok:  # the very gap VER-11 names: a SHOULD, so a warn
            check.that(False, "VER-11", "the consumer imports legacy capsules only: it never asks for versioned "
                       "ones (no max_version >= (1, 0)), and VER-11 asks a library to handle both during the "
                       "transition")
            return
        check.that(False, "VER-11", "the consumer imports neither kind: %s" % (tries.describe_exc(exc) if exc else ""))
        return
    p = kit.RecordingProducer(kit.forges(shape=(3,)), keep=True)
    att2 = tries.Attempt(target, p)
    exc2 = att2.exc
    versioned_ok = exc2 is None and p.last_kind == "versioned"
    att2.drop_capsules()
    att2.result = None
    tries.settle()
    check.that(legacy_ok and versioned_ok, "VER-11", "legacy import: %s; versioned import: %s" % (
        "ok" if legacy_ok else (tries.describe_exc(exc) if exc else "got %s" % legacy.last_kind),
        "ok" if versioned_ok else (tries.describe_exc(exc2) if exc2 else "got %s" % p.last_kind)))
