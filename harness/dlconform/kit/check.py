"""Verdicts, and the `check` a check records them with: the same code in the suite and in its
reproducer.

In the suite (the pytest plugin) a Check collects (clause, verdict, message) records. In a
reproducer script, `reproduce()` runs the check's own function with a Check whose `record`
stops the script at the first finding on the clause the script is about: it prints
`REPRODUCED CLAUSE: what differed` and exits 1 (EXIT_FINDING); once the bug is fixed the check
runs through and the script exits 0. A finding on another clause of the same check prints
`ALSO CLAUSE: ...` and the script goes on; an exception after such a finding means the script
could not reach its clause: it prints `UNDETERMINED` and exits 3.

Grading (suites/README.md, "Grading"): `that()` records pass, or the clause's breach: fail for
a MUST clause, warn otherwise. `accepted()` is the verdict of the library accepting what the
check fed it where it should have refused.
"""
import os
import sys

# ---------------------------------------------------------------------------- verdicts
VERDICTS = ("pass", "warn", "unsupported", "skip", "fail", "timeout", "crash", "error")
_RANK = {v: i for i, v in enumerate(VERDICTS)}
#: verdicts that make `dlconform run` exit 1: findings in the library
FAILING = frozenset({"fail", "timeout", "crash"})
#: verdicts a reproducer reproduces
FINDINGS = frozenset({"warn", "fail", "timeout", "crash", "error"})
#: the suite itself went wrong (an exception in a check's own code): never the library's
#: verdict; `dlconform run` exits 2
HARNESS_ERROR = "error"
LEVELS = ("MUST", "SHOULD", "MAY", "INFO")
#: what a check may feed the library (suites/README.md, "Grading")
FEEDS = ("valid", "invalid", "argument")
_FED = {"invalid": "invalid input (malformed metadata)", "argument": "an invalid argument"}
_UNSPECIFIED = ("the array API leaves behaviour on %s unspecified and dlpack.h obliges no consumer to "
                "validate it: accepting it is a warn, a clean refusal passes, dying is a robustness crash "
                "(suites/README.md, Grading)")


def rank(verdict):
    """Position of `verdict` in VERDICTS (higher is worse); unknown names rank worst."""
    return _RANK.get(verdict, len(VERDICTS))


def worst(verdicts, default="pass"):
    """The worst verdict of an iterable (VERDICTS order); `default` when empty."""
    result = None
    for v in verdicts:
        if result is None or rank(v) > rank(result):
            result = v
    return default if result is None else result


def breach(level):
    """The verdict of a broken clause of this level: fail for MUST, warn otherwise."""
    return "fail" if level == "MUST" else "warn"


def check_verdict(verdict):
    if verdict not in _RANK:
        raise ValueError("unknown verdict %r (expected one of %s)" % (verdict, ", ".join(VERDICTS)))
    return verdict


class Warn(Exception):
    """Raise where the spec is ambiguous or a SHOULD is broken: the clause gets `warn`."""

    def __init__(self, clause, message=""):
        super().__init__(clause, message)
        self.clause = clause
        self.message = message

    def __str__(self):
        return "%s: %s" % (self.clause, self.message) if self.clause else str(self.message)


class Unsupported(Exception):
    """Raise when the target does not offer the feature a check needs."""

    def __init__(self, reason=""):
        super().__init__(reason)
        self.reason = reason

    def __str__(self):
        return str(self.reason)


class CheckFailure(AssertionError):
    """A failed `check.require`: the check stops."""


# ---------------------------------------------------------------------------- exceptions
def describe(exc, limit=300):
    """'Type: first line of the message' of an exception, the line cut at `limit` characters."""
    text = str(exc).splitlines()[0][:limit] if str(exc) else ""
    return "%s: %s" % (type(exc).__name__, text)


def detach(exc):
    """exc with the tracebacks of its chain dropped, and an AttributeError's `obj` (the object
    whose attribute was missing): both may hold capsules whose deleter calls a check counts."""
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


def short(value, limit=200):
    """A value as a message shows it: bytes in hex, anything else by repr(), cut at `limit`."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        text = value.hex() if len(value) <= limit // 2 else value[: limit // 2].hex() + "...(%d bytes)" % len(value)
        return "bytes " + text
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _first_difference(a, b):
    for i in range(min(len(a), len(b))):
        if a[i] != b[i]:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else None


def truncate(text, limit=2000):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + " ...[truncated]"


# ---------------------------------------------------------------------------- the check
class Check:
    """The verdicts of one check. `level_of(clause)` gives a clause's level (MUST when unknown);
    `feeds` is what the check feeds the library (FEEDS); `on_record(clause, verdict, message)`
    sees each record as it is made (a reproducer stops there). `case` is the (function,
    arguments, environment) a reproducer reruns; `on_case` sees it set (the plugin streams it,
    so that a check that dies still has its reproducer). `found` keeps, per clause, the case that
    was set when the clause's first finding of its worst verdict was recorded: the case that
    reproduces the clause's verdict."""

    def __init__(self, level_of=None, feeds="valid", on_record=None, on_case=None):
        if feeds not in FEEDS:
            raise ValueError("feeds is one of %s, not %r" % (", ".join(FEEDS), feeds))
        self._level_of = level_of or (lambda clause: "MUST")
        self.feeds = feeds
        self._on_record, self._on_case = on_record, on_case
        self.records = []
        self.unreached = {}  # {clause: [why]}: not_reached()
        self.peer = None
        self.case = None
        self.found, self._found_rank = {}, {}

    def child(self):
        """A Check of the same grading for one case of this check (strategies.explore)."""
        return Check(self._level_of, self.feeds, on_case=self._on_case)

    def level(self, clause):
        return self._level_of(clause)

    def set_peer(self, name):
        """Names the other library of this check (the producer when the target consumes): every
        record of the check then carries `peer`."""
        self.peer = None if name is None else str(name)

    def set_case(self, fn, args=None, crash_as=None, env=None):
        """The function and keyword arguments that a reproducer of what follows calls as
        fn(target, check, **args), and the environment variables it runs with; None: the check
        itself again. `crash_as` ({"clauses", "input", "doing"}) is for a step that is not the
        check's own case (a probe of what the consumer takes): a death during it is recorded
        under those clauses."""
        self.case = None if fn is None else (fn, dict(args or {}), dict(env or {}))
        if self._on_case is not None:
            self._on_case(self.case, crash_as)

    def not_reached(self, clause, message):
        """A case of the check that could not reach `clause`: the library refuses the tensor
        whatever the case's point (a dtype or a rank it lacks, refused in a plain layout too).
        The clause is `unsupported` with these reasons unless another case records a verdict on
        it (the plugin: unreached)."""
        self.unreached.setdefault(str(clause), []).append(truncate(message))

    def record(self, clause, verdict, message=""):
        check_verdict(verdict)
        rec = (str(clause), verdict, truncate(message))
        self.records.append(rec)
        if verdict in FINDINGS and rank(verdict) > self._found_rank.get(rec[0], -1):
            self.found[rec[0]], self._found_rank[rec[0]] = self.case, rank(verdict)
        if self._on_record is not None:
            self._on_record(*rec)

    def that(self, cond, clause, message=""):
        """Records pass, or the clause's breach (fail for MUST, warn otherwise); returns bool(cond)."""
        ok = bool(cond)
        self.record(clause, "pass" if ok else breach(self.level(clause)), "" if ok else message)
        return ok

    def require(self, cond, clause, message=""):
        """that(), stopping the check when it does not hold."""
        if not self.that(cond, clause, message):
            raise CheckFailure("%s: %s" % (clause, message))
        return True

    def equal(self, actual, expected, clause, message=""):
        try:
            ok = bool(actual == expected)
        except Exception:  # values that cannot be compared differ
            ok = False
        if ok:
            return self.that(True, clause)
        detail = "got %s, expected %s" % (short(actual), short(expected))
        if isinstance(actual, (bytes, bytearray)) and isinstance(expected, (bytes, bytearray)):
            detail += " (first difference at byte %s; lengths %d and %d)" % (
                _first_difference(actual, expected), len(actual), len(expected))
        return self.that(False, clause, "%s: %s" % (message, detail) if message else detail)

    def accepted(self, clause, message):
        """The library accepted what the check fed it where it should have refused: the clause's
        breach on valid input; on invalid input or an invalid argument a warn citing the reading
        (the behaviour is unspecified)."""
        if self.feeds == "valid":
            self.record(clause, breach(self.level(clause)), message)
        else:
            self.record(clause, "warn",
                        "%s; it is %s: %s" % (message, _FED[self.feeds], _UNSPECIFIED % _FED[self.feeds]))

    def must_refuse(self, clause, message, rule):
        """The library accepted what the clause's own words say it must refuse (`rule`, the
        clause's sentence): the clause's breach, whatever the check feeds. Returns the verdict."""
        verdict = breach(self.level(clause))
        self.record(clause, verdict, "%s; %s: %s" % (message, clause, rule))
        return verdict

    def warn(self, clause, message=""):
        self.record(clause, "warn", message)

    @staticmethod
    def unclean(refusal):
        """unclean() of the exception that refused, or of an object holding it as `.exc`."""
        return unclean(refusal if isinstance(refusal, BaseException) or refusal is None else refusal.exc)

    def refusal(self, clause, refusal, what, verdict=None):
        """The clean-refusal rule: records pass, or "WHAT raised WHY" as `verdict` (default: the
        clause's breach); returns True when clean."""
        why = self.unclean(refusal)
        if why is None or verdict is None:
            return self.that(why is None, clause, "%s raised %s" % (what, why))
        self.record(clause, verdict, "%s raised %s" % (what, why))
        return False


# ---------------------------------------------------------------------------- reproducers
#: the exit status of a reproduced finding, and the first word of the line it prints
EXIT_FINDING = 1
MARK = "REPRODUCED"
#: the exit status of a script that stopped before it reached its clause
EXIT_UNDETERMINED = 3
#: the verdicts a check records, whose reproducer reproduces its own grade (reproduce: verdict)
GRADED = ("warn", "fail")
#: the exit status of a script that could not run its check, and the first words of the line it
#: prints: a module of dlconform's or the suite's that it needs is missing (a standalone script's
#: native module not beside it); never the library's finding
EXIT_NOT_RUN = 4
NOT_RUN = "NOT RUN"
#: the top-level names of dlconform's own modules a reproducer imports (the package, the suites'
#: support package)
OURS = ("dlconform", "support")


def _say(text):
    sys.stderr.flush()
    print(text, flush=True)


def _parameters(fn):
    """The names fn takes. From its code object where it has one: importing inspect (and with
    it tokenize, linecache and dis) was a seventh of a standalone reproducer's run."""
    code = getattr(getattr(fn, "__wrapped__", fn), "__code__", None)
    if code is None:
        import inspect

        return list(inspect.signature(fn).parameters)
    return list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])


def reproduce(fn, target, args=None, *, focus=None, levels=None, feeds="valid", verdict=None):
    """Runs the check fn(target=, check=, **args) as a reproducer (target and check go to the
    parameters of those names it has): exits EXIT_FINDING at the first finding on `focus` (any
    clause when None) at least as grave as `verdict`, the finding's (any finding when None),
    EXIT_UNDETERMINED when an exception stops it after a finding on another clause, and returns
    when the check runs through. A lesser finding on `focus` (a warn of a fail's clause: a case
    of the check other than the one that failed) prints `ALSO` and does not stop it: once the
    fail is fixed, the script says so, whatever else the clause still shows."""
    also, lesser = [], []

    def stop(clause, found, message):
        if found not in FINDINGS:
            return
        if focus is not None and clause != focus:
            also.append(clause)
            _say("ALSO %s: %s (another clause of this check; going on)" % (clause, message))
            return
        if verdict in GRADED and rank(found) < rank(verdict):
            lesser.append(found)
            _say("ALSO %s: %s (a %s, not the %s this script is about; going on)" % (clause, message, found, verdict))
            return
        _say("%s %s: %s" % (MARK, clause, message))
        os._exit(EXIT_FINDING)

    check = Check(lambda c: (levels or {}).get(c, "MUST"), feeds, on_record=stop)
    given = dict(args or {})
    names = _parameters(fn)
    given.update({k: v for k, v in (("target", target), ("check", check)) if k in names})
    try:
        fn(**given)
    except Unsupported as e:
        _say("UNSUPPORTED: %s (the check does not apply: nothing to reproduce)" % e)
        return
    except Warn as e:
        stop(focus or e.clause, "warn", e.message or str(e))
    except BaseException as e:  # the check's verdict on any other exception
        if isinstance(e, ImportError) and (e.name or "").split(".")[0] in OURS:
            # dlconform's own module missing (a native one not built, or not beside a
            # standalone script): the script could not run its check, no finding of the library's
            _say("%s: %s (a module of dlconform's, not of the library)" % (NOT_RUN, describe(e)))
            os._exit(EXIT_NOT_RUN)
        if also:
            import traceback

            traceback.print_exc()
            _say("UNDETERMINED %s: the check stopped before it reached %s, after the finding of %s"
                 % (focus, focus, ", ".join(also)))
            os._exit(EXIT_UNDETERMINED)
        what = "assertion" if isinstance(e, AssertionError) else "unexpected exception"
        stop(focus or "*", "fail", "%s %s" % (what, describe(e)))
    if lesser:
        _say("not reproduced: no %s on %s (what remains of it is a %s)" % (verdict, focus, worst(lesser)))
    else:
        _say("not reproduced: the check of %s passes" % (focus or "every clause"))
