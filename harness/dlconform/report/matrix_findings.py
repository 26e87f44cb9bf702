"""Findings, headlines and the folded noise of a matrix view (matrix_view.build calls this).

- A *finding* is one library version, role and clause (or one interop cell) with at least one
  result that is neither pass, unsupported nor skip: fail, crash, timeout, warn (and any
  verdict added later). Its anchor is built from those names, so a link to it lasts across
  renders: `numpy-2.4.6-consumer-LAY-09`, `interop-sid-torch-2.14.1-debian-to-numpy-2.4.6`.
- A *headline* is one library version: per role, the MUST clauses passed of those checked
  (checked: at least one result that is not unsupported or skip; passed: none of them fail,
  crash or time out); the crashes on invalid input (robustness, from the records' `input`
  field: "invalid" or "argument"; None, "not graded", when no record of the library carries
  the field); the findings by verdict; and the clauses folded away: not offered (only
  unsupported results) and not testable here (only skip results), by clause group.
"""
import re

from ..kit.check import rank

QUIET = frozenset(("pass", "unsupported", "skip"))
#: verdicts that break a MUST clause
BREACHES = frozenset(("fail", "crash", "timeout"))
#: `input` values of a check that fed malformed metadata or an invalid argument
INVALID_INPUT = frozenset(("invalid", "argument"))
ROLES = ("producer", "consumer")


def slug(*parts):
    """An anchor from names: letters, digits, '.', '_' and '-' kept, any other run is one '-'."""
    text = "-".join(str(p) for p in parts if p not in (None, ""))
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def compact(ids):
    """Clause ids with runs of consecutive numbers of one group joined: XAPI-01, XAPI-02, XAPI-03
    -> XAPI-01–03 (index.html's compact() does the same)."""
    out, run = [], []

    def flush():
        if len(run) > 2:
            out.append("%s–%s" % (run[0][2], run[-1][2].split("-")[-1]))
        else:
            out.extend(r[2] for r in run)
        run.clear()

    for cid in ids:
        m = re.match(r"^(.*-)(\d+)$", cid)
        if not m:
            flush()
            out.append(cid)
            continue
        key = (m.group(1), int(m.group(2)), cid)
        if run and (run[-1][0] != key[0] or run[-1][1] + 1 != key[1]):
            flush()
        run.append(key)
    flush()
    return out


def is_finding(verdict):
    return verdict not in QUIET


def column_anchor(col):
    return slug(col["lib"], col["version"])


def _worst(verdicts):
    return max(verdicts, key=rank)


def conformance(results, conf, columns, rows, detail_of, upstream_match):
    """(findings, headlines). conf: (record index, column, row) of every conformance record."""
    by_key, graded = {}, set()
    for i, c, ri in conf:
        r = results[i]
        by_key.setdefault((c, r.get("role") or "any", ri), []).append(i)
        if r.get("input"):
            graded.add(columns[c]["lib"])
    heads = [{"col": c, "anchor": column_anchor(col), "must": {role: [0, 0] for role in ROLES},
              "robustness": None if col["lib"] not in graded else 0, "counts": {}, "findings": [],
              "not_offered": {}, "not_testable": {}} for c, col in enumerate(columns)]
    findings = []
    for (c, role, ri), idx in sorted(by_key.items(), key=lambda kv: (kv[0][0], kv[0][2], kv[0][1])):
        verdicts = [results[i]["verdict"] for i in idx]
        head, row = heads[c], rows[ri]
        for i in idx:
            if results[i]["verdict"] == "crash" and results[i].get("input") in INVALID_INPUT:
                head["robustness"] += 1
        checked = [v for v in verdicts if v not in ("unsupported", "skip")]
        if row["level"] == "MUST" and role in head["must"] and checked:
            head["must"][role][1] += 1
            head["must"][role][0] += not any(v in BREACHES for v in checked)
        bad = [i for i in idx if is_finding(results[i]["verdict"])]
        if bad:
            worst = _worst(results[i]["verdict"] for i in bad)
            col = columns[c]
            findings.append({"anchor": slug(col["lib"], col["version"], role, row["clause"]), "col": c,
                             "role": role, "row": ri, "verdict": worst,
                             "details": [detail_of[i] for i in bad],
                             "upstream": upstream_match(col["lib"], col["version"], row["clause"],
                                                        [results[i].get("message") or "" for i in bad])})
            head["findings"].append(len(findings) - 1)
            head["counts"][worst] = head["counts"].get(worst, 0) + 1
        elif not checked:
            fold = head["not_offered"] if "unsupported" in verdicts else head["not_testable"]
            ids = fold.setdefault(row["group"], [])
            if row["clause"] not in ids:
                ids.append(row["clause"])
    for head in heads:  # a clause not offered in one role but tested in the other is not folded
        tested = {rows[ri]["clause"] for (c, _, ri), idx in by_key.items() if c == head["col"]
                  and any(results[i]["verdict"] not in ("unsupported", "skip") for i in idx)}
        for fold in (head["not_offered"], head["not_testable"]):
            for g in list(fold):
                fold[g] = [x for x in fold[g] if x not in tested]
                if not fold[g]:
                    del fold[g]
    return findings, heads


def interop(results, cells, interop_tiers, cell_records, detail_of, upstream_match):
    """Findings of the interop cells: one per cell with a finding verdict."""
    findings = []
    for t in interop_tiers:
        for k in t["cells"]:
            cell = cells[k]
            bad = [i for i in cell_records[k] if is_finding(results[i]["verdict"])]
            if not bad:
                continue
            prod, cons = t["producers"][cell[1]], t["consumers"][cell[0]]
            msgs = [results[i].get("message") or "" for i in bad]
            ups = []
            for i in bad:
                r = results[i]
                for u in upstream_match(r["target"], r.get("version", ""), r["clause"], msgs):
                    if u not in ups:
                        ups.append(u)
            findings.append({"anchor": slug("interop", t["tier"], prod, "to", cons), "cell": k, "tier": t["tier"],
                             "verdict": _worst(results[i]["verdict"] for i in bad),
                             "details": [detail_of[i] for i in bad], "upstream": ups})
    return findings
