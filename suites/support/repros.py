"""Reproducer snippets: their setup lines, the one a test keeps, and the runner of a snippet in
a fresh interpreter (attempts.attempt_lines writes the snippet of a forged import).

A snippet runs as `PYTHONPATH=harness python3 -c "$SNIPPET"` from the repository root. Every
line that depends on the library under test comes from the target (its repro_* methods).
"""
import os
import subprocess
import sys
import textwrap

from dlconform import HARNESS_DIR, REPO_DIR

#: the imports of a snippet that hands a consumer forged capsules (attempts.attempt_lines)
FORGE_IMPORTS = "from dlconform.producers import RecordingProducer, forges"


def setup(target, *extra, modules="_probe, _ref"):
    """The target's setup lines, `import gc`, `from dlconform import <modules>`, then `extra`.
    The order of `modules` is part of the reproducer text results.json carries."""
    return list(target.repro_setup()) + ["import gc", "from dlconform import %s" % modules] + list(extra)


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
