"""The result record (dlconform/records.py) and the grading rule (verdicts.breach)."""
import json

from dlconform import catalogue, records
from dlconform.records import Record
from dlconform.kit.check import breach


def _catalogue():
    return catalogue.Catalogue([{"id": "CAP-01", "level": "MUST"}, {"id": "API-04", "level": "SHOULD"},
                                {"id": "SEM-02", "level": "MAY", "group": "SEMX"}])


def test_level_and_group_come_from_the_catalogue():
    cat = _catalogue()
    assert Record(clause="API-04", verdict="warn", catalogue=cat)["level"] == "SHOULD"
    assert Record(clause="SEM-02", verdict="pass", catalogue=cat)["group"] == "SEMX"
    # a clause the catalogue lacks, and the session clause, count as MUST: never hidden
    unknown = Record(clause="NEW-99", verdict="fail", catalogue=cat)
    assert (unknown["level"], unknown["group"]) == ("MUST", "NEW")
    session = Record.session("numpy", "<start>", "crash", "cannot start")
    assert (session["clause"], session["level"], session["group"]) == ("*", "MUST", "*")
    # a level the record already carries is kept
    assert Record(clause="CAP-01", level="SHOULD", verdict="warn", catalogue=cat)["level"] == "SHOULD"


def test_fields_in_order_defaults_and_optional_fields():
    rec = Record({"event": "result", "clause": "CAP-01", "verdict": "pass", "target": "ref", "duration": None,
                  "evidence": "", "unknown": 1}, _catalogue())
    assert list(rec) == list(records.FIELDS)
    assert (rec["role"], rec["message"], rec["repro"], rec["test"], rec["duration"]) == ("any", "", "", "", 0.0)
    with_peer = Record(clause="LAY-11", verdict="pass", peer="numpy", evidence="stack", catalogue=_catalogue())
    assert list(with_peer)[len(records.FIELDS):] == ["evidence", "peer"]
    assert json.loads(json.dumps(with_peer)) == dict(with_peer)


def test_complete_keeps_other_keys():
    merged = {"clause": "API-04", "verdict": "warn", "source": "s0", "version": "1.0"}
    assert records.complete(merged, _catalogue()) is merged
    assert merged == {"clause": "API-04", "verdict": "warn", "source": "s0", "version": "1.0",
                      "level": "SHOULD", "group": "API"}


def test_breach_is_fail_only_for_must():
    assert [breach(level) for level in ("MUST", "SHOULD", "MAY", "INFO")] == ["fail", "warn", "warn", "warn"]
