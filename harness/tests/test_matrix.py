"""The compatibility matrix: `dlconform merge`, its schema, conflicts, rejected inputs, and the
MATRIX.md / index.html renderers (fast; the browser test is test_matrix_browser.py)."""
import json
import os
import re

import pytest

from dlconform import REPO_DIR, cli
from dlconform.matrix import merge, synthetic, upstream
from dlconform.matrix import run as matrix_run
from dlconform.report import html, matrix_findings, matrix_md, matrix_view

import matrix_fixture


def rec(target, clause, verdict, test="test_capsule.py::test_a", **kw):
    r = {"target": target, "role": "producer", "clause": clause, "level": "MUST", "group": clause.split("-")[0],
         "verdict": verdict, "message": "" if verdict == "pass" else "%s broke %s" % (target, clause),
         "repro": "" if verdict == "pass" else "import %s\nprint('repro %s')" % (target, clause),
         "test": test, "duration": 0.01}
    r.update(kw)
    return r


def results_doc(libs, records, **extra):
    targets = {lib: {"status": "ran", "reason": "", "roles": ["consumer", "producer"], "versions": {lib: v}}
               for lib, v in libs.items()}
    doc = {"schema": "dlconform-results/1", "generated": "2026-01-01T00:00:00+00:00",
           "environment": {"python": {"version": "3.11.2", "implementation": "CPython",
                                      "executable": "/usr/bin/python3"},
                           "platform": "Linux-x", "machine": "x86_64", "libraries": dict(libs),
                           "dlpack_header": [1, 3], "dlconform": {"version": "0.1.0", "git": "abc123"}},
           "run": {"argv": ["run"], "exit_status": 1, "duration": 2.0}, "targets": targets,
           "results": records, "summary": {}}
    doc.update(extra)
    return doc


def write(tmp_path, name, doc):
    p = tmp_path / name / "results.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(p)


# ---------------------------------------------------------------- merge
def test_merge_two_files_keeps_provenance(tmp_path):
    a = write(tmp_path, "bookworm", results_doc({"numpy": "1.24.2"}, [rec("numpy", "CAP-01", "pass"),
                                                                       rec("numpy", "CAP-02", "fail")]))
    b = write(tmp_path, "box", results_doc({"numpy": "2.4.6"}, [rec("numpy", "CAP-01", "warn")]))
    doc, errors = merge.merge([a, "sid@gpu-box=" + b])
    assert errors == []
    assert doc["schema"] == "dlconform-matrix/1" == merge.SCHEMA
    assert len(doc["results"]) == 3 and len(doc["sources"]) == 2
    s0, s1 = doc["sources"]
    assert s0["tier"] == "bookworm"                     # from the folder name
    assert (s1["tier"], s1["machine"]["name"]) == ("sid", "gpu-box")   # from the label
    for s in (s0, s1):
        assert s["python"]["version"] == "3.11.2" and s["dlpack_header"] == [1, 3]
        assert s["machine"]["arch"] == "x86_64" and s["dlconform"]["git"] == "abc123"
        assert len(s["sha256"]) == 64 and s["file"]
    assert s0["libraries"]["numpy"] == "1.24.2" and s1["libraries"]["numpy"] == "2.4.6"
    ids = {s["id"] for s in doc["sources"]}
    assert all(r["source"] in ids for r in doc["results"])
    assert [r["version"] for r in doc["results"]] == ["1.24.2", "1.24.2", "2.4.6"]
    assert doc["summary"]["fail"] == 1 and doc["conflicts"] == [] and doc["duplicates"] == []


def test_unknown_keys_performance_and_peer_are_kept(tmp_path):
    perf = {"schema": "dlconform-bench/1", "targets": {"numpy": {"ns": 120}}}
    d = results_doc({"numpy": "1.24.2"}, [rec("numpy", "LAY-11", "fail", role="consumer", peer="torch", xyz=1)],
                    performance=perf, future_key={"a": 1})
    doc, errors = merge.merge([write(tmp_path, "host", d)])
    assert not errors
    sid = doc["sources"][0]["id"]
    assert doc["performance"] == {sid: perf} and doc["sources"][0]["performance"] == perf
    assert doc["sources"][0]["extra"] == {"future_key": {"a": 1}}
    r = doc["results"][0]
    assert r["peer"] == "torch" and r["xyz"] == 1
    view = matrix_view.build(doc)
    assert view["interop"][0]["producers"] == ["torch"] and view["interop"][0]["consumers"] == ["numpy 1.24.2"]
    assert view["columns"] == []    # interop records are not conformance cells


def test_conflicts_and_duplicates_are_shown(tmp_path):
    a, b = synthetic.conflicting_pair()
    pa, pb = write(tmp_path, "bookworm", a), write(tmp_path, "host", b)
    doc, errors = merge.merge([pa, pb])
    assert not errors and len(doc["results"]) == 4     # nothing dropped
    assert len(doc["conflicts"]) == 1 and len(doc["duplicates"]) == 1
    c = doc["conflicts"][0]
    assert (c["target"], c["version"], c["clause"], c["test"]) == ("numpy", "1.24.2", "CAP-02",
                                                                   "test_capsule.py::test_rename")
    assert c["verdicts"] == {"pass": ["s0"], "fail": ["s1"]}
    assert doc["duplicates"][0]["clause"] == "CAP-01"
    view = matrix_view.build(doc)
    cell = next(x for x in view["cells"] if view["rows"][x[1]]["clause"] == "CAP-02")
    assert cell[2] == "fail" and cell[6] == 1 and len(cell[5]) == 2   # both sides open from the cell
    md = matrix_md.render(doc, view)
    conflicts = md.split("## Conflicts")[1].split("##")[0]
    assert ("| numpy | 1.24.2 | CAP-02 | test_capsule.py::test_rename | pass: s0 (bookworm); fail: s1 (host) |"
            in conflicts)
    assert "**FAIL** 1/2 ≠" in md
    page = html.render(doc, view)
    assert '"n_conflicts":1' in page


def test_same_source_repeats_are_not_conflicts(tmp_path):
    d = results_doc({"numpy": "1"}, [rec("numpy", "OWN-03", "pass"), rec("numpy", "OWN-03", "crash")])
    doc, _ = merge.merge([write(tmp_path, "host", d)])
    assert doc["conflicts"] == [] and doc["duplicates"] == []


@pytest.mark.parametrize("content, field, words", [
    ("{not json", None, "not JSON"),
    ('["a list"]', None, "expected a JSON object"),
    ('{"results": []}', "schema", "missing"),
    ('{"schema": "other-tool/3", "results": []}', "schema", "'other-tool/3' is not a dlconform results file"),
    ('{"schema": "dlconform-matrix/2"}', "schema", "is not a dlconform results file"),
    ('{"schema": "dlconform-results/1", "environment": {}, "targets": {}}', "results", "missing"),
    ('{"schema": "dlconform-results/1", "results": {}}', "results", "expected a list"),
    ('{"schema": "dlconform-results/1", "environment": [], "results": []}', "environment", "expected an object"),
    ('{"schema": "dlconform-results/1", "results": [{"target": "numpy", "clause": "CAP-01", "verdict": "pass"},'
     ' {"target": "numpy", "clause": "CAP-02", "verdict": "great"}]}', "results[1].verdict", "unknown verdict 'great'"),
    ('{"schema": "dlconform-results/1", "results": [{"target": "numpy", "verdict": "pass"}]}',
     "results[0].clause", "missing"),
    ('{"schema": "dlconform-results/1", "results": [{"target": 3, "clause": "C", "verdict": "pass"}]}',
     "results[0].target", "expected a string"),
    ('{"schema": "dlconform-results/1", "results": [{"target": "t", "clause": "C", "verdict": "pass", "message": 5}]}',
     "results[0].message", "expected a string"),
    ('{"schema": "dlconform-run-failure/1", "stage": "build"}', "tier", "missing"),
])
def test_malformed_file_is_rejected_with_file_and_field(tmp_path, capsys, content, field, words):
    good = write(tmp_path, "bookworm", results_doc({"numpy": "1"}, [rec("numpy", "CAP-01", "pass")]))
    bad = write(tmp_path, "bad", content)
    out = tmp_path / "out"
    rc = cli.main(["merge", good, bad, "--out", str(out), "-q"])
    assert rc == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1                                   # one line per rejected file
    assert err[0].startswith("dlconform merge: error: %s: " % bad) and words in err[0]
    if field:
        assert "field '%s'" % field in err[0]
    doc = json.loads((out / "matrix.json").read_text())   # the good file is still merged
    assert len(doc["sources"]) == 1 and len(doc["results"]) == 1
    assert doc["errors"] == [{"file": bad, "field": field, "message": doc["errors"][0]["message"]}]
    assert words in doc["errors"][0]["message"]
    assert bad in (out / "MATRIX.md").read_text()


def test_missing_file_and_nothing_mergeable(tmp_path, capsys):
    rc = cli.main(["merge", str(tmp_path / "nope.json"), "--out", str(tmp_path / "out")])
    assert rc == 1
    err = capsys.readouterr().err
    assert "nope.json: cannot read" in err and "no input could be merged" in err
    assert not (tmp_path / "out").exists()


def test_merge_requires_out(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["merge", "x.json"])
    assert e.value.code == 2


def test_schema_is_versioned_and_a_matrix_merges_again(tmp_path):
    _, _, paths = matrix_fixture.build(tmp_path)
    first = json.loads(open(paths["json"]).read())
    assert first["schema"] == "dlconform-matrix/1"
    extra = write(tmp_path, "late", results_doc({"numpy": "9.9"}, [rec("numpy", "CAP-01", "fail")]))
    doc, errors = merge.merge([paths["json"], "sid@ci-gpu=" + extra])
    assert not errors
    assert len(doc["sources"]) == len(first["sources"]) + 1
    assert len(doc["results"]) == len(first["results"]) + 1
    assert len(doc["failures"]) == len(first["failures"]) == 1
    assert doc["errors"] == first["errors"]            # earlier rejections stay visible
    for old, new in zip(first["sources"], doc["sources"]):
        assert (old["tier"], old["machine"], old.get("python"), old.get("sha256")) == \
               (new["tier"], new["machine"], new.get("python"), new.get("sha256"))
        assert new["merged_from"] == paths["json"]
    assert len(doc["conflicts"]) == len(first["conflicts"])


# ---------------------------------------------------------------- views
@pytest.fixture(scope="module")
def fixture_matrix(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mx")
    doc, errors, paths = matrix_fixture.build(tmp)
    return doc, paths


def test_html_is_self_contained(fixture_matrix):
    doc, paths = fixture_matrix
    page = open(paths["html"], encoding="utf-8").read()
    # nothing the browser would fetch: no src/href to a URL, no fetch/XHR, no CSS import or url()
    assert not re.search(r"""\b(?:src|href|action|poster|data)\s*=\s*["']?\s*(?:https?:)?//""", page, re.I)
    assert not re.search(r"""\b(?:src|href)\s*=\s*["']?\s*https?://""", page, re.I)
    assert "fetch(" not in page and "XMLHttpRequest" not in page and "@import" not in page
    assert not re.search(r"url\(\s*['\"]?(?:https?:)?//", page)
    assert "<link" not in page and "<script src" not in page and "<img" not in page
    assert "Content-Security-Policy" in page and "default-src 'none'" in page
    assert page.count("<script") == 2                      # the data and the code, both inline


def test_html_data_cannot_break_out_of_its_script(tmp_path):
    evil = '</script><script src="http://evil.example/x.js"></script><!--'
    d = results_doc({"numpy": "1"}, [rec("numpy", "CAP-01", "fail", message=evil, repro=evil)])
    doc, _ = merge.merge([write(tmp_path, "host", d)])
    page = html.render(doc)
    assert "evil.example" in page and evil not in page
    assert not re.search(r"""src\s*=\s*["']?https?://""", page)
    data = page.split('<script type="application/json" id="data">')[1].split("</script>")[0]
    view = json.loads(data)
    assert evil in view["strings"]


def test_markdown_render(fixture_matrix):
    doc, paths = fixture_matrix
    md = open(paths["markdown"], encoding="utf-8").read()
    assert md.startswith("# DLPack compatibility matrix")
    assert "schema `dlconform-matrix/1`" in md
    sections = ("## Headline", "## numpy", "### Findings: numpy", "### Clauses: numpy",
                "## Interop: producer × consumer", "## Version history", "## Conflicts", "## Runs and provenance",
                "### Failed runs", "### Rejected inputs")
    at = [md.index(x) for x in sections]
    assert at == sorted(at)                                    # the headline first, provenance last
    head = md.split("## Headline")[1].split("\n## ")[0]
    assert "| [numpy](#lib-numpy) | [2.4.6](#numpy-2.4.6) | sid |" in head
    lib = md.split("\n## numpy\n")[1].split("\n## ")[0]
    clauses = lib.split("### Clauses: numpy")[1]
    header = [ln for ln in clauses.splitlines() if ln.startswith("| clause | level |")][0]
    assert "numpy 1.24.2 (bookworm, host)" in header and "numpy 2.4.6 (sid)" in header
    assert "| CAP-01 | MUST |" in clauses and "| API-04 | SHOULD |" in clauses
    link = re.search(r"\[\*\*FAIL\*\*[^]]*\]\(#(numpy-[0-9.]+-(?:producer|consumer)-[A-Z]+-\d+)\)", clauses)
    assert link                                                 # a failing cell links to its finding
    finding = lib.split('<a id="%s"></a>' % link.group(1))[1].split("\n#### ")[1].split("<a id=")[0]
    assert "**FAIL**" in finding and "> " in finding
    assert "[Reproducers](index.html#%s)" % link.group(1) in finding  # one click to the snippets
    findings = lib.split("### Findings: numpy")[1].split("### Clauses")[0]
    assert "unsup" not in findings and "#### " in findings       # unsupported and skip are folded
    assert re.search(r"^- \d+ clauses not offered: ", lib, re.M)
    hist = md.split("## Version history")[1].split("\n## ")[0]
    assert "### numpy" in hist and ("↓" in hist or "↑" in hist)
    assert "sid** (gpu-box) failed at build" in md
    interop = md.split("## Interop: producer × consumer")[1].split("\n## ")[0]
    assert "### bookworm" in interop and "| producer \\ consumer |" in interop
    assert re.search(r"\| \[?\d+ (fail|crash|timeout|warn) / \d+", interop)      # failures over checked


def test_findings_and_headline(tmp_path):
    recs = [rec("numpy", "CAP-01", "pass"), rec("numpy", "CAP-02", "fail"), rec("numpy", "CAP-03", "unsupported"),
            rec("numpy", "CAP-04", "skip"), rec("numpy", "CAP-05", "crash", role="consumer"),
            rec("numpy", "CAP-05", "pass", role="consumer", test="t2"), rec("numpy", "API-04", "warn", level="SHOULD"),
            rec("numpy", "VER-01", "unsupported"), rec("numpy", "VER-01", "pass", role="consumer")]
    doc, _ = merge.merge([write(tmp_path, "sid", results_doc({"numpy": "2.4.6"}, recs))])
    view = matrix_view.build(doc)
    (head,) = view["headlines"]
    assert head["anchor"] == "numpy-2.4.6"
    assert head["must"] == {"producer": [1, 2], "consumer": [1, 2]}     # CAP-01, CAP-02; CAP-05, VER-01
    assert head["robustness"] is None                                     # no record carries `input`
    assert head["counts"] == {"fail": 1, "crash": 1, "warn": 1}
    anchors = {f["anchor"] for f in view["findings"]}
    assert anchors == {"numpy-2.4.6-producer-CAP-02", "numpy-2.4.6-consumer-CAP-05", "numpy-2.4.6-producer-API-04"}
    assert head["not_offered"] == {"CAP": ["CAP-03"]}                    # VER-01 is tested as a consumer
    assert head["not_testable"] == {"CAP": ["CAP-04"]}
    assert view["cell_anchors"][0].startswith("numpy-2.4.6-")


def test_robustness_counts_crashes_on_invalid_input(tmp_path):
    recs = [rec("numpy", "LAY-09", "crash", role="consumer", input="invalid"),
            rec("numpy", "LAY-10", "crash", role="consumer", input="argument", test="t2"),
            rec("numpy", "LAY-11", "crash", role="consumer", test="t3"),
            rec("numpy", "LAY-03", "pass", role="consumer", input="valid")]
    doc, _ = merge.merge([write(tmp_path, "sid", results_doc({"numpy": "2.4.6"}, recs)),
                          write(tmp_path, "trixie",
                                results_doc({"numpy": "2.2.4"}, [rec("numpy", "LAY-03", "crash")]))])
    view = matrix_view.build(doc)
    by_version = {view["columns"][h["col"]]["version"]: h["robustness"] for h in view["headlines"]}
    # graded (the library carries `input`); a valid-input crash is not counted
    assert by_version == {"2.4.6": 2, "2.2.4": 0}
    md = matrix_md.render(doc, view)
    assert "robustness: 2 crashes" in md and "robustness: 0 crashes" in md


def test_anchors_last_across_renders(tmp_path):
    a = write(tmp_path, "sid", results_doc({"numpy": "2.4.6"}, [rec("numpy", "LAY-09", "crash", role="consumer")]))
    b = write(tmp_path, "trixie", results_doc({"torch": "2.14.1+debian"}, [rec("torch", "CAP-02", "fail")]))
    mds = []
    for args in ([a, b], [b, a]):
        doc, _ = merge.merge(args)
        mds.append(matrix_md.render(doc, matrix_view.build(doc)))
    for md in mds:
        assert '<a id="numpy-2.4.6-consumer-LAY-09"></a>' in md and "(#numpy-2.4.6-consumer-LAY-09)" in md
        assert '<a id="torch-2.14.1-debian-producer-CAP-02"></a>' in md
        assert "cell-" not in md


def test_fold_lines_join_runs_of_clauses():
    assert matrix_findings.compact(["XAPI-01", "XAPI-02", "XAPI-03", "XAPI-05", "DT-05", "DT-06", "*"]) == \
        ["XAPI-01–03", "XAPI-05", "DT-05", "DT-06", "*"]


@pytest.mark.parametrize("older, newer", [
    ("1.13.0a0", "1.13.0"), ("2.0.0rc1", "2.0.0"), ("2.0.dev1", "2.0.0a1"), ("2.14.1", "2.14.1+debian"),
    ("1.24.2", "2.2.4"), ("2.2.4", "2.10.0"), ("1:2.4-1", "0.1"),   # not PEP 440: before every PEP 440 label
    ("1.0-x", "1.0-y"),                                              # both not PEP 440: the legacy order
])
def test_version_order(older, newer):
    assert matrix_view.version_key(older) < matrix_view.version_key(newer)
    assert sorted([newer, older], key=matrix_view.version_key) == [older, newer]


def test_version_history_follows_pep440(tmp_path):
    """Debian's torch 1.13.0a0 is older than a 1.13.0 build: a fix is a fix, not a regression."""
    old = write(tmp_path, "bookworm", results_doc({"torch": "1.13.0a0"}, [rec("torch", "CAP-01", "fail")]))
    new = write(tmp_path, "host", results_doc({"torch": "1.13.0"}, [rec("torch", "CAP-01", "pass")]))
    doc, _ = merge.merge([new, old])
    h = matrix_view.build(doc)["history"][0]
    assert (h["regressions"], h["fixes"]) == (0, 1)


def test_committed_matrix_findings_fit_in_100_kb():
    """MATRIX.md's findings (every library's Findings section and the interop findings),
    rendered from the committed matrix.json, stay under 100 KB."""
    doc, errors = merge.merge([os.path.join(REPO_DIR, "reports", "matrix", "matrix.json")])
    assert not errors
    md = matrix_md.render(doc, matrix_view.build(doc, upstream.matcher(upstream.load())))
    blocks = re.findall(r"\n### (?:Findings: |Interop findings).*?(?=\n### |\n## )", md, re.S)
    assert len(blocks) >= 5
    assert sum(len(b.encode("utf-8")) for b in blocks) < 100 * 1024


def test_markdown_of_empty_matrix(tmp_path):
    doc, _ = merge.merge([write(tmp_path, "host", results_doc({}, []))])
    md = matrix_md.render(doc, matrix_view.build(doc))
    assert "No conformance results." in md and "No interop results" in md and "Every result passed." in md


def test_version_history_marks_regressions_and_fixes(tmp_path):
    old = write(tmp_path, "bookworm", results_doc({"numpy": "1.24.2"}, [rec("numpy", "CAP-01", "pass"),
                                                                         rec("numpy", "CAP-02", "fail")]))
    new = write(tmp_path, "sid", results_doc({"numpy": "2.4.6"}, [rec("numpy", "CAP-01", "crash"),
                                                                   rec("numpy", "CAP-02", "pass")]))
    mid = write(tmp_path, "trixie", results_doc({"numpy": "2.2.4"}, [rec("numpy", "CAP-01", "pass"),
                                                                      rec("numpy", "CAP-02", "fail")]))
    doc, _ = merge.merge([new, old, mid])
    view = matrix_view.build(doc)
    h = view["history"][0]
    assert [view["columns"][c]["version"] for c in h["columns"]] == ["1.24.2", "2.2.4", "2.4.6"]
    rows = {view["rows"][r["row"]]["clause"]: r["changes"] for r in h["rows"]}
    assert rows == {"CAP-01": ["", "", "regressed"], "CAP-02": ["", "", "fixed"]}
    assert (h["regressions"], h["fixes"]) == (1, 1)


def test_publish_merges_runs_with_their_provenance_and_failures(tmp_path):
    runs, out = tmp_path / "runs", tmp_path / "out"
    p = write(runs, "bookworm", results_doc({"numpy": "1.24.2"}, [rec("numpy", "CAP-01", "pass")]))
    with open(os.path.join(os.path.dirname(p), merge.SIDECAR), "w") as f:
        json.dump({"tier": "bookworm", "machine": "builder", "header": "host-fetched 1.3",
                   "debian_packages": {"python3-numpy": "1:1.24.2-1"}}, f)
    (runs / "sid").mkdir()
    (runs / "sid" / "failure.json").write_text(json.dumps({
        "schema": merge.FAILURE_SCHEMA, "tier": "sid", "stage": "build", "exit_status": 1,
        "message": "mmdebstrap failed", "log": "E: no network"}))
    assert matrix_run.main(["--publish", "--runs", str(runs), "--out", str(out)]) == 0
    doc = json.loads((out / "matrix.json").read_text())
    s = {x["tier"]: x for x in doc["sources"]}
    assert s["bookworm"]["machine"]["name"] == "builder"
    assert s["bookworm"]["tier_info"]["header"] == "host-fetched 1.3"
    assert s["sid"]["status"] == "failed" and doc["failures"][0]["stage"] == "build"
    assert "mmdebstrap failed" in (out / "MATRIX.md").read_text()
    # with no runs left, publish re-renders the published matrix.json
    for d in ("bookworm", "sid"):
        for f in (runs / d).iterdir():
            f.unlink()
        (runs / d).rmdir()
    assert matrix_run.main(["--publish", "--runs", str(runs), "--out", str(out)]) == 0
    again = json.loads((out / "matrix.json").read_text())
    assert len(again["sources"]) == 2 and again["failures"][0]["tier"] == "sid"


def test_make_matrix_records_a_failed_tier_and_publishes_the_others(tmp_path, monkeypatch):
    """matrix_run with a stand-in tier.sh: bookworm runs, sid fails to build."""
    fake_results = write(tmp_path, "src", results_doc({"numpy": "1.24.2"}, [rec("numpy", "CAP-01", "fail")]))
    fake = tmp_path / "tier.sh"
    fake.write_text("""#!/bin/sh
case $1 in
  check) [ "$2" = bookworm ] && exit 0; echo "tier $2: no stamp" >&2; exit 1 ;;
  conformance)
    if [ "$2" = sid ]; then echo "tier sid: building into /x from http://deb.debian.org/debian"
      echo "tier sid: mmdebstrap failed; /x is left without a stamp and will be rebuilt next time" >&2; exit 1; fi
    mkdir -p "$OUT/$2" && cp "$FAKE_RESULTS" "$OUT/$2/results.json" && echo 1 > "$OUT/$2/exit-status"; exit 1 ;;
esac
exit 2
""")
    monkeypatch.setattr(matrix_run, "TIER_SH", str(fake))
    monkeypatch.setattr(matrix_run, "source_revision", lambda: ("v0.2-3-gabcdef123456", False))
    monkeypatch.setenv("FAKE_RESULTS", fake_results)
    runs, out = tmp_path / "runs", tmp_path / "out"
    (runs / "trixie").mkdir(parents=True)          # a run of a tier not asked for this time: dropped
    rc = matrix_run.main(["--tiers", "bookworm sid", "--no-host", "--jobs", "2", "--runs", str(runs),
                          "--out", str(out), "--machine", "ci-7", "--tier-dir", str(tmp_path / "tiers")])
    assert rc == 1                                  # a tier failed, but the matrix was written
    assert not (runs / "trixie").exists()
    doc = json.loads((out / "matrix.json").read_text())
    by_tier = {s["tier"]: s for s in doc["sources"]}
    assert set(by_tier) == {"bookworm", "sid"}
    assert by_tier["bookworm"]["status"] == "ok" and by_tier["bookworm"]["machine"]["name"] == "ci-7"
    assert by_tier["bookworm"]["tier_info"]["exit_status"] == 1 and "host_git" in by_tier["bookworm"]["tier_info"]
    f = doc["failures"][0]
    assert (f["tier"], f["stage"], f["exit_status"], f["machine"]) == ("sid", "build", 1, "ci-7")
    assert "mmdebstrap failed" in f["message"] and "building into" in f["log"]
    assert by_tier["bookworm"]["tier_info"]["revision"] == "v0.2-3-gabcdef123456"
    md = (out / "MATRIX.md").read_text()
    assert "**sid** (ci-7) failed at build" in md and "numpy 1.24.2 (bookworm)" in md
    assert "| v0.2-3-gabcdef123456 |" in md                     # the runs table shows the clean revision
    assert "mmdebstrap failed" in (out / "index.html").read_text()


def test_make_matrix_refuses_a_tree_with_changes(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(matrix_run, "source_revision", lambda: ("v0.2-3-gabcdef123456", True))
    monkeypatch.setattr(matrix_run, "run_one", lambda *a: pytest.fail("a dirty tree must not run"))
    rc = matrix_run.main(["--tiers", "", "--no-host", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    assert rc == 2 and "ALLOW_DIRTY=1" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_source_revision_of_this_checkout():
    revision, dirty = matrix_run.source_revision()
    assert revision and isinstance(dirty, bool)
    assert matrix_run.source_revision(os.path.dirname(REPO_DIR.rstrip("/")) + "/no-such-dir") == (None, False)


def test_matrix_json_has_one_record_per_line():
    """matrix.json is reviewable as a diff: one result record per line, and it reads back as written."""
    doc = {"schema": merge.SCHEMA, "sources": [{"id": "s0"}],
           "results": [{"target": "ref", "clause": "CAP-01", "verdict": "pass", "source": "s0"},
                       {"target": "ref", "clause": "CAP-02", "verdict": "fail", "source": "s0", "message": "a\nb"}]}
    text = merge.dumps(doc)
    assert json.loads(text) == doc
    lines = text.splitlines()
    first = lines.index(' "results": [') + 1
    assert [json.loads(line.rstrip(",")) for line in lines[first:first + 2]] == doc["results"]
    assert lines[first + 2:] == [" ]", "}"]
    assert json.loads(merge.dumps({"results": []})) == {"results": []}


# ---------------------------------------------------------------- upstream context
def test_every_upstream_entry_matches_a_committed_finding_or_is_fixed():
    """reports/upstream.json stays true to the committed matrix: each entry names at least one
    finding of it, unless it is marked fixed."""
    entries = upstream.load()
    assert entries
    doc, _ = merge.merge([os.path.join(REPO_DIR, "reports", "matrix", "matrix.json")])
    view = matrix_view.build(doc, upstream.matcher(entries))
    matched = {u["ref"] for f in view["findings"] + view["interop_findings"] for u in f["upstream"]}
    for e in entries:
        assert e["upstream"] in matched or e["state"].startswith("fixed"), e


def test_upstream_context_is_shown(tmp_path):
    d = results_doc({"numpy": "2.2.4"}, [rec("numpy", "DEV-05", "fail", message="dl_device=(7, 0) raised ValueError")])
    doc, _ = merge.merge([write(tmp_path, "trixie", d)])
    entries = upstream.validate({"schema": upstream.SCHEMA, "entries": [
        {"library": "numpy", "clause": "DEV-05", "pattern": "raised ValueError", "versions": "<2.4",
         "upstream": "numpy/numpy#1", "state": "fixed in 2.4", "summary": "s"},
        {"library": "numpy", "clause": "DEV-05", "pattern": "raised ValueError", "versions": ">=2.4",
         "upstream": "numpy/numpy#2", "state": "open", "summary": "out of range"},
        {"library": "numpy", "clause": "DEV-05", "pattern": "TypeError", "versions": "",
         "upstream": "numpy/numpy#3", "state": "open", "summary": "another message"}]})
    view = matrix_view.build(doc, upstream.matcher(entries))
    assert [u["ref"] for u in view["findings"][0]["upstream"]] == ["numpy/numpy#1"]
    md = matrix_md.render(doc, view)
    assert "fixed in 2.4 upstream (numpy/numpy#1)" in md
    assert upstream.in_range("1.13.0a0", "<1.14") and upstream.in_range("2.6.0+debian", "<2.14")
    assert not upstream.in_range("1.13.0a0", "<1.13")        # PEP 440: <V excludes pre-releases of V
    assert not upstream.in_range("not-a-version", "<2")


@pytest.mark.parametrize("entry, field", [
    ({"upstream": "numpy#1"}, "upstream"), ({"state": "wontfix"}, "state"), ({"pattern": "("}, "pattern"),
    ({"versions": "<<2"}, "versions"), ({"summary": None}, "summary"),
])
def test_malformed_upstream_entry_is_rejected(entry, field):
    good = {"library": "numpy", "clause": "DEV-05", "pattern": "x", "versions": "", "upstream": "numpy/numpy#1",
            "state": "open", "summary": "s"}
    with pytest.raises(upstream.UpstreamError, match=r"entries\[0\]\.%s" % field):
        upstream.validate({"schema": upstream.SCHEMA, "entries": [dict(good, **entry)]})


def test_a_device_variant_is_labelled_with_its_library_version():
    """torch@cuda's column is torch's version (the device is in the target's name), not every
    entry of its versions joined; a target without its library's entry keeps them all."""
    label = merge._version_label
    assert label({"torch": "2.11.0+cu130", "torch cuda": "13.0 on NVIDIA H200"}, "torch@cuda", {}) == "2.11.0+cu130"
    assert label({"jax": "0.11.2", "jax_enable_x64": "False"}, "jax@cuda:fault=x", {}) == "0.11.2"
    assert label({"a": "1", "b": "2"}, "lib@cuda", {}) == "a 1, b 2"


def test_device_is_a_dimension_of_the_columns(fixture_matrix):
    """A NAME@DEVICE target, or records naming a device, make a column of that device; the page
    lists the devices for its filter, cpu first."""
    from dlconform.report import matrix_view

    doc, paths = fixture_matrix
    view = matrix_view.build(doc)
    assert view["devices"] == ["cpu", "cuda"]
    by_lib = {c["lib"]: c["device"] for c in view["columns"]}
    assert by_lib["torch@cuda"] == "cuda" and by_lib["torch"] == by_lib["numpy"] == by_lib["ref"] == "cpu"
    assert matrix_view.device_kind("mymod:Lib", "cuda:1") == "cuda"           # a generic target's records
    assert matrix_view.device_kind("/x/a@b/lib.py:attr") == "cpu"              # an @ in a path is no device
    assert matrix_view.device_kind("pyref@cuda:fault=cuda_no_wait") == "cuda"
    assert 'id="f-device"' in open(paths["html"], encoding="utf-8").read()


def test_one_library_version_is_one_row_whatever_the_run(tmp_path):
    """A library's version reads the same from the run that tested it (its adapter says
    torch.__version__, '1.13.0a0') and from runs where it was only a peer (the environment's
    '1.13.0a0+gitunknown'); ref's from a run without ref is dlconform's own: one row each. A device
    column's label carries no machine-local path (the runtime's path stays in the Runs table)."""
    env_libs = {"numpy": "1.24.2", "torch": "1.13.0a0+gitunknown"}
    a = results_doc({"numpy": "1.24.2"}, [rec("numpy", "INT-01", "pass", peer="torch", role="producer"),
                                          rec("numpy", "INT-01", "pass", peer="ref", role="consumer")])
    a["environment"]["libraries"] = dict(env_libs)
    b = results_doc({"torch": "1.13.0a0"}, [rec("torch", "INT-01", "pass", peer="ref", role="producer"),
                                            rec("torch", "INT-01", "pass", peer="numpy", role="consumer")])
    b["environment"]["libraries"] = dict(env_libs)
    sim = "/tmp/somewhere/build/cuda/sim/libcudart.so (simulated)"
    c = results_doc({}, [rec("ref@cuda", "INT-02", "pass", peer="ref@cuda", role="consumer")])
    c["targets"]["ref@cuda"] = {"status": "ran", "reason": "", "roles": ["consumer", "producer"],
                                "versions": {"dlconform._ref": "0.1.0", "cuda runtime": sim}}
    c["environment"]["libraries"] = dict(env_libs)
    doc, errors = merge.merge(["host@laptop=" + write(tmp_path, "a", a), "host@laptop=" + write(tmp_path, "b", b),
                               "host@sim=" + write(tmp_path, "c", c)])
    assert errors == []
    view = matrix_view.build(doc)
    (t,) = view["interop"]
    labels = t["producers"] + t["consumers"]
    assert sorted(set(labels)) == ["numpy 1.24.2", "ref 0.1.0", "ref@cuda 0.1.0", "torch 1.13.0a0+gitunknown"]
    md = matrix_md.render(doc, view)
    runs = md.split("## Runs and provenance")[1]
    assert "torch 1.13.0a0+gitunknown" in runs and "torch 1.13.0a0," not in runs and "torch 1.13.0a0 " not in runs
    assert "/tmp/somewhere" not in md.split("## Runs and provenance")[0]
    assert sim in runs                                  # the run's details keep where its runtime was
