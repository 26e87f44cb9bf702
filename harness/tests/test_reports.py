"""Renderers: results.json schema, Markdown, JUnit XML, atomic writes."""
import json
import os
import sys
import xml.etree.ElementTree as ET

import pytest

from dlconform import records, report
from dlconform.report import json_report, junit, markdown
from dlconform.kit.check import VERDICTS


def rec(target, clause, verdict, level="MUST", test="test_x.py::test_a", message="", repro=""):
    return {"target": target, "role": "producer", "clause": clause, "level": level, "group": clause.split("-")[0],
            "verdict": verdict, "message": message, "repro": repro, "test": test, "duration": 0.01}


@pytest.fixture
def doc():
    results = [
        rec("ref", "CAP-01", "pass"),
        rec("ref", "CAP-02", "fail", message="wrong | name", repro="cap = x.__dlpack__()\nprint(cap)"),
        rec("numpy", "CAP-01", "crash", message="killed by SIGSEGV", repro="python3 -m dlconform run"),
        rec("numpy", "CAP-01", "pass", test="test_x.py::test_b"),
        rec("numpy", "VER-01", "timeout", message="no result after 30s", repro="r"),
        rec("numpy", "FLG-01", "warn", level="SHOULD", message="ambiguous\x01", repro="r"),
        rec("numpy", "DEV-01", "unsupported", message="no GPU"),
        rec("numpy", "DEV-02", "skip", message="skipped"),
    ]
    targets = {"ref": {"status": "ran", "reason": "", "roles": ["consumer", "producer"], "versions": {}},
               "numpy": {"status": "ran", "reason": "", "roles": ["producer"], "versions": {"numpy": "1.24.2"}},
               "foo": {"status": "skipped", "reason": "cannot import module 'foo'", "roles": [], "versions": {}}}
    return json_report.build(targets, results, {"python": {"version": "3.11"}}, {"argv": []})


def test_json_schema_fields(doc):
    assert doc["schema"] == "dlconform-results/1"
    for key in ("generated", "environment", "targets", "results", "summary"):
        assert key in doc
    assert set(doc["summary"]["numpy"]) == set(VERDICTS)
    assert doc["summary"]["numpy"]["crash"] == 1 and doc["summary"]["ref"]["fail"] == 1
    assert doc["summary"]["foo"] == {v: 0 for v in VERDICTS}
    for r in doc["results"]:
        assert set(records.FIELDS) <= set(r)


def test_markdown(doc):
    md = markdown.render(doc)
    assert md.startswith("# dlconform results")
    assert "| numpy | ran | numpy 1.24.2 | 1 | 1 | 1 | 1 | 0 | 1 | 1 |" in md
    assert "wrong \\| name" in md  # table cells escaped
    assert "```\ncap = x.__dlpack__()\nprint(cap)\n```" in md
    assert "<details>" in md
    # per-clause roll-up: worst verdict of CAP-01 on numpy is crash
    rollup = md.split("## Per clause")[1]
    assert "| CAP-01 | MUST | pass | **crash** |" in rollup


def test_junit_parses_and_maps(doc):
    root = ET.fromstring(junit.render(doc))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert set(suites) == {"ref", "numpy", "foo"}
    np_suite = suites["numpy"]
    assert np_suite.get("tests") == "6" and np_suite.get("errors") == "2" and np_suite.get("skipped") == "2"
    cases = {c.get("name"): c for c in np_suite.findall("testcase")}
    assert cases["test_x.py::test_a [CAP-01]"].find("error").get("type") == "crash"
    assert cases["test_x.py::test_a [VER-01]"].find("error").get("type") == "timeout"
    assert cases["test_x.py::test_a [DEV-01]"].find("skipped") is not None
    assert "warn" in cases["test_x.py::test_a [FLG-01]"].find("system-out").text
    assert suites["ref"].find("testcase[@name='test_x.py::test_a [CAP-02]']/failure") is not None
    assert root.get("failures") == "1" and root.get("errors") == "2"


def test_write_all_is_atomic(tmp_path, doc, monkeypatch):
    paths = report.write_all(str(tmp_path), doc)
    assert json_report.load(paths["json"])["results"] == doc["results"]
    before = (tmp_path / "results.json").read_text()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    doc2 = dict(doc, results=[])
    with pytest.raises(OSError):
        report.write_all(str(tmp_path), doc2)
    assert (tmp_path / "results.json").read_text() == before  # the old file is intact
    assert sorted(os.listdir(tmp_path)) == ["results.json", "results.junit.xml", "results.md"]  # no tmp left


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600)])
def test_reports_honour_the_umask(tmp_path, doc, umask, mode):
    """Report files get the mode a plain open() gives (0666 less the umask), as results.jsonl
    does; a temporary file's private 0600 must not survive the rename."""
    old = os.umask(umask)
    try:
        paths = report.write_all(str(tmp_path), doc)
    finally:
        os.umask(old)
    for p in paths.values():
        assert os.stat(p).st_mode & 0o777 == mode, p


@pytest.mark.parametrize("n, words", [(1, "1 finding is listed in known.txt and does not"),
                                      (2, "2 findings are listed in known.txt and do not")])
def test_known_failures_line_agrees_in_number(n, words):
    results = [dict(rec("numpy", "CAP-0%d" % (i + 1), "fail", repro="r"), known=True) for i in range(n)]
    d = json_report.build({}, results, {}, {"argv": [], "known": {"file": "known.txt", "used": [], "fixed": []}})
    assert "%s fail the run." % words in markdown.render(d)


def test_json_roundtrip_with_odd_values(tmp_path):
    d = json_report.build({}, [rec("t", "X-01", "fail", message="\u2603 \x00")], {})
    path = report.atomic_write(str(tmp_path / "r.json"), json_report.dumps(d))
    assert json.loads(open(path).read())["results"][0]["message"] == "\u2603 \x00"
    ET.fromstring(junit.render(d))  # control characters do not break the XML


def test_rerun_command_writes_to_a_fresh_folder():
    from dlconform import repro

    line, node = repro.run_command("ref", "CAP-01", "t.py::x").split("\n")
    assert line.endswith(" -m dlconform run --target ref --clause CAP-01 --out \"$(mktemp -d)\"")
    assert line.startswith("PYTHONPATH=%s %s " % (repro.HARNESS_DIR, sys.executable))
    assert node == "# pytest node: t.py::x"
