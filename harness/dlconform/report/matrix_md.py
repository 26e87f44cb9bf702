"""MATRIX.md: the merged matrix (dlconform-matrix/1) as Markdown.

Sections: runs and their provenance, rejected inputs and failed tiers, library x clause (grouped
by clause group, level shown), producer x consumer interop per tier, version history per
library, conflicts, and the findings (message and reproducer of every non-pass cell, linked from
the tables).
"""
from .markdown import _cell, _code

SHORT = {"pass": "pass", "warn": "warn", "unsupported": "unsup", "skip": "skip",
         "fail": "**FAIL**", "timeout": "**TIMEOUT**", "crash": "**CRASH**"}


def _col_title(col):
    return "%s %s (%s)" % (col["lib"], col["version"], ", ".join(t or "?" for t in col["tiers"]))


def _cell_text(view, k, link=True):
    cell = view["cells"][k]
    text = SHORT.get(cell[2], cell[2])
    if cell[3] > 1 and cell[2] != "pass":
        text += " %d/%d" % (cell[3] - cell[4], cell[3])
    if cell[6]:
        text += " ≠"
    if link and cell[5]:
        text = "[%s](#cell-%d)" % (text, k)
    return text


def render(doc, view):
    v = view
    lines = ["# DLPack compatibility matrix", ""]
    n_ok = sum(1 for s in v["sources"] if s["status"] == "ok")
    lines.append("Generated %s by `dlconform merge` (schema `%s`): %d results from %d runs%s. "
                 "The data is `matrix.json`; the interactive page is `index.html`." % (
                     v["generated"], doc.get("schema", "?"), v["n_results"], n_ok,
                     (", %d failed" % (len(v["sources"]) - n_ok)) if len(v["sources"]) > n_ok else ""))
    lines += ["", "Verdicts: pass; warn (a SHOULD is broken, or an ambiguity); unsup (the library does not "
              "offer the feature); skip (not testable here); **FAIL** (a MUST is broken); **CRASH**; "
              "**TIMEOUT**. `n/m`: n of the m results in the cell did not pass. ≠: sources disagree "
              "(see Conflicts). Each non-pass cell links to its findings.", ""]
    summary = v["summary"]
    lines.append("Totals: " + ", ".join("%d %s" % (summary.get(x, 0), x) for x in v["verdicts"]) + "; "
                 "%d conflicts, %d duplicates." % (v["n_conflicts"], v["n_duplicates"]))
    lines.append("")

    # ---- runs
    lines += ["## Runs", "", "| source | tier | machine | Python | dlpack header | libraries | dlconform | results | status |",
              "| --- | --- | --- | --- | --- | --- | --- | ---: | --- |"]
    for s in v["sources"]:
        hdr = s["header"] + (" (%s)" % s["header_source"] if s["header_source"] else "")
        status = s["status"]
        if s["status"] != "ok":
            status = "**%s** at %s: %s" % (s["status"], s.get("stage", "?"), s.get("message", ""))
        elif s["exit_status"] is not None:
            status = "ran, exit %s" % s["exit_status"]
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %d | %s |" % (
            s["id"], _cell(s["tier"]), _cell("%s %s" % (s["machine"], s["arch"])), _cell(s["python"]),
            _cell(hdr), _cell(", ".join("%s %s" % kv for kv in s["libraries"].items())), _cell(s["git"][:12] + ("-dirty" if s["git"].endswith("-dirty") else "")),
            s["results"], _cell(status, 400)))
    lines.append("")
    if v["failures"]:
        lines += ["## Failed runs", ""]
        for f in v["failures"]:
            lines.append("- **%s** (%s) failed at %s, exit status %s: %s" % (
                _cell(f["tier"]), _cell(f.get("machine")), _cell(f.get("stage")), f.get("exit_status"),
                _cell(f.get("message"), 400)))
            if f.get("log"):
                lines += ["", "  <details><summary>log tail</summary>", "", _code(f["log"]), "", "  </details>"]
        lines.append("")
    if v["errors"]:
        lines += ["## Rejected inputs", "", "Nothing was merged from these files.", ""]
        for e in v["errors"]:
            lines.append("- `%s`: %s%s" % (_cell(e.get("file")), ("field `%s`: " % e["field"]) if e.get("field") else "",
                                           _cell(e.get("message"), 400)))
        lines.append("")

    # ---- library x clause
    lines += ["## Library × clause", ""]
    cols = v["columns"]
    if not cols:
        lines += ["No conformance results.", ""]
    else:
        lines += ["Columns: library, version (tiers it ran in).", "",
                  "| clause | level | " + " | ".join(_cell(_col_title(c)) for c in cols) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in cols) + " |"]
        at = {(c[0], c[1]): k for k, c in enumerate(v["cells"][:v["n_matrix_cells"]])}
        for g in v["groups"]:
            present = [ri for ri in g["rows"] if any((ci, ri) in at for ci in range(len(cols)))]
            if not present and g["id"] == "*":
                continue
            lines.append("| **%s** %s | | %s |" % (_cell(g["id"]), _cell(g["title"]), " | ".join("" for _ in cols)))
            for ri in g["rows"]:
                row = v["rows"][ri]
                cells = [_cell_text(v, at[(ci, ri)]) if (ci, ri) in at else "" for ci in range(len(cols))]
                lines.append("| %s | %s | %s |" % (_cell(row["clause"]), row["level"], " | ".join(cells)))
        lines.append("")

    # ---- interop
    lines += ["## Interop: producer × consumer", ""]
    if not v["interop"]:
        lines += ["No interop results in this data set.", ""]
    for t in v["interop"]:
        lines += ["### %s" % _cell(t["tier"]), "", "Rows produce, columns consume.", "",
                  "| producer \\ consumer | " + " | ".join(_cell(c) for c in t["consumers"]) + " |",
                  "| --- | " + " | ".join("---" for _ in t["consumers"]) + " |"]
        at = {(v["cells"][k][1], v["cells"][k][0]): k for k in t["cells"]}
        for p, plab in enumerate(t["producers"]):
            cells = [_cell_text(v, at[(p, c)]) if (p, c) in at else "" for c in range(len(t["consumers"]))]
            lines.append("| %s | %s |" % (_cell(plab), " | ".join(cells)))
        lines.append("")

    # ---- history
    lines += ["## Version history", "", "Per library, its versions oldest first; only the clauses whose verdict "
              "changes between versions. ↓ regressed, ↑ fixed.", ""]
    for h in v["history"]:
        hc = [cols[c] for c in h["columns"]]
        lines += ["### %s" % _cell(h["lib"]), ""]
        if len(hc) < 2:
            lines += ["One version only (%s); nothing to compare." % _cell(_col_title(hc[0])), ""]
            continue
        lines.append("%d regressions, %d fixes; %d clauses unchanged." % (h["regressions"], h["fixes"], h["unchanged"]))
        lines.append("")
        if not h["rows"]:
            continue
        lines += ["| clause | level | " + " | ".join(_cell("%s (%s)" % (c["version"], ", ".join(c["tiers"]))) for c in hc) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in hc) + " |"]
        for hr in h["rows"]:
            row = v["rows"][hr["row"]]
            cells = []
            for ref, ch in zip(hr["cells"], hr["changes"]):
                text = _cell_text(v, ref) if ref is not None else ""
                cells.append(("↓ " if ch == "regressed" else "↑ " if ch == "fixed" else "") + text)
            lines.append("| %s | %s | %s |" % (_cell(row["clause"]), row["level"], " | ".join(cells)))
        lines.append("")

    # ---- conflicts
    lines += ["## Conflicts", ""]
    srcs = v["sources"]
    if not v["conflicts"]:
        lines += ["No two sources disagree on the same (library version, clause, test). %d results were "
                  "seen identically in more than one source (duplicates)." % v["n_duplicates"], ""]
    else:
        lines += ["The same library version, clause and test with different verdicts in different sources.", "",
                  "| library | version | clause | test | verdicts |", "| --- | --- | --- | --- | --- |"]
        for c in v["conflicts"]:
            vs = "; ".join("%s: %s" % (verdict, ", ".join("%s (%s)" % (srcs[s]["id"], srcs[s]["tier"]) if s >= 0 else "?"
                                                             for s in ss)) for verdict, ss in c[6].items())
            lines.append("| %s | %s | %s | %s | %s |" % (_cell(c[0] + (" → " + c[5] if c[5] else "")), _cell(c[1]),
                                                         _cell(c[2]), _cell(c[3], 120), _cell(vs)))
        lines.append("")

    # ---- findings
    lines += ["## Findings", "", "Every cell that did not pass, worst first, with the clause text, the messages and "
              "the reproducers (run with `PYTHONPATH=harness python3 -c \"$repro\"`).", ""]
    strings = v["strings"]
    any_finding = False
    interop_of = {k: t for t in v["interop"] for k in t["cells"]}
    order = {x: i for i, x in enumerate(v["verdicts"])}
    findings = sorted((k for k, c in enumerate(v["cells"]) if c[5]),
                      key=lambda k: (-order.get(v["cells"][k][2], 99), k >= v["n_matrix_cells"], k))
    for k in findings:
        cell = v["cells"][k]
        any_finding = True
        if k < v["n_matrix_cells"]:
            col, row = cols[cell[0]], v["rows"][cell[1]]
            title = "%s %s, %s (%s)" % (col["lib"], col["version"], row["clause"], row["level"])
            clause_text = row["text"]
            reading = row.get("reading", "")
        else:
            t = interop_of[k]
            title = "interop %s: %s → %s" % (t["tier"], t["producers"][cell[1]], t["consumers"][cell[0]])
            clause_text, reading = "", ""
        lines += ['<a id="cell-%d"></a>' % k, "", "### %s: %s" % (_cell(title), SHORT.get(cell[2], cell[2])), ""]
        if clause_text:
            lines += ["> " + _cell(clause_text, 2000), ""]
        if reading:
            lines += ["Reading taken: " + _cell(reading, 2000), ""]
        seen = set()
        for d in cell[5]:
            src, target, version, clause, test, role, verdict, msg, repro, evid, peer = v["details"][d]
            key = (verdict, msg, repro, clause, test)
            s = srcs[src] if src >= 0 else {"id": "?", "tier": "?"}
            if key in seen:
                lines.append("- also in %s (%s)" % (s["id"], _cell(s["tier"])))
                continue
            seen.add(key)
            lines.append("- %s `%s`%s%s in %s (%s): %s" % (
                SHORT.get(verdict, verdict), _cell(test, 200), (" " + clause) if k >= v["n_matrix_cells"] else "",
                (" " + role) if role else "", s["id"], _cell(s["tier"]), _cell(strings[msg], 600) or "(no message)"))
            if strings[repro] and verdict not in ("skip", "unsupported", "pass"):
                lines += ["", "  <details><summary>reproducer</summary>", "", _code(strings[repro]), "", "  </details>", ""]
        lines.append("")
    if not any_finding:
        lines += ["Every result passed.", ""]
    return "\n".join(lines)
