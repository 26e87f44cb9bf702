"""reports/upstream.json: findings that are already known upstream (schema in reports/README.md).

Each entry names a library, a clause, a pattern (a regular expression searched in the
finding's messages), the library versions it covers (a PEP 440 specifier set such as
"<2.5", empty for every version), the upstream reference (`org/repo#N`) and its state (`open`,
`closed`, or `fixed in X.Y`). A finding of that library and clause, at a version in the range,
with a message the pattern matches, shows the reference.
"""
import json
import os
import re

from .. import REPO_DIR

PATH = os.path.join(REPO_DIR, "reports", "upstream.json")
SCHEMA = "dlconform-upstream/1"
FIELDS = ("library", "clause", "pattern", "versions", "upstream", "state", "summary")
_REF = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+#\d+$")
_STATE = re.compile(r"^(open|closed|fixed in \S+)$")

try:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version
except ImportError:  # without packaging (python3-packaging), an entry with a range matches no version
    SpecifierSet = Version = None
    InvalidSpecifier = InvalidVersion = ValueError


class UpstreamError(ValueError):
    """A malformed upstream.json; str() names the entry and the field."""


def validate(doc):
    """The entries of an upstream.json document; raises UpstreamError on a malformed one."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise UpstreamError("schema: expected %r" % SCHEMA)
    entries = doc.get("entries")
    if not isinstance(entries, list):
        raise UpstreamError("entries: expected a list")
    for i, e in enumerate(entries):
        where = "entries[%d]" % i
        if not isinstance(e, dict):
            raise UpstreamError(where + ": expected an object")
        for key in FIELDS:
            if not isinstance(e.get(key), str):
                raise UpstreamError("%s.%s: expected a string" % (where, key))
        if not _REF.match(e["upstream"]):
            raise UpstreamError("%s.upstream: expected org/repo#N, got %r" % (where, e["upstream"]))
        if not _STATE.match(e["state"]):
            raise UpstreamError("%s.state: expected open, closed or 'fixed in X.Y', got %r" % (where, e["state"]))
        try:
            re.compile(e["pattern"])
        except re.error as err:
            raise UpstreamError("%s.pattern: %s" % (where, err))
        if e["versions"] and SpecifierSet is not None:
            try:
                SpecifierSet(e["versions"])
            except InvalidSpecifier:
                raise UpstreamError("%s.versions: not a PEP 440 specifier set: %r" % (where, e["versions"]))
    return entries


def load(path=PATH):
    """The validated entries of path; [] when the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return []
    return validate(doc)


def in_range(version, versions):
    """Whether a version label is in a specifier set ("" covers every version)."""
    if not versions:
        return True
    if SpecifierSet is None:
        return False
    try:
        return SpecifierSet(versions).contains(Version(str(version)), prereleases=True)
    except InvalidVersion:
        return False


def matches(entry, library, version, clause, messages):
    return (entry["library"] == library and entry["clause"] == clause and in_range(version, entry["versions"])
            and any(re.search(entry["pattern"], m) for m in messages))


def matcher(entries):
    """A function (library, version, clause, messages) -> the references of the matching entries."""
    def match(library, version, clause, messages):
        return [{"ref": e["upstream"], "state": e["state"], "summary": e["summary"]}
                for e in entries if matches(e, library, version, clause, messages)]
    return match
