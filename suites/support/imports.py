"""from_dlpack's keywords (`device`, `copy`), the max_version it passes and its retry for an old
producer, a READ_ONLY or IS_COPIED capsule and a NULL manager_ctx, judged once for any memory.

test_device.py, test_copy.py, test_versioning.py, test_flags.py and test_ownership.py judge what
a consumer makes of host memory; test_cuda_keywords.py what it makes of CUDA memory, with the
same judges below. A judge reads a result through a reader of its memory: `HostResults` here
(the adapter's describe()), or cuda.DeviceResults (the library's device: its reader of imports,
its addresses). A producer given to a judge says what its import must hold
(`expected_elements()`, or the forge it handed out) and which memory it exports (`original`, a
forge factory: a result there views it, a result elsewhere is a copy).
"""
import ctypes

from dlconform import kit

from . import attempts as tries
from . import capsules as pycap
from . import dtypes as dty
from . import tensors as tns

KDL_CPU, KDL_HEXAGON = 1, 16


def library_has_readonly(target):
    """Whether the library has read-only arrays of its own (target.readonly gives one)."""
    try:
        return target.readonly(tns.make(target, dty.pick(target)[0], (2,))[0]) is not None
    except Exception:  # noqa: BLE001 - a library that cannot make one has none to say of
        return False


class HostResults:
    """Results in host memory, read through the adapter's describe(): their elements, the
    address of their first element, whether they are read-only; and what the consumer's plain
    import of host memory does (copies_always, copy_breach: attempts.py)."""

    memory = "CPU"

    def __init__(self, target):
        self.target = target

    def elements(self, att):
        return tries.result_elements(self.target, att.result)[0]

    def address(self, att):
        return int(self.target.describe(att.result)["ptr"])

    def readonly(self, att):
        """True for a read-only result; False for a writable one of a library that has
        read-only arrays; None for a writable one of a library without them."""
        if self.target.describe(att.result)["readonly"]:
            return True
        return False if library_has_readonly(self.target) else None

    def copies_always(self):
        return tries.copies_always(self.target)

    def plain_lifetime(self):
        return tries.plain_lifetime(self.target)

    def require_versioned(self):
        tries.require_versioned_consumer(self.target)

    def copy_breach(self):
        return tries.copy_breach(self.target)


def expected_elements(p):
    """The elements an import of producer p's last export holds; None when p does not say."""
    if hasattr(p, "expected_elements"):
        return p.expected_elements()
    forge = p.forges.get(p.last_kind)
    return None if forge is None else forge.expected_elements()


def _original(p):
    """The forges of the memory p exports when it does not copy (p.original, else all it used)."""
    return p.original.made.values() if hasattr(p, "original") else p.forges.values()


def views_original(p, address):
    """Whether `address` lies in the memory p exports when it does not copy."""
    return any(a <= address < a + n for a, n in tries.memory_spans(_original(p)))


def host(target):
    """The CPU as from_dlpack's `device` keyword names it in the target's library ("cpu", or a
    device object of its own: target.host_device); the checks' messages say device='cpu'."""
    return target.host_device() if hasattr(target, "host_device") else "cpu"


def _call(kw):
    return "from_dlpack(p%s)" % "".join(", %s=%r" % kv for kv in kw.items())


# ---------------------------------------------------------------------------- API-05
def keeps_device(check, target, make_producer, device, results=None, refused="fail"):
    """API-05: from_dlpack(p), and with device=None where the consumer takes it, gives a result
    on p's device `device` (a result that names no device is taken for a CPU one), holding p's
    elements where `results` reads them. A refusal is `refused` (fail; a device consumer's
    clean refusal of that memory is DEV-07's case)."""
    for kw in [{}] + ([{"device": None}] if "device" in target.consumer_keywords() else []):
        p = make_producer()
        att = tries.Attempt(target, p, **kw)
        att.drop_capsules()
        what = "%s of a producer on %r" % (_call(kw), device)
        if att.exc is not None:
            tries.record_refused(check, "API-05", att, what, clean=refused)
            continue
        got = tries.result_device(att.result)
        if got is None and device[0] != KDL_CPU:
            check.record("API-05", "unsupported", "%s: the result has no __dlpack_device__ to say where it lives"
                         % what)
        else:
            check.that(got in ((None, device) if device[0] == KDL_CPU else (device,)), "API-05",
                       "%s: the result is on device %r" % (what, got))
        if results is not None:
            elements(check, results, att, p, "API-05", what)
        att.result = None
        tries.settle()


def elements(check, results, att, p, clause, what):
    """Records `clause` on the elements of the result of att: p's, or unsupported when the
    reader cannot read them (saying why). True when they were read."""
    try:
        got = results.elements(att)
    except (kit.Unsupported, NotImplementedError) as e:
        check.record(clause, "unsupported", "%s was imported, but its elements cannot be read here: %s" % (what, e))
        return False
    want = expected_elements(p)
    if want is None:
        return False
    check.equal(got, want, clause, "%s: the result's elements" % what)
    return True


# ---------------------------------------------------------------------------- CPY-06
def copy_keyword(check, target, make_producer, results):
    """CPY-06: from_dlpack(copy=True) always copies, copy=False never does, None reuses the
    producer's memory when it can. make_producer() gives a producer that honours copy=True
    itself (a consumer may leave the copy to it) and exports `original` memory otherwise. A
    consumer that copies every import refuses copy=False: the class of that refusal is CPY-07's."""
    tries.require_keywords(target, "copy")
    for copy in (True, False, None):
        p = make_producer()
        att = tries.Attempt(target, p, copy=copy)
        exc, what = att.exc, "copy=%r" % (copy,)
        if exc is not None:
            if copy is False and not check.unclean(exc) and results.copies_always():
                # it never copied: CPY-06 holds; the class of the refusal is CPY-07's
                check.record("CPY-06", "pass", "copy=False raised %s: this consumer copies every import, so a "
                             "copy is unavoidable for it" % tries.describe_exc(exc))
                check.that(isinstance(exc, (ValueError, BufferError)), "CPY-07", "copy=False, where this consumer "
                           "cannot avoid a copy, raised %s; the spec names ValueError or BufferError"
                           % tries.describe_exc(exc))
            else:
                check.record("CPY-06", "fail", "copy=%r raised %s for a producer of %s memory"
                             % (copy, tries.describe_exc(exc), results.memory))
            continue
        elements(check, results, att, p, "CPY-06", what)
        try:
            address = results.address(att)
        except (kit.Unsupported, NotImplementedError, KeyError) as e:
            check.record("CPY-06", "unsupported", "%s: where the result lives cannot be read here: %s" % (what, e))
        else:
            _judge_copy(check, copy, views_original(p, address), address, p, results)
        att.result = None
        tries.settle()


def _judge_copy(check, copy, shares, address, p, results):
    if copy is True:
        check.that(not shares, "CPY-06", "copy=True: the result views the producer's memory (%#x)" % address)
    elif not shares:
        verdict, reading = results.copy_breach() if copy is None else ("fail", "")
        producer = ", ".join("%#x" % a for a, _ in tries.memory_spans(_original(p)))
        check.record("CPY-06", verdict, "copy=%r: the result does not view the producer's memory (result %#x, "
                     "producer %s)%s" % (copy, address, producer, reading))
    else:
        check.record("CPY-06", "pass")


# ---------------------------------------------------------------------------- CPY-07, CPY-08, DEV-06, DEV-07
def copy_false_refused(check, target, make_producer):
    """CPY-07: from_dlpack(x, device='cpu', copy=False) of a producer of memory off the CPU that
    it can copy to the host needs a copy: the array API says ValueError (device text, Raises)
    and BufferError (copy text); either is accepted (the catalogue's reading of CPY-07),
    anything else, or an import, fails; unless the consumer refuses device='cpu' without
    copy=False too, which is not about the copy (DEV-06 and CPY-08 judge it)."""
    tries.require_keywords(target, "copy", "device")
    p = make_producer()
    exc = tries.Attempt(target, p, device=host(target), copy=False).exc
    if exc is None:
        check.record("CPY-07", "fail", "copy=False imported non-CPU memory to the CPU (producer calls %r)" % (p.calls,))
    elif isinstance(exc, (ValueError, BufferError)):
        check.record("CPY-07", "pass")
    else:
        alone = tries.Attempt(target, make_producer(), device=host(target)).exc
        if alone is not None:
            raise kit.Unsupported("device='cpu' is refused with copy=False (%s) and without it (%s): the refusal is "
                                  "not the copy's; DEV-06 and CPY-08 judge device='cpu'"
                                  % (tries.describe_exc(exc), tries.describe_exc(alone)))
        check.record("CPY-07", "fail", "copy=False when a copy is needed raised %s; the spec names ValueError "
                     "or BufferError" % tries.describe_exc(exc))


def unservable_refused(check, target, p, results=None):
    """CPY-08: from_dlpack(x, device='cpu') of p, memory off the CPU that p cannot copy to the
    host (it refuses dl_device=(1, 0)): BufferError. Where that memory is real (`results`
    reads it: device memory), a consumer that can read it may make the host copy itself: a CPU
    result holding p's elements serves the request (the request is not one it can never serve);
    any other result fails."""
    tries.require_keywords(target, "device")
    att = tries.Attempt(target, p, device=host(target))
    exc = att.exc
    if exc is None and results is not None:
        dev = tries.result_device(att.result)
        if check.that(dev in (None, (KDL_CPU, 0)), "CPY-08", "device='cpu' gave a result on %r (producer calls %r)"
                      % (dev, p.calls)):
            cpu_result_elements(check, target, att, p, "CPY-08", "device='cpu', served by the consumer's own copy")
    elif exc is None:
        check.record("CPY-08", "fail", "device='cpu' gave a result for memory that cannot reach the host "
                     "(producer calls %r)" % (p.calls,))
    elif isinstance(exc, BufferError):
        check.record("CPY-08", "pass")
    else:
        check.record("CPY-08", "fail", "device='cpu' for memory that cannot reach the host raised %s, not "
                     "BufferError" % tries.describe_exc(exc))
    att.result = None
    tries.settle()


def cpu_result_elements(check, target, att, p, clause, what):
    """Records `clause` on the elements of att's CPU result, read through the adapter's
    describe(): p's. A result the adapter cannot read (the generic target over a library whose
    own export disagrees with its import, a device library's adapter that reads no host arrays)
    is not judged on them."""
    try:
        got = tries.result_elements(target, att.result)[0]
    except (kit.Unsupported, NotImplementedError):
        return
    want = expected_elements(p)
    if want is not None:
        check.equal(got, want, clause, "%s: values of the CPU result" % what)


def host_result(check, target, label, p):
    """DEV-06: from_dlpack(p, device='cpu') gives a CPU result holding p's elements. A result
    whose values the target cannot read (the generic target over a library whose own export
    disagrees with its import, a device library's adapter that reads no host arrays) is judged
    on its device alone."""
    att = tries.Attempt(target, p, device=host(target))
    att.drop_capsules()
    if att.exc is not None:
        check.warn("DEV-06", "%s: from_dlpack(device='cpu') raised %s (calls %r); DEV-06 says it should give "
                   "CPU-accessible memory" % (label, tries.describe_exc(att.exc), p.calls))
        return
    dev = tries.result_device(att.result)
    if check.that(dev in (None, (KDL_CPU, 0)), "DEV-06", "%s: device='cpu' gave a result on %r" % (label, dev)):
        cpu_result_elements(check, target, att, p, "DEV-06", label)  # a result off the host is not read as host memory
    att.result = None
    tries.settle()


def foreign_refused(check, target):
    """DEV-07: memory on a device the consumer lacks (kDLHexagon) should be refused with
    BufferError (older python_spec text said TypeError)."""
    p = kit.RecordingProducer(kit.forges(shape=(2, 3), device=(KDL_HEXAGON, 0)), device=(KDL_HEXAGON, 0), keep=True)
    att = tries.Attempt(target, p)
    att.drop_capsules()
    exc = att.exc
    if exc is None:
        dev = tries.result_device(att.result)
        check.that(dev == (KDL_HEXAGON, 0), "DEV-07", "memory of device (%d, 0) was imported as a result on %r"
                   % (KDL_HEXAGON, dev))
    elif check.refusal("DEV-07", exc, "the import", verdict="fail") and not isinstance(exc, BufferError):
        check.warn("DEV-07", "refused with %s; DEV-07 recommends BufferError (python_spec before v1.0 said "
                   "TypeError)" % tries.describe_exc(exc))


# ---------------------------------------------------------------------------- VER-01, VER-06
def passes_max_version(check, seen):
    """VER-01: each max_version the consumer passed (`seen`: the keyword of each __dlpack__
    call its producer recorded) is a tuple of two ints, (1, 0) or above; unsupported where it
    passed none (consumers may delay using it)."""
    passed = [m for m in seen if m is not None]
    if not passed:
        raise kit.Unsupported("the consumer does not pass max_version (calls: %r); consumers may delay using it"
                              % (seen,))
    for m in passed:
        ok = (type(m) is tuple and len(m) == 2 and all(type(v) is int for v in m))
        check.that(ok, "VER-01", "max_version=%r (%s): expected a tuple of two ints" % (m, type(m).__name__))
        if ok:
            check.that(m >= (1, 0), "VER-01", "max_version=%r is below (1, 0): the consumer asks for legacy "
                       "capsules through max_version" % (m,))


def follows_capsule_kind(check, target, make_forge, results):
    """VER-05: whatever max_version it passed, the consumer follows the capsule it gets: a legacy
    capsule from a producer that accepts max_version, a versioned (1, 0) one (each imported with
    its elements, its ownership departing from the consumer's plain import in nothing: a
    shared departure is CAP-03's or OWN-03's, reported there), and refuses a capsule with an
    unknown name, its deleter run once. `make_forge(**kw)`: a kit.Forge of the memory judged."""
    results.require_versioned()
    plain = results.plain_lifetime()
    for what, fk in (("legacy capsule although max_version was passed", {"versioned": False}),
                     ("versioned capsule at (1, 0)", {"versioned": True, "version": (1, 0)})):
        forge = make_forge(shape=(2, 3), **fk)
        p = kit.RecordingProducer(forge, keep=True, device=forge.device)
        att = tries.Attempt(target, p)
        if att.exc is None:
            elements(check, results, att, p, "VER-05", what)
            tries.ownership(check, att.lifetime(), plain, "%s: " % what)
        att.drop_capsules()
        tries.settle()
        exc = att.exc
        if exc is None:
            continue
        tries.deleter_once(check, forge.deleter_calls, "%s, refused with %s" % (what, tries.describe_exc(exc)))
        if check.unclean(exc):
            check.record("VER-05", "fail", "%s: refused with %s" % (what, tries.describe_exc(exc)))
        elif fk["versioned"]:
            check.record("VER-05", "fail", "%s: from_dlpack raised %s" % (what, tries.describe_exc(exc)))
        else:
            # the consumer looked at the name and refused the kind it did not ask for: it checked
            # (VER-05); taking both kinds is VER-11's SHOULD
            check.warn("VER-05", "%s: refused with %s; the consumer checks the capsule name, but a legacy capsule "
                       "is what a producer at DLPack 0.x answers to max_version (VER-03), and consumers should "
                       "take both kinds (VER-11)" % (what, tries.describe_exc(exc)))
    forge = make_forge(versioned=True, shape=(2, 3), capsule_name="dltensor_v9")
    tries.expect_refusal(target, check, "VER-05", forge, "capsule named 'dltensor_v9'")
    tries.deleter_once(check, forge.deleter_calls, "capsule named 'dltensor_v9', once it is gone")


def retries_legacy(check, target, p, results):
    """VER-06: p is an old producer whose __dlpack__ takes only stream and raises TypeError for
    max_version, dl_device or copy: the consumer retries without them and imports the legacy
    capsule, holding p's elements; its deleter runs once the result died."""
    att = tries.Attempt(target, p)
    att.drop_capsules()
    exc, calls = att.exc, list(p.calls)
    if exc is not None:
        check.that(False, "VER-06", "import from a legacy-only producer failed (calls %r): %s"
                   % (calls, tries.describe_exc(exc)))
        return
    forge = p.forges["legacy"]
    elements(check, results, att, p, "VER-06", "the import from a legacy-only producer")
    if tries.new_keywords_first(calls):
        check.that(len(calls) >= 2 and not (set(calls[-1]) - {"stream"}), "VER-06",
                   "the last __dlpack__ call still passed new keywords: %r" % (calls,))
        check.record("VER-06", "pass", "retried: %r" % (calls,))
    else:
        check.record("VER-06", "pass", "the consumer passes no new keywords (calls %r), so old producers work "
                     "as is" % (calls,))
    att.result = None
    tries.settle()
    tries.deleter_once(check, forge.deleter_calls, "the import from a legacy-only producer, once the result died")


def retries_for_every_keyword(check, target, make_producer, results):
    """VER-06 whatever from_dlpack was asked: an old producer's (make_producer(): legacy-only)
    TypeError for the new keywords is retried without them also under copy=True, copy=False and
    device='cpu' (the consumer then meets the request itself). A refusal for another reason is
    left to the checks of that reason."""
    kws = target.consumer_keywords()
    variants = ([{"copy": c} for c in (True, False) if "copy" in kws]
                + ([{"device": host(target)}] if "device" in kws else []))
    if not variants:
        raise kit.Unsupported("from_dlpack takes neither copy nor device (the check of the call without them "
                              "covers it)")
    for kw in variants:
        args = "".join(", %s=%r" % i for i in kw.items())
        p = make_producer()
        att = tries.Attempt(target, p, **kw)
        calls = list(p.calls)
        if att.exc is not None:
            if tries.skipped_retry(att):
                check.warn("VER-06", "from_dlpack(p%s): an old producer's TypeError for the new keywords (calls %r) "
                           "was not retried without them: %s" % (args, calls, tries.describe_exc(att.exc)))
            else:
                check.refusal("VER-06", att, "from_dlpack(p%s)" % args)
            att.drop_capsules()
            tries.settle()
            continue
        elements(check, results, att, p, "VER-06", "from_dlpack(p%s)" % args)
        att.settle()


# ---------------------------------------------------------------------------- OWN-06, FLG-05
class NullManagerCtx:
    """Producer p with manager_ctx NULL in each capsule it hands out (OWN-06: a consumer treats it
    as opaque and accepts NULL; the kit's deleters do not read it). Everything else is p's."""

    def __init__(self, p):
        self._p = p

    def __getattr__(self, name):
        return getattr(self._p, name)

    def __dlpack_device__(self):
        return self._p.__dlpack_device__()

    def __dlpack__(self, *args, **kw):
        cap = self._p.__dlpack__(*args, **kw)
        info = kit.inspect(cap)
        ctypes.c_void_p.from_address(info["pointer"] + pycap.manager_ctx_offset(info["kind"])).value = None
        return cap


def null_manager_ctx(check, target, p, results):
    """OWN-06: p's capsules with a NULL manager_ctx import with p's elements; what the ownership
    of such an import departs from the consumer's plain one is CAP-03's and OWN-03's
    (tries.ownership), and a refused capsule's deleter runs once (tries.deleter_once)."""
    q = NullManagerCtx(p)
    att = tries.Attempt(target, q)
    what = "a capsule with NULL manager_ctx"
    if att.exc is not None:
        check.record("OWN-06", "fail", "%s refused: %s" % (what, att.refusal()))
        tries.deleter_once(check, att.settle(), "%s, refused and let go" % what)
        return
    elements(check, results, att, q, "OWN-06", what)
    tries.ownership(check, att.lifetime(), results.plain_lifetime(), "%s: " % what)


def is_copied_import(check, target, make_producer, results):
    """FLG-05: a capsule flagged IS_COPIED (alone, and with READ_ONLY) is the consumer's alone:
    it imports as any other, with the elements of make_producer(flags), its ownership as the
    consumer's plain import's (tries.ownership). Refusing it is warn, but where the consumer
    refuses READ_ONLY alone (make_producer(READ_ONLY)'s capsule): the pair's refusal is then
    FLG-03's finding."""
    results.require_versioned()
    plain = results.plain_lifetime()
    for flags in (kit.FLAG_IS_COPIED, kit.FLAG_IS_COPIED | kit.FLAG_READ_ONLY):
        what = "flags %#x" % flags
        p = make_producer(flags)
        att = tries.Attempt(target, p)
        if att.exc is None:
            elements(check, results, att, p, "FLG-05", what)
            tries.ownership(check, att.lifetime(), plain, "%s: " % what)
            continue
        att.drop_capsules()
        check.refusal("FLG-05", att, what)
        if flags & kit.FLAG_READ_ONLY and _refused(target, make_producer(kit.FLAG_READ_ONLY)):
            check.record("FLG-05", "pass", "%s: refused, as READ_ONLY alone is (FLG-03 judges that); IS_COPIED is not "
                         "the reason" % what)
        else:
            check.warn("FLG-05", "%s: the consumer refuses an IS_COPIED capsule: %s" % (what, att.refusal()))
        att.result = None
        tries.settle()


def _refused(target, p):
    """Whether the consumer refuses p's capsule (everything let go after)."""
    att = tries.Attempt(target, p)
    att.settle()
    return att.exc is not None


# ---------------------------------------------------------------------------- FLG-03
def readonly_import(check, target, p, results):
    """FLG-03: the import of p's READ_ONLY capsule. A consumer with read-only arrays honours the
    flag (read-only result); one without ignores it (preferred over raising). Raising is
    allowed but warn; a writable view from a library that has read-only arrays is warn; a
    writable copy passes. Returns the Attempt (its result alive), None when it was refused."""
    att = tries.Attempt(target, p)
    if p.last_kind == "legacy":
        att.settle()
        raise kit.Unsupported("the consumer asked for a legacy capsule (max_version %r), which has no flags: READ_ONLY "
                              "cannot reach it" % ([c.get("max_version") for c in p.calls],))
    if att.exc is not None:
        att.drop_capsules()
        if check.unclean(att):
            check.that(False, "FLG-03", "READ_ONLY import raised %s" % tries.describe_exc(att.exc))
            return None
        raise kit.Warn("FLG-03", "the consumer refuses READ_ONLY capsules (%s); ignoring the flag is preferred over "
                       "raising" % tries.describe_exc(att.exc))
    elements(check, results, att, p, "FLG-03", "a READ_ONLY capsule")
    readonly = results.readonly(att)
    try:
        copied = not views_original(p, results.address(att))
    except (kit.Unsupported, NotImplementedError, KeyError):
        copied = False
    if readonly:
        check.record("FLG-03", "pass", "honoured: the result is read-only")
    elif copied:
        check.record("FLG-03", "pass", "the result is a copy: writing to it leaves the read-only memory alone")
    elif readonly is False:
        check.warn("FLG-03", "the library has read-only arrays but the import of a READ_ONLY capsule is writable "
                   "(the flag is not honoured)")
    else:
        check.record("FLG-03", "pass", "ignored: the library has no read-only arrays (the preferred behaviour)")
    return att
