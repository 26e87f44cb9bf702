"""The results document, schema "dlconform-results/1" (see reports/README.md)."""
import datetime
import json

from ..kit.check import VERDICTS

SCHEMA = "dlconform-results/1"


def summarize(results, targets=()):
    summary = {t: {v: 0 for v in VERDICTS} for t in targets}
    for r in results:
        counts = summary.setdefault(r["target"], {v: 0 for v in VERDICTS})
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return summary


def build(targets, results, environment, run=None, generated=None):
    """targets: {spec: {"status", "reason", "roles", "versions", ...}}; results: complete records
    (dlconform.records.Record), taken as they are."""
    results = list(results)
    generated = generated or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "schema": SCHEMA,
        "generated": generated,
        "environment": environment or {},
        "run": run or {},
        "targets": targets,
        "results": results,
        "summary": summarize(results, targets),
    }


def dumps(doc):
    return json.dumps(doc, indent=1, sort_keys=False, default=str) + "\n"


def load(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if doc.get("schema") != SCHEMA:
        raise ValueError("%s: not a %s document" % (path, SCHEMA))
    return doc
