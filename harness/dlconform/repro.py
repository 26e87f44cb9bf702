"""Self-contained Python reproducer snippets.

A snippet is a Python script whose first line (run_header()) names the interpreter and the
PYTHONPATH it needs. It exits non-zero when the finding is there (dlconform.snippet).
"""
import shlex
import sys

from . import HARNESS_DIR

#: the first words of a snippet's run line
RUN_PREFIX = "# run: "


def run_header(python=None):
    """`# run: PYTHONPATH=<harness> <python> repro.py`: how to run a snippet saved as repro.py."""
    return "%sPYTHONPATH=%s %s repro.py" % (RUN_PREFIX, shlex.quote(HARNESS_DIR), shlex.quote(python or sys.executable))


def _lines(x):
    if x is None:
        return []
    if isinstance(x, str):
        return x.splitlines()
    out = []
    for item in x:
        out.extend(str(item).splitlines() or [""])
    return out


def snippet(setup_lines, body_lines):
    """Setup lines (deduplicated, order kept) followed by the body, as one text."""
    seen = set()
    setup = []
    for line in _lines(setup_lines):
        if line in seen and line.strip():
            continue
        seen.add(line)
        setup.append(line)
    body = []
    for line in _lines(body_lines):
        # a repeated top-level import adds nothing; other repeated lines may matter
        if line in seen and line.startswith(("import ", "from ")):
            continue
        if line.startswith(("import ", "from ")):
            seen.add(line)
        body.append(line)
    return "\n".join(setup + body).strip("\n") + "\n"


def bytes_literal(data):
    """A Python expression for `data` that stays short in a snippet."""
    data = bytes(data)
    if len(data) <= 16:
        return repr(data)
    return "bytes.fromhex(%r)" % data.hex()


def run_command(target, clause, nodeid=None, python=None):
    """The generic reproducer: rerun the clause against the target, into a fresh folder (never
    over reports/out)."""
    line = "PYTHONPATH=%s %s -m dlconform run --target %s%s --out \"$(mktemp -d)\"" % (
        shlex.quote(HARNESS_DIR), shlex.quote(python or sys.executable), shlex.quote(target),
        "" if clause is None else " --clause " + shlex.quote(clause))
    if nodeid:
        line += "\n# pytest node: %s" % nodeid
    return line
