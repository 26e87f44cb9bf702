"""A case run in a process of its own, for checks whose library may die doing what they check.

`run_case(check, target, fn, args)` writes the reproducer of fn(target, check, **args) (the
same script a finding carries, dlconform.repro.script) and runs it in a child process: the
check then judges how the child ended (`Run`: a signal, a finding the script printed, or a clean
exit). The case becomes the check's reproducer (check.set_case), so what the check records
reproduces as it was seen.
"""
import os
import re
import subprocess
import sys
import textwrap

from dlconform import HARNESS_DIR, SUITES_DIR
from dlconform import cases as _cases
from dlconform import repro as _repro

#: a finding line of a script (dlconform.kit.check.reproduce)
_FOUND = re.compile(r"^(?:REPRODUCED|ALSO) ([A-Z]+-\d+|\*): (.*)$", re.M)


class Run:
    """How a child ended: `rc` (negative: the signal; None: it outlived the limit), `out`,
    `err`, and `findings` ([(clause, message)] the script printed)."""

    def __init__(self, rc, out, err):
        self.rc, self.out, self.err = rc, out, err
        self.findings = _FOUND.findall(out or "")

    @property
    def died(self):
        return self.rc is not None and self.rc < 0

    def describe(self):
        """'exit status N (last stderr line)', or why there is none."""
        if self.rc is None:
            return self.err
        tail = textwrap.shorten(self.err.strip().splitlines()[-1] if self.err.strip() else "", 160)
        return "exit status %s%s" % (self.rc, (" (" + tail + ")") if tail else "")


def run_case(check, target, fn, args=None, timeout=60, env=None, unset=()):
    """Runs fn(target, check, **args) as its reproducer in a process of its own, with `env` added
    to the environment and the names in `unset` removed; the Run of it. Under dlconform's runner
    the process is forked from the warm parent, which has imported the library and used nothing
    (dlconform.cases); where that cannot be (no warm parent; `env` or `unset`, which an
    interpreter reads as it starts) it is a fresh interpreter."""
    check.set_case(fn, args, env=env)
    text = _repro.script(fn, args, target.spec or target.name, levels={}, feeds=check.feeds, env=env)
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [HARNESS_DIR, SUITES_DIR, full.get("PYTHONPATH")]))
    full.update(env or {})
    for name in unset:
        full.pop(name, None)
    if not env and not unset:
        forked = _cases.run(text, full, os.getcwd(), timeout)
        if forked is not None:
            rc, out, err = forked
            return Run(rc, out, err) if rc is not None else Run(None, "", "timed out after %ss" % timeout)
    try:
        p = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, timeout=timeout, env=full)
    except subprocess.TimeoutExpired:
        return Run(None, "", "timed out after %ss" % timeout)
    return Run(p.returncode, p.stdout, p.stderr)
