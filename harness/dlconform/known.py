"""Known failures: a file of findings a library's CI already knows, so that CI fails only on
new ones (`dlconform run --known FILE`, `make conformance KNOWN=FILE`).

One finding a line, `#` starts a comment, blank lines are ignored. A line has four fields
separated by white space:

    TARGET[@VERSIONS] ROLE CLAUSE TEST

- TARGET is the target spec as given to --target (`numpy`, `mylib`, `ref:fault=NAME`), a
  device variant's included (`torch@cuda`, `pyref@cuda:fault=NAME`, `mylib@cuda`): a device
  run's findings are listed under it, and `torch@cuda@>=2.11` limits such a line to versions.
  An adapter is matched by its module's name and class (`adapter_key`), so a line written with
  one checkout's path holds in another, or with the adapter named as a module.
- VERSIONS, when given, limits the line to those versions of the library: `1.24.2` (that
  version), `*` (any), or comparisons joined by commas: `>=2.0,<2.3`. Without it the line holds
  for every version: a release that still has the finding keeps it known.
- ROLE is producer, consumer, both or any, as in results.json.
- TEST is the pytest node id (`test_layout.py::test_consumer_huge_shape`), or `*` for every
  test of that clause.

A finding of the run (a fail, crash or timeout) that a line matches keeps its verdict and
gains `known: true`; it no longer makes the run exit 1. A line is reported as fixed when the
run checked what it names and found it passing: the check ran, on a version the line covers,
and gave `pass`. A line whose check did not run (another clause filter, an unsupported
feature) is neither used nor fixed. `--write-known FILE` writes a file from a run's findings,
without versions.
"""
import os
import re
from dataclasses import dataclass

from .kit.check import FAILING

HEADER = ("# dlconform known failures: one finding a line (harness/dlconform/known.py).\n"
          "# TARGET[@VERSIONS] ROLE CLAUSE TEST   (VERSIONS: 1.2.3, >=1.2,<2 or *; TEST may be *)\n")
_COMPARISON = re.compile(r"^(==|!=|>=|<=|>|<)?\s*([0-9][0-9A-Za-z.+-]*)$")


class KnownFileError(ValueError):
    """A known file that cannot be read; str() is one line naming the file and line."""


def version_key(text):
    """A version as a tuple that compares as versions do: numbers numerically, other parts as
    text after numbers ('2.6.0+cu130' is 2, 6, 0, then 'cu130'), trailing zeros dropped."""
    out = []
    for part in re.split(r"[.+-]", str(text)):
        m = re.match(r"^(\d+)(.*)$", part)
        out += [(0, int(m.group(1)), "")] if m and not m.group(2) else \
            [(0, int(m.group(1)), m.group(2))] if m else [(1, 0, part)]
    while out and out[-1] == (0, 0, ""):  # 1.2 is 1.2.0
        out.pop()
    return tuple(out)


def _holds(op, have, want):
    a, b = version_key(have), version_key(want)
    return {"==": a == b, "!=": a != b, ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b}[op or "=="]


@dataclass(frozen=True)
class Entry:
    target: str
    versions: str  # "" for every version
    role: str
    clause: str
    test: str
    line: int

    def covers(self, version):
        """Whether the line holds for this version of the library."""
        if self.versions in ("", "*"):
            return True
        for part in self.versions.split(","):
            op, want = _COMPARISON.match(part.strip()).groups()
            if not _holds(op, version, want):
                return False
        return True

    def names(self, rec, version):
        """Whether the record is of the check this line names, on a version it covers. A test is
        named as the runner names it, by its file's name (a plain pytest run's node id may carry
        a folder)."""
        return (same_target(rec["target"], self.target) and rec["role"] == self.role and rec["clause"] == self.clause
                and self.test in ("*", run_test_id(rec["test"])) and self.covers(version))

    def text(self):
        head = self.target + ("@" + self.versions if self.versions else "")
        return "%s %s %s %s" % (head, self.role, self.clause, self.test)


def run_test_id(test):
    """A test's node id as the runner writes it: FILE.py::NAME, without the file's folder."""
    path, sep, rest = str(test or "").partition("::")
    return os.path.basename(path) + sep + rest


_ADAPTER = re.compile(r"^(?P<where>.+?)(?P<py>\.py)?:(?P<attr>[A-Za-z_][A-Za-z0-9_]*)$")


def adapter_key(spec):
    """(module name, attribute) of an adapter spec, however it was named: `path/to/mylib_adapter.py:T`,
    `mylib_adapter.py:T` and `pkg.mylib_adapter:T` are all ("mylib_adapter", "T"); None for any
    other spec (`numpy`, `ref:fault=NAME`, `torch@cuda`)."""
    m = _ADAPTER.match(spec)
    if not m:
        return None
    where = m.group("where")
    name = os.path.basename(where) if m.group("py") else where.rpartition(".")[2]
    return (name, m.group("attr")) if name else None


def same_target(a, b):
    """Whether two target specs name the same target: equal, or the same adapter named from
    another folder or as a module (a known file written in one checkout holds in another)."""
    if a == b:
        return True
    key = adapter_key(a)
    return key is not None and key == adapter_key(b)


def device_names():
    """The devices a target spec can name after its @ (`torch@cuda`, `mylib@cuda`)."""
    from .targets import generic_cuda, loader

    return frozenset(d for ds in loader.DEVICES.values() for d in ds) | frozenset(generic_cuda.DEVICES)


def split_head(head):
    """(target spec, versions) of a line's first field. A device variant's spec has an @ of its
    own (`torch@cuda`, `pyref@cuda:fault=NAME`): the versions are what follows the last @,
    unless that begins a device's name, where the field is all target."""
    target, at, versions = head.rpartition("@")
    if not at or versions.partition(":")[0] in device_names():
        return head, ""
    return target, versions


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
        if len(fields) != 4:
            raise KnownFileError("known file %s, line %d: expected 'TARGET[@VERSIONS] ROLE CLAUSE TEST', got %r"
                                 % (path, n, raw.strip()))
        target, versions = split_head(fields[0])
        if not target or (fields[0].endswith("@") and not versions):
            raise KnownFileError("known file %s, line %d: empty target or version in %r" % (path, n, fields[0]))
        if versions not in ("", "*") and not all(_COMPARISON.match(p.strip()) for p in versions.split(",")):
            raise KnownFileError("known file %s, line %d: versions %r are not VERSION, *, or comparisons like "
                                 ">=1.2,<2" % (path, n, versions))
        entries.append(Entry(target, versions, fields[1], fields[2], fields[3], n))
    return entries


def library_version(spec, info):
    """The version a target's findings are judged at: its library's own version when the run
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
    """Marks the findings the entries name (`known: True`). Returns (the entries that matched a
    finding, the entries whose check ran and passed: fixed, to be removed from the file)."""
    used, passed = set(), set()
    for rec in results:
        version = library_version(rec["target"], targets.get(rec["target"]))
        for e in entries:
            if not e.names(rec, version):
                continue
            if is_finding(rec):
                rec["known"] = True
                used.add(e)
            elif rec["verdict"] == "pass":
                passed.add(e)
    return ([e for e in entries if e in used], [e for e in entries if e in passed and e not in used])


def write(path, results):
    """A known file listing every finding of the run, one line each, in run order, for every
    version of the library."""
    seen = []
    for rec in results:
        if is_finding(rec):
            line = "%s %s %s %s" % (rec["target"], rec["role"], rec["clause"], rec["test"] or "*")
            if line not in seen:
                seen.append(line)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(HEADER + "".join(line + "\n" for line in seen))
    return len(seen)


def summary(results, gated=False):
    """The console's lines on a run's findings: those no known file lists (`new` ones when a
    known file gates the run) by clause and test, and how many known ones were seen."""
    new = [r for r in results if is_finding(r) and not r.get("known")]
    known = [r for r in results if is_finding(r) and r.get("known")]
    out = ["%s finding: %s %s %s %s (%s)" % ("new" if gated else "a", r["target"], r["role"], r["clause"], r["test"],
                                            r["verdict"]) for r in new]
    if known:
        out.append("%d known finding%s seen (not new)" % (len(known), "" if len(known) == 1 else "s"))
    return out
