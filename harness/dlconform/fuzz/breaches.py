"""The breaches a Python twin of a fuzz target finds in one input, and how a reproducer
ends on them."""
import builtins
import os

ALLOWED = (BufferError, TypeError, ValueError, MemoryError)  # pyhost.c: a refusal's classes


def allowed_exceptions():
    """pyhost.c's list: the four, plus the builtin names of DLCONFORM_FUZZ_ALLOW_EXC."""
    extra = [n for n in os.environ.get("DLCONFORM_FUZZ_ALLOW_EXC", "").split(",") if n]
    return ALLOWED + tuple(getattr(builtins, n) for n in extra)


class Breaches(list):
    """dlc_oracle_fail that goes on: every breach, as (clause, message), in order."""

    def fail(self, clause, msg):
        self.append((clause, msg))


def say(line):
    print(line, flush=True)


def conclude(breaches, finding):
    """Prints every breach; AssertionError for the finding's clause when it shows, else for
    the first breach; "done" when there is none."""
    for clause, msg in breaches:
        say("breach: %s: %s" % (clause, msg))
    clause = finding.split(":", 1)[0].strip()
    hit = [b for b in breaches if b[0] == clause] or breaches
    if hit:
        raise AssertionError("%s: %s" % hit[0])
    say("done: no oracle breached%s" % (" (the finding was %s)" % clause if clause else ""))
