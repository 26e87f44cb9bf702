"""What a reproducer snippet asserts, and the few readings it needs (issue 12, item 8).

A reproducer exits 0 when the library behaves. At the first expectation that does not hold
it prints `REPRODUCED CLAUSE: what differed` and exits 1 (EXIT_FINDING); a crash exits by
its signal. The lines that call these functions are written by the check from the values it
compares, so the check and its snippet cannot drift.

This file imports nothing from dlconform: the standalone bug reports (dlconform.bugreport)
inline it as it is.
"""
import ctypes
import os
import sys

#: the exit status of a reproduced finding
EXIT_FINDING = 1
#: the first word of the line a reproduced finding prints
MARK = "REPRODUCED"
#: In a bug report's script, the clause the report is about (the script sets it): a finding of
#: another clause of the same check is printed as ALSO and the script goes on, so that it exits
#: 0 once the reported bug is fixed, whatever else the check found. None: the first finding ends it.
FOCUS = None
#: the findings of other clauses printed so far (FOCUS set)
ALSO = []


def _short(v, limit=200):
    if isinstance(v, (bytes, bytearray)):
        text = bytes(v).hex()
        text = "bytes %s%s (%d)" % (text[:limit], "..." if len(text) > limit else "", len(v))
        return text
    text = repr(v)
    return text if len(text) <= limit else text[:limit] + "..."


#: the types of returned values a finding's message shows by repr(). Another object is shown by
#: its type's name: it may be a library's import of malformed metadata (a NULL shape, a
#: version it cannot read), and the library's repr() may read that metadata and crash.
_SHOWN = (bool, int, float, complex, str, bytes, bytearray, type(None))


def _returned(v):
    """A returned value as a finding's message shows it."""
    return _short(v) if type(v) in _SHOWN else "a %s object" % type(v).__name__


def describe(exc):
    """'Type: first line of the message' of an exception."""
    text = str(exc).splitlines()[0][:300] if str(exc) else ""
    return "%s: %s" % (type(exc).__name__, text)


def unclean(exc):
    """Why a refusal is not clean, or None when it is: a SystemError, and CPython's message for a
    C function that failed without setting an exception or returned a result with one set."""
    if exc is None:
        return None
    text = str(exc)
    text = text.splitlines()[0][:300] if text else ""
    if isinstance(exc, SystemError):
        return "SystemError (%s)" % text
    if "without setting an exception" in text or "with an exception set" in text:
        return "%s: %s" % (type(exc).__name__, text)
    return None


def finding(clause, what):
    """Prints the finding and exits EXIT_FINDING at once: nothing the library left behind runs
    on the way out. With FOCUS set, another clause's finding is printed as ALSO and returns."""
    if FOCUS is not None and clause != FOCUS:
        ALSO.append(clause)
        print("ALSO %s: %s (another clause of this check; going on)" % (clause, what), flush=True)
        return
    sys.stderr.flush()
    print("%s %s: %s" % (MARK, clause, what), flush=True)
    os._exit(EXIT_FINDING)


def expect(cond, clause, what):
    if not cond:
        finding(clause, what)


def expect_equal(got, want, clause, what):
    try:
        same = bool(got == want)
    except Exception:  # noqa: BLE001 - an object that cannot be compared differs
        same = False
    if not same:
        finding(clause, "%s: got %s, expected %s" % (what, _short(got), _short(want)))


def detach(exc):
    """exc with the tracebacks of its chain dropped, and an AttributeError's `obj` (the object
    whose attribute was missing): both may hold capsules whose deleter calls a snippet counts."""
    seen, todo = set(), [exc]
    while todo:
        cur = todo.pop()
        if cur is None or id(cur) in seen:
            continue
        seen.add(id(cur))
        cur.__traceback__ = None
        if isinstance(cur, AttributeError) and getattr(cur, "obj", None) is not None:
            cur.obj = None
        todo += [cur.__context__, cur.__cause__]
    return exc


def attempt(call):
    """(result, None) of call(), or (None, the exception it raised, tracebacks dropped)."""
    try:
        return call(), None
    except Exception as e:  # noqa: BLE001 - the snippet judges it
        return None, detach(e)


def expect_returns(call, clause, what):
    """call()'s result; an exception is the finding."""
    result, exc = attempt(call)
    if exc is not None:
        finding(clause, "%s raised %s" % (what, describe(exc)))
    return result


def expect_clean(exc, clause, what):
    """A refusal that is clean (unclean())."""
    why = unclean(exc)
    if why is not None:
        finding(clause, "%s raised %s (an unclean refusal)" % (what, why))


def expect_raises(call, clause, what, kinds=Exception):
    """The exception call() raises: one of `kinds`, raised cleanly. A result is the finding."""
    result, exc = attempt(call)
    if exc is None:
        finding(clause, "%s returned %s; expected it to raise %s" % (what, _returned(result), _names(kinds)))
    expect_clean(exc, clause, what)
    if not isinstance(exc, kinds):
        finding(clause, "%s raised %s; expected %s" % (what, describe(exc), _names(kinds)))
    return exc


def _names(kinds):
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(k.__name__ for k in kinds)


def elements(d):
    """The logical row-major element bytes of a result described by `d` (a dict with ptr, shape,
    strides in elements, itemsize), read from host memory."""
    shape, strides, size = tuple(int(n) for n in d["shape"]), tuple(int(s) for s in d["strides"]), int(d["itemsize"])
    if any(n == 0 for n in shape):
        return b""
    out = bytearray()
    index = [0] * len(shape)
    while True:
        off = sum(i * s for i, s in zip(index, strides)) * size
        out += ctypes.string_at(int(d["ptr"]) + off, size)
        k = len(shape) - 1
        while k >= 0:
            index[k] += 1
            if index[k] < shape[k]:
                break
            index[k] = 0
            k -= 1
        if k < 0:
            return bytes(out)
