"""The result record: one verdict for one clause of one test of one target.

Every part of dlconform that writes results (the pytest plugin in the child, the runner, the
CLI, fuzz-ci, the merge) makes its records here, so the field list and the defaults live in
one place. A record is a plain dict, ready for JSON, with the fields of `FIELDS` in that order,
then those of `OPTIONAL` that are set. reports/README.md documents each field.

Defaults, filled once when a record is made:
- `level` and `group` come from the catalogue. A clause the catalogue lacks counts as MUST,
  so a breach is never hidden; this includes the session clause `*` of records about a whole
  run (a target that could not start, a child that died between tests).
- `role` is `any`; `message`, `repro` and `test` are empty; `duration` is 0.0.
"""

from . import catalogue as _catalogue

FIELDS = ("target", "role", "clause", "level", "group", "verdict", "message", "repro", "test", "duration")
#: kept only when set: the evidence of a crash (stack, oracle line); the other library of an
#: interop check; True for a finding a known-failures file lists (known.py); what the check
#: fed the library when that was not valid input ("invalid" or "argument": a crash there is a
#: robustness crash, suites/README.md, Grading); the device the check's tensors were on when
#: not the host's CPU ("cuda:0")
OPTIONAL = ("evidence", "peer", "known", "input", "device")
#: the clause of a record about a whole run rather than one clause
SESSION = "*"


def complete(rec, catalogue=None):
    """Fills a missing level and group of the dict `rec` in place (other keys are left as they
    are: a merged record carries its source and version too); returns rec."""
    cat = catalogue if catalogue is not None else _catalogue.load()
    clause = rec.get("clause") or SESSION
    if not rec.get("level"):
        rec["level"] = cat.level(clause)
    if not rec.get("group"):
        rec["group"] = cat.group(clause)
    return rec


class Record(dict):
    """A result record (a dict). Unknown keys of `fields` are dropped."""

    def __init__(self, fields=(), catalogue=None, **kw):
        given = dict(fields, **kw)
        rec = {k: given.get(k) for k in FIELDS}
        rec["clause"] = rec["clause"] or SESSION
        complete(rec, catalogue)
        rec["role"] = rec["role"] or "any"
        for k in ("message", "repro", "test"):
            rec[k] = rec[k] or ""
        rec["duration"] = float(rec["duration"] or 0.0)
        for k in OPTIONAL:
            if given.get(k):
                rec[k] = True if k == "known" else str(given[k])
        super().__init__(rec)

    @classmethod
    def session(cls, target, test, verdict, message, repro="", evidence=""):
        """A record about a whole run of `target` (clause `*`): `test` says where it happened,
        e.g. `<start>`, `<collection>`, `<between tests>`."""
        return cls(target=target, clause=SESSION, verdict=verdict, message=message, test=test,
                   repro=repro, evidence=evidence)
