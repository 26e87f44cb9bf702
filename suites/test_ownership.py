"""OWN-01..06: the deleter and who owns what.

Producer side: the capsule destructor runs the deleter of an unconsumed capsule once; the
deleter releases what the export held (manager_ctx, the managed struct); data, shape and
strides outlive the producer's Python object until the deleter runs; the deleter works on a
thread that does not hold the GIL. Consumer side: a forged capsule's deleter is called 0
times while the import lives and exactly once after, a NULL deleter is never called, and a
NULL manager_ctx is fine.
"""
import ctypes
import gc
import os
import sys
import threading

from dlconform import _probe, kit
from support import attempts as tries
from support import capsules as pycap
from support import dtypes as dty
from support import imports as imp
from support import readings as rd
from support import repros as rp
from support import tensors as tns
from support.marks import consumer, producer


def _dtype(target):
    for d in ["float32", "int32", "float64"] + list(target.dtypes()):
        if d in target.dtypes() and d in dty.DTYPES:
            try:
                target.make(d, (1,), dty.distinct_values(d, (1,))).__dlpack__()
                return d
            except Exception:
                continue
    raise kit.Unsupported("no dtype of %s exports" % target.name)


def _kinds(target, dtype):
    x = target.make(dtype, (1,), dty.distinct_values(dtype, (1,)))
    return [False, True] if pycap.versioned_supported(x) else [False]


def _case(target, dtype, shape, seed=0):
    """A fresh tensor of `shape` (distinct values) for one export."""
    return target.make(dtype, shape, dty.distinct_values(dtype, shape, seed))


def _cases(target, shape):
    """(versioned, _case()) of each capsule kind the producer offers."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        yield versioned, _case(target, dtype, shape)


# ============================================================================ producer
@producer("CAP-05")
def test_unconsumed_capsule_runs_deleter_once(target, check):
    """An exported capsule nobody consumes runs its deleter exactly once when it dies."""
    for versioned, x in _cases(target, (4,)):
        cap = pycap.export_kind(x, versioned)
        tr = kit.instrument(cap)
        del cap
        gc.collect()
        check.equal(tr.calls, 1, "CAP-05", "%s capsule dropped unconsumed: calls of the struct's deleter (%s)"
                    % ("versioned" if versioned else "legacy", rd.UNCALLED_DELETER))


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@producer("OWN-02")
def test_deleter_releases_the_export(target, check):
    """The deleter destroys manager_ctx and frees the managed struct: the tensor's refcount is
    back to its value before the export, and export/release cycles do not grow memory."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        x = _case(target, dtype, (3, 2))
        gc.collect()
        before = sys.getrefcount(x)
        h = kit.consume(pycap.export_kind(x, versioned))
        h.release()
        del h
        gc.collect()
        after = sys.getrefcount(x)
        check.that(after <= before, "OWN-02", "refcount of the tensor is %d after the deleter ran, %d before the "
                   "export: the deleter did not release manager_ctx's reference" % (after, before))
        n = 20000
        growth = []
        for r in range(3):
            a = _rss()
            for _ in range(n):
                kit.consume(pycap.export_kind(x, versioned)).release()
            growth.append(_rss() - a)
        # a leaked managed struct (>= 64 bytes with shape and strides) grows >= 1.2 MiB per round
        leaking = all(g > 32 * n for g in growth[1:])
        check.that(not leaking, "OWN-02", "%s export+release cycles grow memory by %s bytes per %d cycles: the "
                   "deleter does not free the managed struct" % ("versioned" if versioned else "legacy", growth, n))


@producer("OWN-05")
def test_consumed_tensor_outlives_producer_object(target, check):
    """After consume, data, shape and strides stay valid when the producer's object (and the
    view it was exported from) is deleted, until the deleter runs."""
    dtype = _dtype(target)
    shape = (3, 4)
    cases = [[], [("transpose", (1, 0))], [("slice", 1, 1, None, 2)], [("flip", 0)]]
    for versioned in _kinds(target, dtype):
        for ops in cases:
            x = _case(target, dtype, shape, seed=5)
            v, _ = tns.apply_views(target, x, ops)
            if v is None:
                continue
            expected = target.expected(v)
            cap = pycap.export_kind(v, versioned)
            info = pycap.fields(cap)
            layout = tns.compare_layout(target, v, info, dty.itemsize(dtype))
            h = kit.consume(cap)
            del cap, v, x
            gc.collect()
            junk = [bytearray(b"\xee" * 4096) for _ in range(256)]
            again = h.inspect()
            check.equal((again["data"], again["shape"], again["strides"], again["byte_offset"]),
                        (info["data"], info["shape"], info["strides"], info["byte_offset"]), "OWN-05",
                        "metadata after the producer object died (view %r)" % (ops,))
            if not layout:
                check.equal(h.read_elements(), expected, "OWN-05", "values after the producer object died (view %r)"
                            % (ops,))
            del junk
            h.release()


#: the environment of the OWN-04 child: a Python allocation without the GIL is a fatal error
GIL_ENV = {"PYTHONMALLOC": "debug"}


def gil_case(target, check, dtype, versioned):
    """OWN-04's case, run in a child with GIL_ENV: the deleter of a consumed capsule called from
    a thread that does not hold the GIL (a ctypes call releases it). The C tracker tells
    whether the caller held the GIL (the kit's cannot)."""
    x = _case(target, dtype, (4, 3))
    cap = pycap.export_kind(x, versioned)
    tr = _probe.instrument(cap)  # counts calls, logs whether the caller held the GIL
    info = kit.inspect(cap)
    kit.rename(cap, "used_" + info["name"])  # consumed: nothing else may call the deleter
    del x
    gc.collect()
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(info["deleter"])
    t = threading.Thread(target=fn, args=(info["pointer"],))
    t.start()
    t.join()
    check.equal(tr.calls, 1, "OWN-04", "deleter calls through the no-GIL thread")
    check.that(not any(e["gil_held"] for e in tr.log), "OWN-04", "the deleter was called with the GIL held: the "
               "check did not exercise the no-GIL path (log %r)" % (tr.log,))
    sys.stdout.flush()
    os._exit(0)  # the capsule is never touched again


@producer("OWN-04")
def test_deleter_runs_without_the_gil(target, check):
    """The deleter is called from a thread that does not hold the GIL (as non-Python code
    would): it must take the GIL before touching Python. Run in a child with
    PYTHONMALLOC=debug, where a Python allocation without the GIL is a fatal error."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        args = {"dtype": dtype, "versioned": versioned}
        run = rp.run_case(check, target, gil_case, args, env=GIL_ENV, unset=("PYTHONFAULTHANDLER",))
        found = [(c, m) for c, m in run.findings if c != "*"]  # "*": an exception stopped the case
        for clause, message in found:
            check.that(False, clause, message)
        if not found and run.rc != 0:
            check.record("OWN-04", "fail", "%s deleter called on a thread without the GIL: the process died (%s)"
                         % ("versioned" if versioned else "legacy",
                            "; ".join(m for c, m in run.findings if c == "*") or run.describe()[-600:]))
        elif not found:
            check.record("OWN-04", "pass")


@producer("OWN-01")
def test_producer_deleter_field(target, check):
    """A NULL deleter is allowed (then nothing is released) and a non-NULL one is called once by
    a consumer. (manager_ctx is the producer's business, any value or NULL: OWN-06 binds what
    a consumer does with it, test_consumer_accepts_null_manager_ctx.)"""
    for versioned, x in _cases(target, (2,)):
        cap = pycap.export_kind(x, versioned)
        info = pycap.fields(cap)
        tr = kit.instrument(cap)
        called = kit.consume(cap).release()
        if info["deleter"] == 0:
            check.that(not called and tr.calls == 0, "OWN-01", "NULL deleter but a call was recorded")
        else:
            check.that(called and tr.calls == 1, "OWN-01", "deleter calls after release: %d" % tr.calls)


# ============================================================================ consumer
@consumer("OWN-03")
def test_consumer_calls_deleter_exactly_once(target, check):
    """0 deleter calls while the imported result lives and views the producer's memory (a
    consumer that copied may call it at once: Attempt.copied), exactly 1 after it dies. Whether the
    capsule was renamed used_* is CAP-03's (test_capsule.py); a consumer that keeps an unrenamed
    capsule has its deleter run by the capsule's destructor when the result dies, which is
    counted here like any other call (see support/attempts.py: drop_capsules)."""
    for kw in [dict(shape=(4,)), dict(shape=(2, 3), dtype=(0, 32, 1)), dict(shape=())]:
        att = tries.forged(target, kw)
        alive = att.calls()
        if tries.imported_elements(check, target, att, "OWN-03", "valid capsule %r" % (kw,)) is None:
            att.settle()
            continue
        tries.deleter_accounting(check, att, alive)


@consumer("OWN-03")
def test_consumer_refusal_runs_deleter_once(target, check):
    """When the consumer refuses a capsule (unknown dtype code), the deleter still runs exactly
    once in all (by the consumer or by the unconsumed capsule's destructor)."""
    att = tries.forged(target, dict(dtype=(99, 32, 1), shape=(4,)))
    if not att.refused:
        att.settle()
        raise kit.Unsupported("the consumer imported dtype code 99, so no refusal path was exercised")
    check.equal(att.settle(), 1, "OWN-03", "deleter calls after the refusal (%s)" % att.refusal())


@consumer("OWN-01")
def test_consumer_skips_null_deleter(target, check):
    """A NULL deleter is legal: the consumer imports and never calls it (a call crashes)."""
    for versioned_kw in [dict(shape=(4,), null_deleter=True), dict(shape=(2, 2), null_deleter=True, dtype=(0, 64, 1))]:
        att = tries.forged(target, versioned_kw)
        tries.imported_elements(check, target, att, "OWN-01", "capsule with a NULL deleter")
        check.equal(att.settle(), 0, "OWN-01", "NULL deleter: recorded calls")


@consumer("OWN-06")
def test_consumer_accepts_null_manager_ctx(target, check):
    """manager_ctx is opaque and may be NULL: the import works, with the producer's elements; its
    ownership departs from the consumer's plain import in nothing (CAP-03, OWN-03 otherwise)."""
    imp.null_manager_ctx(check, target, kit.RecordingProducer(kit.forges(shape=(2, 3), strides=(3, 1)), keep=True),
                         imp.HostResults(target))


# ---------------------------------------------------------------------------- interpreter exit
#: what an exit case leaves for the interpreter to tear down as it finalises (a module global)
LEFT_AT_EXIT = []


def exports_left_at_exit(target, dtype, consumed):
    """Judged at interpreter exit. Run in a fresh interpreter that then exits normally: exports
    of the library's tensors of each kind it makes, left alive with their tensors until the
    interpreter finalises, either unconsumed (their capsule destructors run then, CAP-05) or
    consumed by the kit and never given back (the kit's handles call the deleter then, as late
    as a consumer can, OWN-04)."""
    for versioned in _kinds(target, dtype):
        x = _case(target, dtype, (2, 3))
        cap = pycap.export_kind(x, versioned)
        LEFT_AT_EXIT.append((x, kit.consume(cap) if consumed else cap))


def imports_left_at_exit(target):
    """Judged at interpreter exit. Run in a fresh interpreter that then exits normally: the
    library's imports of the kit's capsules (legacy, and versioned where the consumer asks for
    it), alive until the interpreter finalises: the consumer gives each tensor back then
    (OWN-03)."""
    for kw in (dict(shape=(2, 3)), dict(shape=(4,), dtype=(0, 32, 1))):
        att = tries.forged(target, kw)
        if not att.refused:
            LEFT_AT_EXIT.append((att.producer, att.result))  # a tuple drops its last item first


def _judge_exit(check, clause, run, what):
    """A finding the child's script printed, a child that died or failed as the interpreter
    finalised (the clause's crash or fail), or pass."""
    for c, message in run.findings:
        check.record(clause if c == "*" else c, "fail", message)
    if run.findings:
        return
    if run.rc == 0:
        check.record(clause, "pass")
    else:
        check.record(clause, "crash" if run.died or run.rc is None else "fail",
                     "%s left alive until the interpreter exits: the process ended with %s" % (what, run.describe()))


@producer("CAP-05", "OWN-04")
def test_exports_alive_at_interpreter_exit(target, check):
    """A capsule left unconsumed until the interpreter exits is destroyed then, and a consumed
    tensor still held then is given back then: neither may kill the process (the destructor runs
    the deleter, CAP-05; the deleter works while the interpreter finalises, OWN-04). Each runs in
    a child that exits normally."""
    dtype = _dtype(target)
    for clause, consumed in (("CAP-05", False), ("OWN-04", True)):
        run = rp.run_case(check, target, exports_left_at_exit, {"dtype": dtype, "consumed": consumed})
        _judge_exit(check, clause, run, "%s exports" % ("consumed" if consumed else "unconsumed"))


@consumer("OWN-03")
def test_imports_alive_at_interpreter_exit(target, check):
    """Imports still alive when the interpreter exits are given back as it finalises: the
    consumer's release (the deleter, once) may not kill the process. Runs in a child that exits
    normally."""
    run = rp.run_case(check, target, imports_left_at_exit)
    _judge_exit(check, "OWN-03", run, "imported tensors")
