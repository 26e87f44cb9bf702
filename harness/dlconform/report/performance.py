"""The Performance section of results.md, from `doc["performance"]` (dlconform-bench/1)."""


def _ns(v):
    if v is None:
        return "-"
    if v >= 10000:
        return "%.1f us" % (v / 1000.0)
    if v >= 100:
        return "%.0f" % v
    return "%.2f" % v if v < 10 else "%.1f" % v


def _cell(text):
    return " ".join(str(text or "").split()).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def markdown_lines(perf):
    """Lines of the section: per target a table of ns, spread, ratio to the no-op baseline,
    the drift of the per-run medians, and ref's bounds."""
    if not perf:
        return []
    m = perf.get("method", {})
    mach = perf.get("machine", {})
    lines = ["## Performance", "",
             "Exchange overhead per tensor, measured by C loops in `_probe` (`python3 -m dlconform bench`): "
             "the median over %s batches of about %s ms each after a warm-up, in %s run(s) of fresh processes; "
             "ns = the median of the per-run medians; spread = (Q3 - Q1) / median of the batches; "
             "ratio = to the no-op baseline (an indirect call of an empty C function) of the same process; "
             "drift = (max - min) / min of the per-run medians, **noisy** above %d %%." % (
                 m.get("batches", "?"), m.get("batch_target_ms", "?"), m.get("repeats", "?"),
                 round(100 * m.get("noisy_threshold", 0.1))),
             "",
             "**%s**" % perf.get("note", ""), "",
             "Machine: %s, %s CPUs; baseline %s ns." % (mach.get("cpu") or mach.get("machine", "?"),
                                                       mach.get("cpus", "?"), _ns(perf.get("baseline_ns"))),
             ""]
    for spec, t in perf.get("targets", {}).items():
        versions = ", ".join("%s %s" % kv for kv in (t.get("versions") or {}).items())
        lines.append("### %s%s" % (_cell(spec), " (%s)" % _cell(versions) if versions else ""))
        lines.append("")
        if t.get("status") != "ran":
            lines += ["%s: %s" % (t.get("status"), _cell(t.get("reason"))), ""]
            continue
        if t.get("reason"):
            lines += [_cell(t["reason"]), ""]
        lines += ["| figure | what | ns | spread | x baseline | drift | |",
                  "| --- | --- | ---: | ---: | ---: | ---: | --- |"]
        for fid, f in t.get("figures", {}).items():
            if f.get("status") != "ok":
                lines.append("| `%s` | %s | - | - | - | - | %s: %s |" % (
                    fid, _cell(f.get("label")), f.get("status"), _cell(f.get("reason"))))
                continue
            lines.append("| `%s` | %s | %s | %.1f %% | %.1f | %.1f %% | %s |" % (
                fid, _cell(f["label"]), _ns(f["ns"]), 100 * f["spread"], f["ratio"], 100 * f["drift"],
                "**noisy**" if f.get("noisy") else ""))
        cache = t.get("cache") or {}
        if cache:
            lines += ["", "Repeated export of the same tensor, two exports alive at once: " + "; ".join(
                "%s %s" % (k, "same struct (cached)" if v else "distinct structs") for k, v in cache.items()) + "."]
        for note in t.get("notes") or []:
            lines += ["", "Note: " + _cell(note)]
        if t.get("bounds"):
            lines += ["", "Bounds of the reference (ratio to the baseline):", ""]
            for fid, b in t["bounds"].items():
                lines.append("- `%s`: %s x (%s ns), bound %.0f x: %s" % (
                    fid, "-" if b["ratio"] is None else "%.1f" % b["ratio"], _ns(b["ns"]), b["max_ratio"],
                    "met" if b["ok"] else "**MISSED**"))
        lines.append("")
    if perf.get("suite"):
        lines += ["### The suite's throughput", "",
                  "Each target's suites run once, alone (`dlconform run --jobs 1`): checks are its result records, "
                  "seconds its child's wall time.", "", "| target | throughput |", "| --- | --- |"]
        lines += ["| %s | %s |" % (_cell(spec), _cell(_throughput(t))) for spec, t in perf["suite"].items()]
        lines.append("")
    lines += ["Chart: `bench.svg` (log scale; one group per library; the dark tick on each bar is ref's "
              "figure for the same path).", ""]
    return lines


def summary_lines(perf):
    """A short console summary: per target, ns and ratio of each measured figure."""
    out = ["dlconform bench: baseline %s ns (%s)" % (_ns(perf.get("baseline_ns")), perf.get("note", "")[:60] + "...")]
    for spec, t in perf.get("targets", {}).items():
        if t.get("status") != "ran":
            out.append("  %s: %s: %s" % (spec, t.get("status"), t.get("reason")))
            continue
        for fid, f in t["figures"].items():
            if f.get("status") == "ok":
                out.append("  %-10s %-28s %10s ns  spread %5.1f%%  x%-7.1f drift %5.1f%%%s" % (
                    spec, fid, _ns(f["ns"]), 100 * f["spread"], f["ratio"], 100 * f["drift"],
                    "  NOISY" if f["noisy"] else ""))
        for fid, b in (t.get("bounds") or {}).items():
            out.append("  %-10s bound %-22s %s x <= %.0f x: %s" % (
                spec, fid, "-" if b["ratio"] is None else "%.1f" % b["ratio"], b["max_ratio"],
                "met" if b["ok"] else "MISSED"))
    for spec, t in (perf.get("suite") or {}).items():
        out.append("  %-10s suite: %s" % (spec, _throughput(t)))
    return out


def _throughput(t):
    if t.get("status") != "ran":
        return "%s: %s" % (t.get("status"), t.get("reason"))
    return "%d checks in %.1f s, %.1f checks/s" % (t["checks"], t["seconds"], t["checks_per_s"])
