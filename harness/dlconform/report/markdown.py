"""results.md: counts per target, the findings first (error, crash, timeout, fail, warn), what
was not checked folded into one line per target, and a per-clause roll-up. Verdicts are spelled
as results.json spells them; a finding's is in bold."""
from ..kit.check import FINDINGS, VERDICTS, rank, worst
from . import coverage_md as _coverage
from . import performance as _performance

_ICON = {v: ("**%s**" % v if v in FINDINGS else v) for v in VERDICTS}


#: a crash on what the check fed the library: robustness on invalid input or an invalid
#: argument, apart from conformance crashes on valid input (suites/README.md, Grading)
_FED = {"invalid": "robustness: invalid input", "argument": "robustness: invalid argument"}


def _verdict(r):
    text = _ICON.get(r["verdict"], r["verdict"])
    if r["verdict"] in ("crash", "timeout", "warn") and r.get("input") in _FED:
        text += " (%s)" % _FED[r["input"]]
    return text + (" (known)" if r.get("known") else "")


def _cell(text, limit=300):
    text = " ".join(str(text or "").split())
    if len(text) > limit:  # cut between words, where there is a space to cut at
        cut = text.rfind(" ", limit // 2, limit + 1)
        text = text[:cut if cut > 0 else limit] + "..."
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _code(text):
    fence = "```"
    while fence in text:
        fence += "`"
    return "%s\n%s\n%s" % (fence, text.rstrip("\n"), fence)


def _not_checked(results):
    """One line per target: how many checks were unsupported or skipped, and the commonest
    reasons."""
    by_target = {}
    for r in results:
        if r.get("verdict") in ("unsupported", "skip"):
            by_target.setdefault(r["target"], []).append(r)
    if not by_target:
        return []
    out = ["## Not checked", "", "Unsupported: the library does not offer what the check needs. Skip: this "
           "environment cannot run it.", ""]
    for target, recs in by_target.items():
        counts = {v: sum(1 for r in recs if r["verdict"] == v) for v in ("unsupported", "skip")}
        reasons = {}
        for r in recs:
            key = _cell(r.get("message"), 120)
            reasons[key] = reasons.get(key, 0) + 1
        top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
        out.append("- %s: %s; most often: %s" % (
            _cell(target), ", ".join("%d %s" % (n, v) for v, n in counts.items() if n),
            "; ".join("%s (%d)" % (m or "no reason given", n) for m, n in top)))
    return out + [""]


def render(doc):
    targets = doc.get("targets", {})
    results = doc.get("results", [])
    summary = doc.get("summary", {})
    env = doc.get("environment", {})
    lines = ["# dlconform results", ""]
    py = env.get("python", {})
    lines.append("Generated %s; Python %s on %s; dlpack header %s; dlconform %s." % (
        doc.get("generated", "?"), py.get("version", "?"), env.get("machine", "?"),
        ".".join(str(x) for x in env.get("dlpack_header") or []) or "?",
        (env.get("dlconform") or {}).get("git") or (env.get("dlconform") or {}).get("version", "?")))
    lines.append("")
    incomplete = (doc.get("run") or {}).get("incomplete")
    if incomplete:
        lines += ["**Incomplete run** (%s)." % incomplete, ""]

    # ---- targets
    lines += ["## Targets", "", "| target | status | versions | " + " | ".join(VERDICTS) + " |",
              "| --- | --- | --- | " + " | ".join("---:" for _ in VERDICTS) + " |"]
    for name, info in targets.items():
        counts = summary.get(name, {})
        versions = ", ".join("%s %s" % kv for kv in (info.get("versions") or {}).items())
        status = info.get("status", "?")
        if info.get("reason"):
            status += ": " + info["reason"]
        lines.append("| %s | %s | %s | %s |" % (_cell(name), _cell(status, 200), _cell(versions),
                                                 " | ".join(str(counts.get(v, 0)) for v in VERDICTS)))
    lines.append("")

    # ---- findings, then what was not checked
    bad = [r for r in results if r.get("verdict") in FINDINGS]
    lines += ["## Findings", ""]
    if not bad:
        lines += ["No finding: every check that could run passed." if incomplete or any(
            r.get("verdict") in ("unsupported", "skip") for r in results) else "Every check passed.", ""]
    else:
        bad.sort(key=lambda r: (-rank(r["verdict"]), r["target"], r["clause"], r["test"]))
        lines += ["| target | clause | level | verdict | test | message |", "| --- | --- | --- | --- | --- | --- |"]
        for r in bad:
            lines.append("| %s | %s | %s | %s | %s | %s |" % (
                _cell(r["target"]), _cell(r["clause"]), _cell(r["level"]), _verdict(r),
                _cell(r["test"], 120), _cell(r["message"])))
        lines.append("")
    lines += _not_checked(results)
    if bad:
        lines += ["### Reproducers", ""]
        for r in bad:
            if not r.get("repro"):
                continue
            lines.append("<details><summary>%s %s %s: %s</summary>" % (
                _cell(r["target"]), _cell(r["clause"]), r["verdict"], _cell(r["test"], 120)))
            lines.append("")
            lines.append(_code(r["repro"]))
            if r.get("evidence"):
                lines += ["", "Evidence (child stderr):", "", _code(r["evidence"])]
            lines += ["", "</details>", ""]

    known = (doc.get("run") or {}).get("known")
    if known:
        n = sum(1 for r in results if r.get("known"))
        lines += ["## Known failures", "",
                  ("1 finding is listed in %s and does not fail the run." % known["file"]) if n == 1 else
                  "%d findings are listed in %s and do not fail the run." % (n, known["file"]), ""]
        if known.get("fixed"):
            lines += ["Fixed: these lines match no finding any more; remove them from the file:", ""]
            lines += ["- `%s`" % line for line in known["fixed"]] + [""]

    # ---- per clause roll-up
    names = list(targets)
    for r in results:
        if r["target"] not in names:
            names.append(r["target"])
    clauses = []
    worst_of = {}
    level_of = {}
    for r in results:
        if r["clause"] not in clauses:
            clauses.append(r["clause"])
        worst_of.setdefault((r["clause"], r["target"]), []).append(r["verdict"])
        level_of[r["clause"]] = r.get("level", "")
    lines += ["## Per clause (worst verdict)", ""]
    if clauses:
        lines += ["| clause | level | " + " | ".join(_cell(n) for n in names) + " |",
                  "| --- | --- | " + " | ".join("---" for _ in names) + " |"]
        for c in sorted(clauses):
            cells = []
            for n in names:
                vs = worst_of.get((c, n))
                cells.append(_ICON.get(worst(vs), worst(vs)) if vs else "")
            lines.append("| %s | %s | %s |" % (_cell(c), _cell(level_of.get(c)), " | ".join(cells)))
    else:
        lines.append("No results.")
    lines.append("")
    lines += _coverage.interop_lines(doc)
    lines += _coverage.coverage_lines(doc)
    lines += _performance.markdown_lines(doc.get("performance"))
    return "\n".join(lines)
