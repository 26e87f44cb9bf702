"""Verdict names, their order (best to worst), and the exceptions tests raise."""

VERDICTS = ("pass", "warn", "unsupported", "skip", "fail", "timeout", "crash", "error")
_RANK = {v: i for i, v in enumerate(VERDICTS)}
#: verdicts that make `dlconform run` exit 1: findings in the library
FAILING = frozenset({"fail", "timeout", "crash"})
#: the suite itself went wrong (an exception in a check's own code): never the library's
#: verdict; `dlconform run` exits 2
HARNESS_ERROR = "error"
LEVELS = ("MUST", "SHOULD", "MAY", "INFO")


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
    """The verdict of a broken clause of this level: fail for MUST, warn for SHOULD, MAY and
    INFO (suites/README.md, grading)."""
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
    """Raise when the target does not offer the feature a test needs."""

    def __init__(self, reason=""):
        super().__init__(reason)
        self.reason = reason

    def __str__(self):
        return str(self.reason)


class CheckFailure(AssertionError):
    """A failed `check.that` when the test asked for a hard check."""
