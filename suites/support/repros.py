"""Reproducer snippets: their setup lines, the lines that assert what a check compared, the
one a test keeps, and the runner of a snippet in a fresh interpreter (attempts.attempt_lines
writes the snippet of a forged import).

A snippet runs as its first line says (`# run: PYTHONPATH=... python3 repro.py`). It exits 0
when the library behaves; at the first expectation that does not hold it prints the clause and
what differed and exits 1 (dlconform.snippet). The expectation lines are written here from the
values the check compares. Every line that depends on the library under test comes from the
target (its repro_* methods).
"""
import os
import subprocess
import sys
import textwrap

from dlconform import HARNESS_DIR, REPO_DIR
from dlconform.repro import RUN_PREFIX, bytes_literal, run_header
from dlconform import snippet as _snippet

#: the first word of the line a reproduced finding prints
MARK = _snippet.MARK
#: the imports of a snippet that hands a consumer forged capsules (attempts.attempt_lines)
FORGE_IMPORTS = "from dlconform.producers import RecordingProducer, forges"
#: what every snippet asserts with (dlconform/snippet.py)
SNIPPET_IMPORTS = ("from dlconform.snippet import attempt, describe, elements, expect, expect_clean, expect_equal, "
                   "expect_raises, expect_returns, finding")


def setup(target, *extra, modules="_probe, _ref"):
    """The run line, the target's setup lines, `import gc`, `from dlconform import <modules>`,
    the snippet's assertions, then `extra`. The order of `modules` is part of the reproducer
    text results.json carries."""
    return ([run_header()] + list(target.repro_setup()) + ["import gc", "from dlconform import %s" % modules,
                                                           SNIPPET_IMPORTS] + list(extra))


def with_env(lines, assignment):
    """Snippet lines whose run line sets `assignment` (NAME=value) too."""
    return [RUN_PREFIX + assignment + " " + line[len(RUN_PREFIX):] if line.startswith(RUN_PREFIX) else line
            for line in lines]


# ---------------------------------------------------------------------------- expectation lines
class Code(str):
    """Source text that a snippet line uses as it is (lit() gives it back unquoted)."""


def lit(value):
    """A Python expression for `value` in a snippet: Code as it is, bytes kept short."""
    if isinstance(value, Code):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes_literal(value)
    return repr(value)


# In each, `clause` and `what` are a text or Code (an expression that gives the text).
def expect(cond, clause, what):
    """The line that requires the expression `cond` to hold."""
    return "expect(%s, %s, %s)" % (cond, lit(clause), lit(what))


def expect_equal(got, want, clause, what):
    """The line that requires the expression `got` to equal the value `want` (lit())."""
    return "expect_equal(%s, %s, %s, %s)" % (got, lit(want), lit(clause), lit(what))


def expect_returns(call, clause, what):
    """The expression of `call`'s result, an exception being the finding."""
    return "expect_returns(lambda: %s, %s, %s)" % (call, lit(clause), lit(what))


def expect_raises(call, clause, what, kinds=None):
    """The expression of the exception `call` raises cleanly (of `kinds`, names of exception
    classes, any Exception by default); a result is the finding."""
    if not kinds:
        return "expect_raises(lambda: %s, %s, %s)" % (call, lit(clause), lit(what))
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    names = kinds[0] if len(kinds) == 1 else "(%s)" % ", ".join(kinds)
    return "expect_raises(lambda: %s, %s, %s, %s)" % (call, lit(clause), lit(what), names)


def expect_clean(exc, clause, what):
    """The line that requires the refusal `exc` (an expression, None for no refusal) to be clean."""
    return "expect_clean(%s, %s, %s)" % (exc, lit(clause), lit(what))


def static_name_lines(capsules, clause, what):
    """Lines that hold CAP-09 as readings.static_name_verdict() does for the capsules named by the
    expressions `capsules`: their name strings lie in loaded images, or one string serves them
    all; names allocated per capsule are the finding."""
    return [
        "import ctypes",
        "_name_of = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.py_object)(('PyCapsule_GetName', ctypes.pythonapi))",
        "def _mapping(a):",
        "    for l in open('/proc/self/maps'):",
        "        f = l.split(None, 5)",
        "        if int(f[0].split('-')[0], 16) <= a < int(f[0].split('-')[1], 16):",
        "            return f[5].strip() if len(f) > 5 else 'anonymous mapping'",
        "_names = [_name_of(c) or 0 for c in (%s,)]" % ", ".join(capsules),
        "_where = [_mapping(a) for a in _names]",
        expect("all(str(w).startswith('/') for w in _where) or len(set(_names)) == 1", clause,
               Code("%r + ': ' + ', '.join('%%#x in %%s' %% aw for aw in zip(_names, _where))" % (
                   what + ": name strings allocated per capsule (a name must be statically allocated)",))),
    ]


def attempt_setup(target):
    """The setup lines of attempts.attempt_lines() and of the checks that build on them."""
    return setup(target, FORGE_IMPORTS, modules="_ref, _probe")


def keep_first(check, lines):
    """Sets the reproducer unless an earlier case of this test already recorded something other
    than pass: the snippet then reproduces the first finding, not the last case tried."""
    if any(v != "pass" for _, v, _ in check.records):
        return
    check.repro(lines)


def forge_repr(kw):
    return "_ref.Forge(%s)" % ", ".join("%s=%r" % (k, v) for k, v in kw.items())


def run_snippet(snippet, timeout=60, env=None, unset=()):
    """Runs a snippet (text or lines) in a fresh interpreter from the repository root, with
    harness/ on PYTHONPATH, `env` added to the environment and the names in `unset` removed.
    Returns (returncode, stdout, stderr): a negative returncode is the signal that killed it,
    None a run that took longer than `timeout` seconds (stderr then says so)."""
    text = snippet if isinstance(snippet, str) else "\n".join(snippet)
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [HARNESS_DIR, full.get("PYTHONPATH")]))
    full.update(env or {})
    for name in unset:
        full.pop(name, None)
    try:
        p = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, timeout=timeout, env=full,
                           cwd=REPO_DIR)
    except subprocess.TimeoutExpired:
        return None, "", "timed out after %ss" % timeout
    return p.returncode, p.stdout, p.stderr


def describe_exit(rc, stderr):
    """'exit status N (last stderr line)' of a run_snippet() result, or why it has none."""
    if rc is None:
        return stderr
    tail = textwrap.shorten(stderr.strip().splitlines()[-1] if stderr.strip() else "", 160)
    return "exit status %s%s" % (rc, (" (" + tail + ")") if tail else "")
