"""Builds suites/clauses.json (schema dlconform-clauses/1) from suites/clauses.md, its one source.

The format of clauses.md is described at the top of that file. This builder holds no clause
data: every id, level, reading and no-check reason comes from the Markdown. It rejects a
source it cannot read fully (a stray table row, an unknown level, a bullet for a missing
clause) instead of dropping lines.
Usage: python3 suites/tools/build_catalogue.py [--source clauses.md] [--out clauses.json|-]
"""
import argparse
import json
import os
import re
import sys

SCHEMA = "dlconform-clauses/1"
SUITES = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SOURCE = os.path.join(SUITES, "clauses.md")
DEFAULT_OUT = os.path.join(SUITES, "clauses.json")

COLUMNS = ("ID", "level", "binds", "needs", "since", "source", "requirement")
LEVELS = ("MUST", "SHOULD", "MAY", "INFO")
BINDS = ("producer", "consumer", "both")
NEEDS = ("cpu", "gpu", "info")
#: bullet label -> the JSON field it fills
NOTES = {"Reading": "reading", "Input": "input", "No check": "no_check"}
#: what the checks of a clause with an Input note feed the library (suites/README.md, Grading)
INPUT_KINDS = ("invalid", "argument")

GROUP_HEADING = re.compile(r"## ([A-Z]+): \S")
CLAUSE_ID = re.compile(r"([A-Z]+)-\d\d")
NOTE_BULLET = re.compile(r"- (%s) ([A-Z]+-\d\d): (.+)" % "|".join(NOTES))
SEPARATOR_CELL = re.compile(r":?-{3,}:?")
NOTE_STARTS = tuple("- %s" % label for label in NOTES)


class SourceError(ValueError):
    """clauses.md does not follow its documented format; the message names the line."""


def cells(line, where):
    """The cells of a table row `| a | b |`; `\\|` stands for a literal bar inside a cell."""
    if not (line.startswith("|") and line.endswith("|")) or line.endswith("\\|"):
        raise SourceError("%s: a table row starts and ends with |" % where)
    parts = re.split(r"(?<!\\)\|", line[1:-1])
    return [p.strip().replace("\\|", "|") for p in parts]


def needs_of(value, where):
    """`cpu`, `gpu` or `info`, with `, partial` when only part of the clause is checkable there."""
    needs, comma, partial = value.partition(",")
    if needs not in NEEDS or (comma and partial.strip() != "partial"):
        raise SourceError("%s: needs is one of %s, optionally followed by ', partial'" % (where, NEEDS))
    return needs, bool(comma)


def clause_of(row, group, where):
    if len(row) != len(COLUMNS):
        raise SourceError("%s: %d cells, expected %d (%s)" % (where, len(row), len(COLUMNS), ", ".join(COLUMNS)))
    cid, level, binds, needs, since, source, text = row
    m = CLAUSE_ID.fullmatch(cid)
    if not m or m.group(1) != group:
        raise SourceError("%s: %r is not a clause id of group %s" % (where, cid, group))
    if level not in LEVELS:
        raise SourceError("%s: level %r is not one of %s" % (where, level, LEVELS))
    if binds not in BINDS:
        raise SourceError("%s: binds %r is not one of %s" % (where, binds, BINDS))
    if not (since and source and text):
        raise SourceError("%s: since, source and requirement are required" % where)
    needs, partial = needs_of(needs, where)
    return {"id": cid, "group": group, "level": level, "binds": binds, "since": since,
            "source": source, "needs": needs, "partial": partial, "text": text}


def add_row(line, group, clauses, where):
    """A table line of a group: its header, its separator, or one clause."""
    if group is None:
        raise SourceError("%s: a table row outside a '## GROUP: title' section" % where)
    row = cells(line, where)
    if tuple(row) == COLUMNS or all(SEPARATOR_CELL.fullmatch(c) for c in row):
        return
    if not CLAUSE_ID.fullmatch(row[0]):
        raise SourceError("%s: neither a clause row (ID GROUP-nn) nor the header row | %s |"
                          % (where, " | ".join(COLUMNS)))
    entry = clause_of(row, group, where)
    if entry["id"] in clauses:
        raise SourceError("%s: %s is listed twice" % (where, entry["id"]))
    clauses[entry["id"]] = entry


def add_note(line, group, clauses, where):
    """A `- Reading ID: text` or `- No check ID: text` bullet; returns the (entry, field) it set."""
    bullet = NOTE_BULLET.match(line)
    if not bullet:
        raise SourceError("%s: a note reads '- Reading ID: text' or '- No check ID: text'" % where)
    label, cid, text = bullet.groups()
    entry = clauses.get(cid)
    if entry is None or entry["group"] != group:
        raise SourceError("%s: %s note for %s, which this section's table lacks" % (where, label, cid))
    field = NOTES[label]
    if field in entry:
        raise SourceError("%s: a second %s note for %s" % (where, label, cid))
    entry[field] = text.strip()
    if field == "input" and entry[field].split(":", 1)[0] not in INPUT_KINDS:
        raise SourceError("%s: an Input note reads '- Input ID: invalid|argument: what the checks feed'" % where)
    return entry, field


def parse(lines, name="clauses.md"):
    """The clause entries of the source, in its order, each with the fields in schema order."""
    clauses = {}
    group = None
    note = None  # the (entry, field) that indented continuation lines extend
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip()
        where = "%s:%d" % (name, number)
        if note and raw.startswith("  ") and line:
            note[0][note[1]] += " " + line.strip()
            continue
        note = None
        if line.startswith("#"):
            heading = GROUP_HEADING.match(line)
            group = heading.group(1) if heading else None
        elif line.startswith("|"):
            add_row(line, group, clauses, where)
        elif line.startswith(NOTE_STARTS):
            note = add_note(line, group, clauses, where)
    if not clauses:
        raise SourceError("%s: no clauses found" % name)
    return [order_fields(entry) for entry in clauses.values()]


def order_fields(entry):
    """Schema order: the table's fields, then reading, then no_check (stable rebuild diffs)."""
    return {k: entry[k] for k in ("id", "group", "level", "binds", "since", "source", "needs",
                                  "partial", "text", "reading", "input", "no_check") if k in entry}


def render(clauses):
    """clauses.json's exact text."""
    return json.dumps({"schema": SCHEMA, "clauses": clauses}, indent=1, ensure_ascii=False) + "\n"


def build(source=DEFAULT_SOURCE):
    with open(source, encoding="utf-8") as f:
        return render(parse(f, os.path.basename(source)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", default=DEFAULT_SOURCE, help="the Markdown catalogue (default: %(default)s)")
    ap.add_argument("--out", default=DEFAULT_OUT, help="where to write the JSON, - for stdout (default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        text = build(args.source)
    except SourceError as e:
        sys.exit("build_catalogue: %s" % e)
    if args.out == "-":
        sys.stdout.write(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)


if __name__ == "__main__":
    main()
