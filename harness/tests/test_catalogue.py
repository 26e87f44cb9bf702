"""The clause catalogue's source: suites/clauses.md builds exactly the committed clauses.json,
the builder reads the Markdown strictly, and nothing in the repository reaches outside it."""
import importlib.util
import os
import re
from pathlib import Path

import pytest

from dlconform import catalogue

REPO = Path(__file__).resolve().parents[2]
BUILDER = REPO / "suites" / "tools" / "build_catalogue.py"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_catalogue", BUILDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


builder = load_builder()

HEAD = ["## API: entry points", "", "| ID | level | binds | needs | since | source | requirement |",
        "| --- | --- | --- | --- | --- | --- | --- |"]
ROW = "| API-01 | MUST | producer | cpu | 2023.12 | AO | The rule. |"


def test_clauses_md_builds_the_committed_json():
    committed = (REPO / "suites" / "clauses.json").read_text(encoding="utf-8")
    assert builder.build(str(REPO / "suites" / "clauses.md")) == committed, \
        "suites/clauses.json is stale: run `make catalogue` and commit it"


def test_the_builder_defaults_to_the_markdown_beside_it():
    assert Path(builder.DEFAULT_SOURCE) == REPO / "suites" / "clauses.md"
    assert Path(builder.DEFAULT_OUT) == Path(catalogue.DEFAULT_PATH)


def test_the_committed_catalogue_keeps_its_shape():
    cat = catalogue.Catalogue.load(catalogue.DEFAULT_PATH, missing_ok=False)
    assert len(cat) == 119
    assert cat.groups() == ["API", "SEM", "CAP", "OWN", "VER", "FLG", "DEV", "CPY", "STR", "ERR",
                            "LAY", "DT", "XAPI"]
    assert all(c.text and "|" not in c.text for c in cat)


def test_parse_reads_rows_notes_continuations_and_escaped_bars():
    lines = HEAD + ["| API-02 | SHOULD | both | gpu, partial | v1.0 | PS \\| H13 | A rule. |", "",
                    "- Reading API-02: first half", "  second half.", "- No check API-02: why."]
    [entry] = builder.parse(lines)
    assert list(entry) == ["id", "group", "level", "binds", "since", "source", "needs", "partial",
                           "text", "reading", "no_check"]
    assert entry["source"] == "PS | H13" and entry["needs"] == "gpu" and entry["partial"] is True
    assert entry["reading"] == "first half second half." and entry["no_check"] == "why."


@pytest.mark.parametrize("lines, complaint", [
    ([ROW], "outside"),
    (HEAD + [ROW.replace("MUST", "MUSTN'T")], "level"),
    (HEAD + [ROW.replace("producer", "library")], "binds"),
    (HEAD + [ROW.replace("| cpu |", "| tpu |")], "needs"),
    (HEAD + [ROW.replace("| cpu |", "| cpu, |")], "needs"),
    (HEAD + [ROW.replace("| AO ", "")], "cells"),
    (HEAD + [ROW.replace("API-01", "CAP-01")], "group API"),
    (HEAD + [ROW, ROW], "twice"),
    (HEAD + [ROW, "- Reading API-09: text"], "lacks"),
    (HEAD + [ROW, "- Reading API-01 text"], "note reads"),
    (HEAD + [ROW, "- No check API-01: a", "- No check API-01: b"], "second"),
    (["## API: entry points", "| id | level |"], "header row"),
    (["# nothing here"], "no clauses"),
])
def test_parse_rejects_what_it_cannot_read_fully(lines, complaint):
    with pytest.raises(builder.SourceError, match=complaint):
        builder.parse(lines)


def repository_files():
    """Files of the working tree, less version control and build outputs (.gitignore)."""
    pruned = {".git", "__pycache__", ".hypothesis", ".pytest_cache"}
    generated = {REPO / "build", REPO / "reports" / "out", REPO / "reports" / ".browser"}
    for folder, dirs, files in os.walk(REPO):
        dirs[:] = [d for d in dirs if d not in pruned and Path(folder, d) not in generated]
        for name in files:
            if not name.endswith((".so", ".o")):
                yield Path(folder, name)


def test_nothing_in_the_repository_reaches_outside_it():
    outside = re.compile(rb"(?:\.\.|/work)/shared\b")
    offenders = [str(p.relative_to(REPO)) for p in repository_files() if outside.search(p.read_bytes())]
    assert not offenders, "files that point outside the repository: %s" % offenders
