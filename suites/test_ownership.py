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
import subprocess
import sys
import threading

import pytest

import strategies as S
from _layout_support import (
    repro_once,
    Attempt, KeepingProducer, apply_ops, attempt_lines, bad_exception, bool_values, compare_layout, consumer_expr,
    deleter_accounting, export, lib, make_lines, result_bytes, setup_lines, values_for, versioned_supported)
from dlconform import _probe
from dlconform.producers import forges
from dlconform.verdicts import Unsupported

P = pytest.mark.role("producer")
C = pytest.mark.role("consumer")
HARNESS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "harness")


def _values(dtype, shape, seed=0):
    n = 1
    for s in shape:
        n *= s
    return bool_values(n) if dtype == "bool" else values_for(S.itemsize_of(dtype), n, seed)


def _dtype(target):
    for d in ["float32", "int32", "float64"] + list(target.dtypes()):
        if d in target.dtypes() and d in S.DTYPES:
            try:
                target.make(d, (1,), _values(d, (1,))).__dlpack__()
                return d
            except Exception:
                continue
    raise Unsupported("no dtype of %s exports" % target.name)


def _kinds(target, dtype):
    x = target.make(dtype, (1,), _values(dtype, (1,)))
    return [False, True] if versioned_supported(x) else [False]


# ============================================================================ producer
@pytest.mark.clause("CAP-05")
@P
def test_unconsumed_capsule_runs_deleter_once(target, check):
    """An exported capsule nobody consumes runs its deleter exactly once when it dies."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        x = target.make(dtype, (4,), _values(dtype, (4,)))
        call = "x.__dlpack__(max_version=(1, 3))" if versioned else "x.__dlpack__()"
        repro_once(check, setup_lines(target) + make_lines(target, dtype, (4,), _values(dtype, (4,))) +
                    ["cap = %s" % call, "tr = _probe.instrument(cap)", "del cap; gc.collect()",
                     "print('deleter calls', tr.calls)  # expected 1"])
        cap = export(x, versioned)
        tr = _probe.instrument(cap)
        del cap
        gc.collect()
        check.equal(tr.calls, 1, "CAP-05", "%s capsule dropped unconsumed: deleter calls"
                    % ("versioned" if versioned else "legacy"))


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.clause("OWN-02")
@P
def test_deleter_releases_the_export(target, check):
    """The deleter destroys manager_ctx and frees the managed struct: the tensor's refcount is
    back to its value before the export, and export/release cycles do not grow memory."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        x = target.make(dtype, (3, 2), _values(dtype, (3, 2)))
        call = "x.__dlpack__(max_version=(1, 3))" if versioned else "x.__dlpack__()"
        lines = setup_lines(target) + make_lines(target, dtype, (3, 2), _values(dtype, (3, 2))) + [
            "import sys", "before = sys.getrefcount(x)",
            "h = _probe.consume(%s); h.release(); gc.collect()" % call,
            "print('refcount', before, sys.getrefcount(x))",
            "def rss(): return int(open('/proc/self/statm').read().split()[1]) * 4096",
            "for r in range(3):",
            "    a = rss()",
            "    for i in range(20000): _probe.consume(%s).release()" % call,
            "    print('round', r, 'grew', rss() - a, 'bytes')"]
        repro_once(check, lines)
        gc.collect()
        before = sys.getrefcount(x)
        h = _probe.consume(export(x, versioned))
        h.release()
        del h
        gc.collect()
        after = sys.getrefcount(x)
        check.that(after <= before, "OWN-02", "refcount of the tensor is %d after the deleter ran, %d before the export:"
                   " the deleter did not release manager_ctx's reference" % (after, before))
        n = 20000
        growth = []
        for r in range(3):
            a = _rss()
            for _ in range(n):
                _probe.consume(export(x, versioned)).release()
            growth.append(_rss() - a)
        # a leaked managed struct (>= 64 bytes with shape and strides) grows >= 1.2 MiB per round
        leaking = all(g > 32 * n for g in growth[1:])
        check.that(not leaking, "OWN-02", "%s export+release cycles grow memory by %s bytes per %d cycles: the "
                   "deleter does not free the managed struct" % ("versioned" if versioned else "legacy", growth, n))


@pytest.mark.clause("OWN-05")
@P
def test_consumed_tensor_outlives_producer_object(target, check):
    """After consume, data, shape and strides stay valid when the producer's object (and the
    view it was exported from) is deleted, until the deleter runs."""
    dtype = _dtype(target)
    shape = (3, 4)
    vals = _values(dtype, shape, seed=5)
    cases = [[], [("transpose", (1, 0))], [("slice", 1, 1, None, 2)], [("flip", 0)]]
    for versioned in _kinds(target, dtype):
        for ops in cases:
            x = target.make(dtype, shape, vals)
            v, oplines, bad = apply_ops(target, x, ops)
            if v is None:
                continue
            call = "v.__dlpack__(max_version=(1, 3))" if versioned else "v.__dlpack__()"
            repro_once(check, setup_lines(target) + make_lines(target, dtype, shape, vals) + oplines + [
                "v = %s" % ("v%d" % (len(ops) - 1) if ops else "x"), "expected = _probe.read_elements(%s)" % call,
                "h = _probe.consume(%s)" % call, "meta = h.inspect()",
                "del x, v" + ("".join(", v%d" % i for i in range(len(ops)))), "gc.collect()",
                "junk = [bytearray(b'\\xee' * 4096) for _ in range(256)]",
                "print(h.inspect()['shape'] == meta['shape'], h.inspect()['strides'] == meta['strides'])",
                "print(h.read_elements() == expected)"])
            expected = target.expected(v)
            cap = export(v, versioned)
            info = _probe.inspect(cap)
            layout = compare_layout(target, v, info, S.itemsize_of(dtype))
            h = _probe.consume(cap)
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


_GIL_SCRIPT = r'''
import ctypes, os, sys, threading
cap = {call}
tr = _probe.instrument(cap)           # counts calls, logs whether the caller held the GIL
info = _probe.inspect(cap)
fn_addr, ptr = info["deleter"], info["pointer"]
_probe.rename(cap, "used_" + info["name"])   # consumed: nothing else may call the deleter
del x
gc.collect()
fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fn_addr)   # a ctypes call releases the GIL
t = threading.Thread(target=fn, args=(ptr,)); t.start(); t.join()
print("RESULT", tr.calls, [e["gil_held"] for e in tr.log]); sys.stdout.flush()
os._exit(0)   # the capsule is never touched again
'''


@pytest.mark.clause("OWN-04")
@P
def test_deleter_runs_without_the_gil(target, check):
    """The deleter is called from a thread that does not hold the GIL (as non-Python code
    would): it must take the GIL before touching Python. Run in a child with
    PYTHONMALLOC=debug, where a Python allocation without the GIL is a fatal error."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        vals = _values(dtype, (4, 3))
        call = "x.__dlpack__(max_version=(1, 3))" if versioned else "x.__dlpack__()"
        script = "\n".join(setup_lines(target) + make_lines(target, dtype, (4, 3), vals)) + _GIL_SCRIPT.format(call=call)
        repro_once(check, "# run with PYTHONMALLOC=debug\n" + script)
        env = dict(os.environ)
        env["PYTHONMALLOC"] = "debug"
        env["PYTHONPATH"] = os.pathsep.join([HARNESS] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        env.pop("PYTHONFAULTHANDLER", None)
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
        out = proc.stdout + proc.stderr
        tail = " | ".join(out.strip().splitlines()[-4:])
        line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
        if proc.returncode != 0 or not line:
            check.record("OWN-04", "fail", "%s deleter called on a thread without the GIL: the process died (rc %d): %s"
                         % ("versioned" if versioned else "legacy", proc.returncode, tail[-600:]))
            continue
        calls = int(line[0].split()[1])
        check.equal(calls, 1, "OWN-04", "deleter calls through the no-GIL thread")
        check.that("True" not in line[0], "OWN-04", "the deleter was called with the GIL held: the check did not "
                   "exercise the no-GIL path (%s)" % line[0])


@pytest.mark.clause("OWN-06", "OWN-01")
@P
def test_producer_manager_ctx_and_deleter_fields(target, check):
    """manager_ctx is the producer's business (any value, NULL included); a NULL deleter is
    allowed (then nothing is released) and a non-NULL one is called once by a consumer."""
    dtype = _dtype(target)
    for versioned in _kinds(target, dtype):
        x = target.make(dtype, (2,), _values(dtype, (2,)))
        call = "x.__dlpack__(max_version=(1, 3))" if versioned else "x.__dlpack__()"
        repro_once(check, setup_lines(target) + make_lines(target, dtype, (2,), _values(dtype, (2,))) +
                    ["cap = %s" % call, "print(_probe.inspect(cap))", "tr = _probe.instrument(cap)",
                     "h = _probe.consume(cap); print(h.release(), tr.calls)"])
        cap = export(x, versioned)
        info = _probe.inspect(cap)
        check.that(isinstance(info["manager_ctx"], int), "OWN-06", "manager_ctx unreadable")
        tr = _probe.instrument(cap)
        h = _probe.consume(cap)
        called = h.release()
        if info["deleter"] == 0:
            check.that(not called and tr.calls == 0, "OWN-01", "NULL deleter but a call was recorded")
        else:
            check.that(called and tr.calls == 1, "OWN-01", "deleter calls after release: %d" % tr.calls)
            check.record("OWN-06", "pass", "")


# ============================================================================ consumer
@pytest.mark.clause("OWN-03")
@C
def test_consumer_calls_deleter_exactly_once(target, check):
    """0 deleter calls while the imported result lives, exactly 1 after it dies. Whether the
    capsule was renamed used_* is CAP-03's (test_capsule.py); a consumer that keeps an unrenamed
    capsule has its deleter run by the capsule's destructor when the result dies, which is
    counted here like any other call (see _capsule_support.drop_capsules)."""
    for kw in [dict(shape=(4,)), dict(shape=(2, 3), dtype=(0, 32, 1)), dict(shape=())]:
        repro_once(check, attempt_lines(target, kw))
        att = Attempt(target, kw)
        alive = att.calls()
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.record("OWN-03", "fail" if why else "warn", "valid capsule %r refused: %s" % (kw, why or att.refusal()))
            att.settle()
            continue
        _, got = result_bytes(target, att.result)
        check.equal(got, att.forge.expected_elements(), "OWN-03", "result elements")
        deleter_accounting(check, att, alive)


@pytest.mark.clause("OWN-03")
@C
def test_consumer_refusal_runs_deleter_once(target, check):
    """When the consumer refuses a capsule (unknown dtype code), the deleter still runs exactly
    once in all (by the consumer or by the unconsumed capsule's destructor)."""
    kw = dict(dtype=(99, 32, 1), shape=(4,))
    repro_once(check, attempt_lines(target, kw))
    att = Attempt(target, kw)
    if not att.refused:
        att.settle()
        raise Unsupported("the consumer imported dtype code 99, so no refusal path was exercised")
    after = att.settle()
    check.equal(after, 1, "OWN-03", "deleter calls after the refusal (%s)" % att.refusal())


@pytest.mark.clause("OWN-01")
@C
def test_consumer_skips_null_deleter(target, check):
    """A NULL deleter is legal: the consumer imports and never calls it (a call crashes)."""
    for versioned_kw in [dict(shape=(4,), null_deleter=True), dict(shape=(2, 2), null_deleter=True, dtype=(0, 64, 1))]:
        repro_once(check, attempt_lines(target, versioned_kw))
        att = Attempt(target, versioned_kw)
        if att.refused:
            why = bad_exception(att.etype, att.emsg)
            check.record("OWN-01", "fail" if why else "warn", "capsule with a NULL deleter refused: %s"
                         % (why or att.refusal()))
        else:
            _, got = result_bytes(target, att.result)
            check.equal(got, att.forge.expected_elements(), "OWN-01", "result elements")
        after = att.settle()
        check.equal(after, 0, "OWN-01", "NULL deleter: recorded calls")


class _NullCtxProducer(KeepingProducer):
    """Hands out forged capsules whose manager_ctx is NULL (the Forge deleter does not use it)."""

    def __dlpack__(self, *args, **kw):
        cap = super().__dlpack__(*args, **kw)
        info = _probe.inspect(cap)
        off = 48 if info["kind"] == "legacy" else 8
        ctypes.c_void_p.from_address(info["pointer"] + off).value = None
        return cap


@pytest.mark.clause("OWN-06", "OWN-03")
@C
def test_consumer_accepts_null_manager_ctx(target, check):
    """manager_ctx is opaque and may be NULL: the import works and the deleter runs once."""
    fac = forges(shape=(2, 3), strides=(3, 1))
    p = _NullCtxProducer(fac)
    repro_once(check, setup_lines(target) + [
        "import ctypes", "fac = forges(shape=(2, 3), strides=(3, 1))", "class P(RecordingProducer):",
        "    def __dlpack__(self, **kw):", "        cap = super().__dlpack__(**kw); i = _probe.inspect(cap)",
        "        ctypes.c_void_p.from_address(i['pointer'] + (48 if i['kind'] == 'legacy' else 8)).value = None",
        "        return cap", "p = P(fac)", "y = %s" % consumer_expr(target, "p"),
        "f = p.forges[p.last_kind]; print(f.deleter_calls); del y; gc.collect(); print(f.deleter_calls)"])
    try:
        y = target.from_dlpack(p)
        err = None
    except Exception as e:  # noqa: BLE001
        y, err = None, "%s: %s" % (type(e).__name__, e)
    ctx = [_probe.inspect(c).get("manager_ctx") for c in p.capsules if _probe.inspect(c)["kind"] in ("legacy",
                                                                                                   "versioned")]
    if y is None:
        check.record("OWN-06", "fail", "capsule with NULL manager_ctx refused: %s" % err)
    else:
        _, got = result_bytes(target, y)
        check.equal(got, p.forges[p.last_kind].expected_elements(), "OWN-06", "result elements")
    alive = sum(f.deleter_calls for f in p.forges.values())
    del y
    p.capsules.clear()
    gc.collect()
    after = sum(f.deleter_calls for f in p.forges.values())
    check.that(err is not None or alive == 0, "OWN-03", "deleter ran while the result was alive")
    check.equal(after, 1, "OWN-03", "deleter calls after the result died")
    del ctx
