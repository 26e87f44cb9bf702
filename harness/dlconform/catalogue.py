"""The clause catalogue, suites/clauses.json (schema "dlconform-clauses/1")."""
import fnmatch
import json
import os

from . import SUITES_DIR

SCHEMA = "dlconform-clauses/1"
DEFAULT_PATH = os.path.join(SUITES_DIR, "clauses.json")


class CatalogueError(ValueError):
    pass


def group_of(clause_id):
    """`CAP-05` -> `CAP`; ids without a dash are their own group."""
    return clause_id.split("-", 1)[0] if clause_id else ""


FIELDS = ("id", "group", "level", "binds", "since", "source", "needs", "partial", "text", "reading", "input",
          "no_check")


class Clause:
    """One catalogue entry: attributes (clause.level) and mapping access (clause["level"])."""

    __slots__ = FIELDS + ("extra",)

    def __init__(self, entry):
        for f in FIELDS:
            setattr(self, f, entry.get(f))
        self.group = self.group or group_of(self.id)
        self.level = self.level or "MUST"
        self.binds = self.binds or "both"
        self.needs = self.needs or "cpu"
        self.partial = bool(self.partial)
        self.text = self.text or ""
        self.extra = {k: v for k, v in entry.items() if k not in FIELDS}

    def get(self, key, default=None):
        if key in FIELDS:
            v = getattr(self, key)
            return default if v is None else v
        return self.extra.get(key, default)

    def __getitem__(self, key):
        if key in FIELDS:
            return getattr(self, key)
        return self.extra[key]

    def to_dict(self):
        d = {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not None}
        d.update(self.extra)
        return d

    def __repr__(self):
        return "Clause(%s, %s, %s)" % (self.id, self.level, self.binds)


class Catalogue:
    def __init__(self, clauses=(), path=None):
        self.path = path
        self._by_id = {}
        for entry in clauses:
            if not isinstance(entry, Clause):
                if not isinstance(entry, dict) or not entry.get("id"):
                    raise CatalogueError("catalogue entry without an id: %r" % (entry,))
                entry = Clause(entry)
            self._by_id[entry.id] = entry

    @property
    def clauses(self):
        """The entries (Clause objects) in catalogue order."""
        return list(self._by_id.values())

    # ---- loading
    @classmethod
    def load(cls, path=None, missing_ok=True):
        path = path or DEFAULT_PATH
        if not os.path.exists(path):
            if missing_ok:
                return cls((), path)
            raise CatalogueError("no catalogue at %s" % path)
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            raise CatalogueError("cannot read catalogue %s: %s" % (path, e))
        if not isinstance(data, dict) or not isinstance(data.get("clauses"), list):
            raise CatalogueError("catalogue %s: expected an object with a 'clauses' list" % path)
        if data.get("schema", SCHEMA) != SCHEMA:
            raise CatalogueError("catalogue %s: unknown schema %r" % (path, data.get("schema")))
        return cls(data["clauses"], path)

    # ---- lookup
    def __contains__(self, clause_id):
        return clause_id in self._by_id

    def __iter__(self):
        return iter(self._by_id.values())

    def __len__(self):
        return len(self._by_id)

    def ids(self):
        return list(self._by_id)

    def get(self, clause_id, default=None):
        return self._by_id.get(clause_id, default)

    def __getitem__(self, clause_id):
        return self._by_id[clause_id]

    def level(self, clause_id):
        """MUST/SHOULD/MAY/INFO; unknown clauses count as MUST (a breach is never hidden)."""
        entry = self._by_id.get(clause_id)
        return entry.level if entry is not None else "MUST"

    def group(self, clause_id):
        entry = self._by_id.get(clause_id)
        return entry.group if entry is not None else group_of(clause_id)

    def binds(self, clause_id):
        entry = self._by_id.get(clause_id)
        return entry.binds if entry is not None else "both"

    def groups(self):
        """Group names in catalogue order."""
        seen = []
        for entry in self._by_id.values():
            g = entry.group
            if g not in seen:
                seen.append(g)
        return seen

    def in_group(self, group):
        return [e for e in self._by_id.values() if e.group == group]

    def matching(self, pattern):
        return [cid for cid in self._by_id if fnmatch.fnmatchcase(cid, pattern)]

    def unmatched(self, globs):
        """The clause globs that match no clause id here (none for an empty catalogue: nothing
        to check against)."""
        return [g for g in globs if len(self) and not self.matching(g)]

    def text(self, clause_id):
        entry = self._by_id.get(clause_id)
        return entry.text if entry is not None else ""


_cached = {}


def load(path=None):
    """Cached Catalogue.load (missing file: empty catalogue)."""
    key = os.path.abspath(path or DEFAULT_PATH)
    if key not in _cached:
        _cached[key] = Catalogue.load(key)
    return _cached[key]
