"""MATRIX.md: the merged matrix (dlconform-matrix/1) as Markdown, read from the top.

Sections: the headline (one row per library version: MUST clauses passed of those checked per
role, robustness, findings by verdict); one section per library: its findings (fail, crash,
timeout, warn: message, upstream context, reproducer), the clauses folded away (not offered,
not testable here) and its full clause list; interop per tier (failures over checked) and its
findings; version history; conflicts; runs and their provenance. Anchors are built from names
(matrix_findings.slug), so links into the page last across renders.
"""
import re

from . import matrix_findings
from .markdown import _cell, _code
from .matrix_view import GROUP_TITLES

SHORT = {"pass": "pass", "warn": "warn", "unsupported": "unsup", "skip": "skip",
         "fail": "**FAIL**", "timeout": "**TIMEOUT**", "crash": "**CRASH**"}
#: a message's length in MATRIX.md; index.html and matrix.json keep it whole
MESSAGE_CHARS = 240
#: the checks a finding's folded warnings line names (the rest are counted)
WARN_CHECKS = 6
_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
#: worst first: the order of counts and findings
ORDER = ("crash", "timeout", "fail", "warn")


def _order(verdict):
    return ORDER.index(verdict) if verdict in ORDER else -1


def _anchor(name):
    return '<a id="%s"></a>' % name


def _col_title(col):
    return "%s %s (%s)" % (col["lib"], col["version"], ", ".join(t or "?" for t in col["tiers"]))


def _cell_text(view, k, link=True):
    """A conformance cell: the worst verdict, n/m when n of its m results did not pass."""
    cell = view["cells"][k]
    text = SHORT.get(cell[2], cell[2])
    if cell[3] > 1 and cell[2] != "pass":
        text += " %d/%d" % (cell[3] - cell[4], cell[3])
    if cell[6]:
        text += " ≠"
    anchor = view["finding_of_cell"].get(k)
    return "[%s](#%s)" % (text, anchor) if link and anchor else text


def _interop_text(view, k):
    """An interop cell: failures over checked ("2 fail / 40"), warns when nothing fails."""
    cell = view["cells"][k]
    checked, breaches, warns = cell[8], cell[9], cell[10]
    if not checked:
        text = SHORT.get(cell[2], cell[2])
    elif breaches:
        text = "%d %s / %d" % (breaches, SHORT[cell[2]].strip("*").lower(), checked)
    elif warns:
        text = "%d warn / %d" % (warns, checked)
    else:
        text = "0 fail / %d" % checked
    anchor = view["finding_of_cell"].get(k)
    return "[%s](#%s)" % (text, anchor) if anchor else text


def _counts(head, link):
    parts = ["%d %s" % (head["counts"][v], v) for v in sorted(head["counts"], key=_order)]
    if not parts:
        return "none"
    return "[%s](#%s)" % (", ".join(parts), link) if link else ", ".join(parts)


def _must(head, role):
    passed, checked = head["must"][role]
    return "%d/%d" % (passed, checked) if checked else "–"


def _robustness(head):
    return "not graded" if head["robustness"] is None else "%d crashes" % head["robustness"]


def _upstream_text(ups):
    out = []
    for u in ups:
        if u["state"].startswith("fixed"):
            out.append("%s upstream (%s)" % (u["state"], u["ref"]))
        else:
            out.append("reported upstream: %s (%s)" % (u["ref"], u["state"]))
    return "; ".join(out)


def headline(view):
    lines = ["## Headline", "",
             "Per library version: the MUST clauses passed of those checked, per role; crashes on "
             "invalid input (robustness); the findings. Each links to its section.", "",
             "| library | version | tiers | producer MUST | consumer MUST | robustness | findings |",
             "| --- | --- | --- | ---: | ---: | --- | --- |"]
    cols = view["columns"]
    for lib in view["libraries"]:
        for c in reversed(lib["columns"]):
            head, col = view["headlines"][c], cols[c]
            lines.append("| [%s](#lib-%s) | [%s](#%s) | %s | %s | %s | %s | %s |" % (
                _cell(col["lib"]), matrix_findings.slug(col["lib"]), _cell(col["version"]), head["anchor"],
                _cell(", ".join(t or "?" for t in col["tiers"])), _must(head, "producer"), _must(head, "consumer"),
                _robustness(head),
                _counts(head, "findings-" + matrix_findings.slug(col["lib"]) if head["findings"] else None)))
    lines.append("")
    return lines


def _fold_line(what, fold):
    n = sum(len(ids) for ids in fold.values())
    parts = ["%s (%s)" % (GROUP_TITLES.get(g, g), ", ".join(matrix_findings.compact(ids))) for g, ids in fold.items()]
    return "%d clauses %s: %s." % (n, what, "; ".join(parts))


def _records(view, detail_ids, with_clause, one_version=False):
    """The distinct results of a finding: each defect's message once (fail, crash, timeout,
    error), with the versions and tiers it was seen in, and the warnings folded into one line
    naming their checks. Reproducers and the warnings' messages are in index.html, one click
    from the finding's link, and in matrix.json: inline they made MATRIX.md's findings several
    times 100 KB. `one_version`: the heading names the one version of every record, so a
    record says only where (the tier) it was seen."""
    seen, order = {}, []
    warned, warn_wheres = [], []
    srcs, strings = view["sources"], view["strings"]
    for d in detail_ids:
        src, _, version, clause, test, role, verdict, msg, repro, _, peer = view["details"][d]
        tier = srcs[src]["tier"] if src >= 0 else "?"
        where = tier if one_version else "%s %s" % (version, tier)
        if verdict == "warn":
            name = "`%s`%s%s" % (_cell(test.split("::")[-1], 120), (" " + clause) if with_clause else "",
                                 (" (%s)" % _cell(peer)) if peer else "")
            if name not in warned:
                warned.append(name)
            if where not in warn_wheres:
                warn_wheres.append(where)
            continue
        # messages that differ only in addresses are one message
        key = (verdict, _ADDRESS.sub("0x", strings[msg]), clause, test, role, peer)
        if key not in seen:
            seen[key] = ([], msg)
            order.append(key)
        if where not in seen[key][0]:
            seen[key][0].append(where)
    out = []
    for key in order:
        verdict, _, clause, test, role, peer = key
        wheres, msg = seen[key]
        out.append("- %s `%s`%s%s: %s [%s]" % (SHORT.get(verdict, verdict), _cell(test, 200),
                                               (" " + clause) if with_clause else "",
                                               (" (%s)" % _cell(peer)) if peer else "",
                                               _cell(strings[msg], MESSAGE_CHARS) or "(no message)", ", ".join(wheres)))
    if warned:
        shown = warned[:WARN_CHECKS]
        out.append("- %s in %d check(s): %s%s [%s]" % (SHORT.get("warn", "warn"), len(warned), ", ".join(shown),
                                                       " and %d more" % (len(warned) - len(shown))
                                                       if len(warned) > len(shown) else "", ", ".join(warn_wheres)))
    return out


def _finding(view, anchors, title, verdicts, details, upstream, clause_row=None):
    """One finding heading (with the anchors of every version it covers), the clause text,
    the upstream context and the records."""
    lines = [" ".join(_anchor(a) for a in anchors), "",
             "#### %s: %s" % (_cell(title), "; ".join("%s in %s" % (SHORT.get(v, v), ", ".join(vs)) if vs
                                                       else SHORT.get(v, v)
                                                       for v, vs in verdicts)), ""]
    if clause_row and clause_row["text"]:
        lines += ["> " + _cell(clause_row["text"], 240), ""]
    if upstream:
        lines += [_upstream_text(upstream) + ".", ""]
    one_version = len({v for _, vs in verdicts for v in vs}) == 1
    lines += _records(view, details, clause_row is None, one_version)
    lines += ["", "[Reproducers](index.html#%s)" % anchors[0], ""]
    return lines


def _library_findings(view, lib):
    """The findings of a library, one per role and clause over all its versions, worst first."""
    cols, rows, groups = view["columns"], view["rows"], {}
    for c in reversed(lib["columns"]):
        for i in view["headlines"][c]["findings"]:
            f = view["findings"][i]
            groups.setdefault((f["role"], f["row"]), []).append(f)
    lines = []
    for (role, ri), fs in sorted(groups.items(), key=lambda kv: (min(_order(f["verdict"]) for f in kv[1]), kv[0][1])):
        row = rows[ri]
        by_verdict = {}
        for f in fs:
            by_verdict.setdefault(f["verdict"], []).append(cols[f["col"]]["version"])
        verdicts = sorted(by_verdict.items(), key=lambda kv: _order(kv[0]))
        ups = []
        for f in fs:
            ups += [u for u in f["upstream"] if u not in ups]
        lines += _finding(view, [f["anchor"] for f in fs],
                          "%s %s %s (%s)" % (lib["name"], role, row["clause"], row["level"]),
                          verdicts, [d for f in fs for d in f["details"]], ups, row)
    return lines


def library_section(view, lib):
    cols, rows = view["columns"], view["rows"]
    name = lib["name"]
    lines = ["## %s" % _cell(name), "", _anchor("lib-" + matrix_findings.slug(name)), ""]
    for c in reversed(lib["columns"]):
        head, col = view["headlines"][c], cols[c]
        lines += [_anchor(head["anchor"]), "", "**%s**: MUST clauses passed: producer %s, consumer %s; "
                  "robustness: %s; findings: %s." % (_cell(_col_title(col)), _must(head, "producer"),
                                                     _must(head, "consumer"), _robustness(head),
                                                     _counts(head, None)), ""]
        for what, fold in (("not offered", head["not_offered"]), ("not testable here", head["not_testable"])):
            if fold:
                lines += ["- " + _fold_line(what, fold)]
        lines.append("")
    lines += ["### Findings: %s" % _cell(name), "", _anchor("findings-" + matrix_findings.slug(name)), ""]
    found = _library_findings(view, lib)
    lines += found or ["Every clause checked passed.", ""]
    lines += ["### Clauses: %s" % _cell(name), "",
              "| clause | level | " + " | ".join(_cell(_col_title(cols[c])) for c in lib["columns"]) + " |",
              "| --- | --- | " + " | ".join("---" for _ in lib["columns"]) + " |"]
    at = view["cell_at"]
    for ri, row in enumerate(rows):
        cells = [_cell_text(view, at[(c, ri)]) if (c, ri) in at else "" for c in lib["columns"]]
        if any(cells):
            lines.append("| %s | %s | %s |" % (_cell(row["clause"]), row["level"], " | ".join(cells)))
    lines.append("")
    return lines


def interop_section(view):
    lines = ["## Interop: producer × consumer", "",
             "Rows produce, columns consume. A cell gives the results that failed (fail, crash, timeout) over "
             "those checked (not unsupported or skip), or the warnings when nothing failed.", ""]
    if not view["interop"]:
        return lines + ["No interop results in this data set.", ""]
    for t in view["interop"]:
        lines += ["### %s" % _cell(t["tier"]), "",
                  "| producer \\ consumer | " + " | ".join(_cell(c) for c in t["consumers"]) + " |",
                  "| --- | " + " | ".join("---" for _ in t["consumers"]) + " |"]
        at = {(view["cells"][k][1], view["cells"][k][0]): k for k in t["cells"]}
        for p, plab in enumerate(t["producers"]):
            cells = [_interop_text(view, at[(p, c)]) if (p, c) in at else "" for c in range(len(t["consumers"]))]
            lines.append("| %s | %s |" % (_cell(plab), " | ".join(cells)))
        lines.append("")
    lines += ["### Interop findings", ""]
    if not view["interop_findings"]:
        lines += ["None: every interop result checked passed.", ""]
    tier_of = {k: t for t in view["interop"] for k in t["cells"]}
    for f in sorted(view["interop_findings"], key=lambda f: _order(f["verdict"])):
        cell, t = view["cells"][f["cell"]], tier_of[f["cell"]]
        lines += _finding(view, [f["anchor"]],
                          "interop %s: %s → %s" % (t["tier"], t["producers"][cell[1]], t["consumers"][cell[0]]),
                          [(f["verdict"], [])], f["details"], f["upstream"])
    return lines


def history_section(view):
    cols = view["columns"]
    lines = ["## Version history", "", "Per library, its versions oldest first; only the clauses whose verdict "
             "changes between versions. ↓ regressed, ↑ fixed.", ""]
    for h in view["history"]:
        hc = [cols[c] for c in h["columns"]]
        lines += ["### %s" % _cell(h["lib"]), ""]
        if len(hc) < 2:
            lines += ["One version only (%s); nothing to compare." % _cell(_col_title(hc[0])), ""]
            continue
        lines += ["%d regressions, %d fixes; %d clauses unchanged."
                  % (h["regressions"], h["fixes"], h["unchanged"]), ""]
        if not h["rows"]:
            continue
        lines += ["| clause | level | "
                  + " | ".join(_cell("%s (%s)" % (c["version"], ", ".join(c["tiers"]))) for c in hc) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in hc) + " |"]
        for hr in h["rows"]:
            row = view["rows"][hr["row"]]
            cells = [("↓ " if ch == "regressed" else "↑ " if ch == "fixed" else "")
                     + (_cell_text(view, ref) if ref is not None else "")
                     for ref, ch in zip(hr["cells"], hr["changes"])]
            lines.append("| %s | %s | %s |" % (_cell(row["clause"]), row["level"], " | ".join(cells)))
        lines.append("")
    return lines


def conflicts_section(view):
    srcs = view["sources"]
    lines = ["## Conflicts", ""]
    if not view["conflicts"]:
        return lines + ["No two sources disagree on the same (library version, clause, test). %d results were "
                        "seen identically in more than one source (duplicates)." % view["n_duplicates"], ""]
    lines += ["The same library version, clause and test with different verdicts in different sources.", "",
              "| library | version | clause | test | verdicts |", "| --- | --- | --- | --- | --- |"]
    for c in view["conflicts"]:
        vs = "; ".join("%s: %s" % (verdict, ", ".join("%s (%s)" % (srcs[s]["id"], srcs[s]["tier"]) if s >= 0 else "?"
                                                         for s in ss)) for verdict, ss in c[6].items())
        lines.append("| %s | %s | %s | %s | %s |" % (_cell(c[0] + (" → " + c[5] if c[5] else "")), _cell(c[1]),
                                                     _cell(c[2]), _cell(c[3], 120), _cell(vs)))
    return lines + [""]


def runs_section(view):
    lines = ["## Runs and provenance", "",
             "| source | tier | machine | Python | dlpack header | libraries | dlconform | results | status |",
             "| --- | --- | --- | --- | --- | --- | --- | ---: | --- |"]
    for s in view["sources"]:
        hdr = s["header"] + (" (%s)" % s["header_source"] if s["header_source"] else "")
        status = s["status"]
        if s["status"] != "ok":
            status = "**%s** at %s: %s" % (s["status"], s.get("stage", "?"), s.get("message", ""))
        elif s["exit_status"] is not None:
            status = "ran, exit %s" % s["exit_status"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %d | %s |" % (
            s["id"], _cell(s["tier"]), _cell("%s %s" % (s["machine"], s["arch"])), _cell(s["python"]),
            _cell(hdr), _cell(", ".join("%s %s" % kv for kv in s["libraries"].items())), _cell(s["revision"]),
            s["results"], _cell(status, 400)))
    lines.append("")
    if view["failures"]:
        lines += ["### Failed runs", ""]
        for f in view["failures"]:
            lines.append("- **%s** (%s) failed at %s, exit status %s: %s" % (
                _cell(f["tier"]), _cell(f.get("machine")), _cell(f.get("stage")), f.get("exit_status"),
                _cell(f.get("message"), 400)))
            if f.get("log"):
                lines += ["", "  <details><summary>log tail</summary>", "", _code(f["log"]), "", "  </details>"]
        lines.append("")
    if view["errors"]:
        lines += ["### Rejected inputs", "", "Nothing was merged from these files.", ""]
        for e in view["errors"]:
            lines.append("- `%s`: %s%s" % (_cell(e.get("file")),
                                           ("field `%s`: " % e["field"]) if e.get("field") else "",
                                           _cell(e.get("message"), 400)))
        lines.append("")
    return lines


def render(doc, view):
    v = dict(view)
    v["cell_at"] = {(c[0], c[1]): k for k, c in enumerate(view["cells"][:view["n_matrix_cells"]])}
    # a matrix cell links to its worst finding; an interop cell to its own
    v["finding_of_cell"] = {}
    at = v["cell_at"]
    for f in sorted(view["findings"], key=lambda f: -_order(f["verdict"])):
        v["finding_of_cell"][at[(f["col"], f["row"])]] = f["anchor"]
    for f in view["interop_findings"]:
        v["finding_of_cell"][f["cell"]] = f["anchor"]
    n_ok = sum(1 for s in v["sources"] if s["status"] == "ok")
    lines = ["# DLPack compatibility matrix", "",
             "Generated %s by `dlconform merge` (schema `%s`): %d results from %d runs%s. The data is "
             "`matrix.json`; the interactive page is `index.html`." % (
                 v["generated"], doc.get("schema", "?"), v["n_results"], n_ok,
                 (", %d failed (see Runs)" % (len(v["sources"]) - n_ok)) if len(v["sources"]) > n_ok else ""), "",
             "Verdicts: pass; warn (a SHOULD is broken, or an ambiguity); unsup (the library does not offer the "
             "feature); skip (not testable here); **FAIL** (a MUST is broken); **CRASH**; **TIMEOUT**. `n/m`: n "
             "of the m results in the cell did not pass. ≠: sources disagree (see Conflicts). Run a reproducer "
             "with `PYTHONPATH=harness python3 -c \"$repro\"`.", ""]
    if not v["columns"]:
        lines += ["No conformance results.", ""]
    else:
        lines += headline(v)
    for lib in v["libraries"]:
        lines += library_section(v, lib)
    lines += interop_section(v) + history_section(v) + conflicts_section(v) + runs_section(v)
    if not v["findings"] and not v["interop_findings"]:
        lines += ["Every result passed.", ""]
    return "\n".join(lines)
