"""Known failures: a file of findings a library's CI already knows, so that CI fails only on
new ones (`dlconform run --known FILE`, `make conformance KNOWN=FILE`).

The format is the one of fuzz/known/: one finding a line, `#` starts a comment, blank lines
are ignored. A line has four fields separated by white space:

    TARGET@VERSION ROLE CLAUSE TEST

- TARGET is the target spec as given to --target (`numpy`, `mylib`, `ref:fault=NAME`).
- VERSION is the library's version as the run reports it, or `*` for any version.
- ROLE is producer, consumer, both or any, as in results.json.
- TEST is the pytest node id (`test_layout.py::test_consumer_huge_shape`), or `*` for every
  test of that clause.

A finding of the run (a fail, crash or timeout) that a line matches keeps its verdict and
gains `known: true`; it no longer makes the run exit 1. A line that matches no finding of a
target the run tested is reported as fixed: remove it from the file. `--write-known FILE`
writes a file from a run's findings.
"""
import os
from dataclasses import dataclass

from .verdicts import FAILING

HEADER = ("# dlconform known failures: one finding a line (harness/dlconform/known.py).\n"
          "# TARGET@VERSION ROLE CLAUSE TEST   (VERSION or TEST may be *)\n")


class KnownFileError(ValueError):
    """A known file that cannot be read; str() is one line naming the file and line."""


@dataclass(frozen=True)
class Entry:
    target: str
    version: str
    role: str
    clause: str
    test: str
    line: int

    def matches(self, rec, version):
        return (rec["target"] == self.target and self.version in ("*", version) and rec["role"] == self.role
                and rec["clause"] == self.clause and self.test in ("*", rec["test"]))

    def text(self):
        return "%s@%s %s %s %s" % (self.target, self.version, self.role, self.clause, self.test)


def parse(path):
    """The entries of a known file, in file order; KnownFileError for a bad file or line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise KnownFileError("known file %s: cannot read it (%s)" % (path, e))
    entries = []
    for n, raw in enumerate(lines, 1):
        text = raw.split("#", 1)[0].strip()
        if not text:
            continue
        fields = text.split(None, 3)  # TEST is the rest of the line (a session record's has spaces)
        if len(fields) != 4 or "@" not in fields[0]:
            raise KnownFileError("known file %s, line %d: expected 'TARGET@VERSION ROLE CLAUSE TEST', got %r"
                                 % (path, n, raw.strip()))
        target, version = fields[0].rsplit("@", 1)
        if not target or not version:
            raise KnownFileError("known file %s, line %d: empty target or version in %r" % (path, n, fields[0]))
        entries.append(Entry(target, version, fields[1], fields[2], fields[3], n))
    return entries


def library_version(spec, info):
    """The version a target's findings are keyed by: its library's own version when the run
    lists it, the only version listed, or `?`."""
    versions = (info or {}).get("versions") or {}
    own = versions.get(spec.split(":", 1)[0].split("@", 1)[0])
    if own:
        return str(own)
    values = [str(v) for v in versions.values() if v]
    return values[0] if len(values) == 1 else "?"


def is_finding(rec):
    return rec["verdict"] in FAILING


def apply(entries, results, targets):
    """Marks the findings the entries match (`known: True`). Returns the entries that matched
    no finding of a target this run tested: fixed, to be removed from the file."""
    used = set()
    for rec in results:
        if not is_finding(rec):
            continue
        version = library_version(rec["target"], targets.get(rec["target"]))
        for e in entries:
            if e.matches(rec, version):
                rec["known"] = True
                used.add(e)
    tested = {t for t, info in targets.items() if info.get("status") not in ("skipped", "pending")}
    return [e for e in entries if e not in used and e.target in tested]


def write(path, results, targets):
    """A known file listing every finding of the run, one line each, in run order."""
    seen = []
    for rec in results:
        if is_finding(rec):
            line = "%s@%s %s %s %s" % (rec["target"], library_version(rec["target"], targets.get(rec["target"])),
                                      rec["role"], rec["clause"], rec["test"] or "*")
            if line not in seen:
                seen.append(line)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEADER + "".join(line + "\n" for line in seen))
    return len(seen)
