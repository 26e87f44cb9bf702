"""Self-contained Python reproducer snippets.

A snippet is text runnable as `PYTHONPATH=harness python3 -c "$SNIPPET"` from the repository root.
"""
import shlex


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


def run_command(target, clause, nodeid=None):
    """The generic reproducer: rerun the clause against the target."""
    line = "python3 -m dlconform run --target %s --clause %s" % (shlex.quote(target), shlex.quote(clause))
    if nodeid:
        line += "\n# pytest node: %s" % nodeid
    return line
