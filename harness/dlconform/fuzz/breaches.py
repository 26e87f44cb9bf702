"""The breaches a Python twin of a fuzz target finds in one input, and how a reproducer
ends on them."""
import builtins
import os

from ..kit.check import EXIT_UNDETERMINED, MARK

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


def replayer(data, target, known):
    """conclude()'s `replay` for an input `data` of the fuzz target TARGET: its sanitizer build's
    answer (replay.sanitizer_replay), asked only when needed; None without a target."""
    if not target:
        return None

    def replay():
        from .replay import sanitizer_replay

        return sanitizer_replay(data, target, known)
    return replay


def read_known(path):
    """The entries of a known-findings file (fuzz/known/): dedup keys, bare clauses and input
    classes, one a line; comments (#) and blank lines left out. A missing file has none."""
    if not path or not os.path.exists(path):
        return set()
    with open(path, encoding="utf-8") as f:
        return {line.rstrip("\n") for line in f if line.strip() and not line.startswith("#")}


def conclude(breaches, finding, known=None, sanitizer=None, name="input", replay=None):
    """How a reproducer ends, as dlconform.kit.check.reproduce does (so `dlconform recheck` reads
    it): every breach printed, then
    - the finding's clause shows, or no finding is named and a breach shows that the
      known-findings file `known` (a path, or None) does not set aside, by key or bare clause as
      fuzz-ci does: `REPRODUCED CLAUSE: message`, then AssertionError (exit 1);
    - the finding's clause does not show but such a breach does: `UNDETERMINED`, exit 3;
    - the finding is a crash of the sanitizer build (`sanitizer`: its kind) that this script, run
      without one, did not show: the input replayed by that build (`replay`: a call giving
      replay.sanitizer_replay's answer): REPRODUCED (exit 1) when it crashes so again,
      UNDETERMINED on another finding, "done" when it runs through; where this dlconform has no
      such build, `UNSUPPORTED`, with the replay command of the input `name`;
    - else `done` (exit 0): fixed, or only breaches the maintainers already listed."""
    from .triage import oracle_key

    entries = read_known(known)
    if known and not os.path.exists(known):
        say("known: %s is not there: no breach is set aside" % known)

    def is_known(b):
        return b[0] in entries or oracle_key(*b) in entries

    for b in breaches:
        say("breach%s: %s: %s" % (((" (known, set aside by %s)" % known) if is_known(b) else "",) + tuple(b)))
    clause = finding.split(":", 1)[0].strip()
    new = [b for b in breaches if not is_known(b)]
    hit = [b for b in breaches if b[0] == clause] or ([] if clause else new)
    if hit:
        say("%s %s: %s" % ((MARK,) + tuple(hit[0])))
        raise AssertionError("%s: %s" % hit[0])
    if new:
        say("UNDETERMINED %s: the finding's clause does not show, another breach does: %s: %s"
            % ((clause,) + tuple(new[0])))
        raise SystemExit(EXIT_UNDETERMINED)
    if sanitizer and clause and replay is not None:
        got = replay()
        if got is not None:
            binary, rc, t = got
            if t is not None and t["kind"] == sanitizer:
                say("%s %s: %s again in %s (%s)" % (MARK, clause, sanitizer, binary, t["key"]))
                raise AssertionError("%s: %s again in %s" % (clause, sanitizer, binary))
            if t is not None:
                say("UNDETERMINED %s: %s replayed the input to another finding: %s" % (clause, binary, t["key"]))
                raise SystemExit(EXIT_UNDETERMINED)
            say("done: %s ran the input through (exit %s): the %s is gone" % (binary, rc, sanitizer))
            return
    if sanitizer and clause:
        say("UNSUPPORTED: the finding is a %s in the sanitizer build, unseen here without one; "
            "make fuzz-replay FILE=%s (the input beside this script) replays it" % (sanitizer, name))
        return
    was = " (the finding was %s)" % clause if clause else ""
    if breaches:
        say("done: no new breach; %d known one(s) set aside by %s%s" % (len(breaches), known, was))
    else:
        say("done: no oracle breached%s" % was)
