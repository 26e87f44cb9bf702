"""results.md sections: the producer x consumer interop table and per-clause coverage."""
import os

from ..kit.check import worst


def _cell(text):
    return " ".join(str(text or "").split()).replace("|", "\\|")


def interop_lines(doc):
    """One row per producer (the records' `peer`), one column per consumer (the target):
    the worst verdict of the interop cases and the count of each verdict."""
    recs = [r for r in doc.get("results", []) if r.get("peer")]
    lines = ["## Interop (producer x consumer)", ""]
    if not recs:
        return lines + ["No interop results (suites/test_interop.py did not run).", ""]
    producers = sorted({r["peer"] for r in recs})
    consumers = list(dict.fromkeys(r["target"] for r in recs))
    cells = {}
    for r in recs:
        cells.setdefault((r["peer"], r["target"]), []).append(r["verdict"])
    lines += ["Rows produce, columns consume; each cell: the worst verdict over the cases (layouts x dtypes, "
              "clauses LAY-11 and SEM-01), then the count per verdict.", "",
              "| producer \\ consumer | " + " | ".join(_cell(c) for c in consumers) + " |",
              "| --- | " + " | ".join("---" for _ in consumers) + " |"]
    for p in producers:
        row = []
        for c in consumers:
            vs = cells.get((p, c))
            if not vs:
                row.append("")
                continue
            counts = {}
            for v in vs:
                counts[v] = counts.get(v, 0) + 1
            row.append("%s (%s)" % (worst(vs), ", ".join("%d %s" % (n, v) for v, n in sorted(counts.items()))))
        lines.append("| %s | %s |" % (_cell(p), " | ".join(row)))
    return lines + [""]


def _catalogue(doc):
    from .. import catalogue

    suites = (doc.get("run") or {}).get("suites")
    path = os.path.join(suites, "clauses.json") if suites else None
    try:
        return catalogue.Catalogue.load(path if path and os.path.isfile(path) else None)
    except Exception:  # a report is still written without the catalogue
        return None


def coverage_lines(doc):
    """Every catalogue clause: its level, and the tests that checked it in this run, or the
    catalogue's reason why none can (`no_check`)."""
    cat = _catalogue(doc)
    lines = ["## Coverage per clause", ""]
    if cat is None or not len(cat):
        return lines + ["The clause catalogue could not be read.", ""]
    tests = {}
    for r in doc.get("results", []):
        name = r.get("test", "").split("[")[0]
        if "::" in name:
            tests.setdefault(r["clause"], set()).add(name)
    checked = sum(1 for c in cat.clauses if tests.get(c.id))
    reasons = sum(1 for c in cat.clauses if not tests.get(c.id) and c.get("no_check"))
    lines += ["%d of %d clauses checked in this run, %d cannot be checked here (reason given), %d not run."
              % (checked, len(cat), reasons, len(cat) - checked - reasons), "",
              "| clause | level | needs | checked by |", "| --- | --- | --- | --- |"]
    for c in cat.clauses:
        n = len(tests.get(c.id, ()))
        if n:
            what = "%d test%s" % (n, "" if n == 1 else "s")
        elif c.get("no_check"):
            what = "no check: " + c.get("no_check")
        else:
            what = "not run"
        lines.append("| %s | %s | %s | %s |" % (c.id, c.level, c.needs, _cell(what)))
    return lines + [""]
