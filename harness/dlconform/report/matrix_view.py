"""The view model of a merged matrix (dlconform-matrix/1), shared by MATRIX.md and index.html.

build(doc) returns plain JSON data:
- `sources`: one compact provenance row per source;
- `columns`: library x version (conformance results, i.e. records without a `peer`), each with
  the tiers and sources it came from and the `device` its tensors were on (`cpu`, `cuda`: a
  `NAME@DEVICE` target, or its records' `device`); `libraries` groups the columns; `devices`
  lists the devices of the columns, `cpu` first;
- `groups` / `rows`: clause rows in catalogue order, grouped; clauses met only in results are
  appended to their group, session records (`*`) form the last group;
- `cells`: [column, row, worst, total, passes, [detail ids], conflict (0/1), [sources], checked
  (results that are not unsupported or skip), breaches (fail, crash, timeout), warns];
  conformance cells come first, interop cells after them; `cell_anchors`: a lasting anchor per
  cell (`numpy-2.4.6-LAY-09`, `interop-sid-torch-2.14.1-debian-to-numpy-2.4.6`);
- `details`: the records a cell opens to (every non-pass, and every record in a conflict):
  [source, target, version, clause, test, role, verdict, message, repro, evidence, peer], the
  three long texts as indexes into `strings`;
- `interop`: per tier, producers x consumers, cells as above (row = producer, column = consumer);
- `history`: per library, its versions as columns (oldest first) and the clauses whose verdict
  changes between them, with regressions and fixes marked;
- `findings`, `headlines`, `interop_findings`: see matrix_findings (each finding lists its
  detail ids and its upstream context from reports/upstream.json).
"""
import re

from ..kit.check import VERDICTS
from . import matrix_findings

try:
    from packaging.version import InvalidVersion as _InvalidVersion, Version as _Version
except ImportError:  # packaging (python3-packaging) is optional: the legacy order then
    _Version = _InvalidVersion = None

_RANK = {v: i for i, v in enumerate(VERDICTS)}

GROUP_TITLES = {
    "API": "Python API", "CAP": "Capsules", "OWN": "Ownership and deleters", "VER": "Versioning",
    "LAY": "Layout", "SEM": "Semantics", "DT": "Data types", "FLG": "Flags", "ERR": "Errors",
    "DEV": "Devices", "STR": "Streams", "CPY": "Copy", "XAPI": "C exchange API", "*": "Session",
    "UNMARKED": "Unmarked tests",
}
#: verdicts the "failures only" filter keeps (warn: a broken SHOULD or an ambiguity)
FAILURES = ("warn", "fail", "timeout", "crash")
# Order used for regressions/fixes in a version history (skip carries no information).
_HEALTH = {"pass": 0, "unsupported": 1, "warn": 2, "fail": 3, "timeout": 3, "crash": 3}


def _legacy_version_key(v):
    """Digits compare as numbers, letters as text, and a letter run sorts before a number."""
    parts = []
    for tok in re.split(r"[^0-9A-Za-z]+", str(v)):
        if not tok:
            continue
        for piece in re.findall(r"\d+|[A-Za-z]+", tok):
            parts.append((1, int(piece), "") if piece.isdigit() else (0, 0, piece))
    return tuple(parts)


def version_key(v):
    """Sort key of a version label: PEP 440 order through packaging.version (1.13.0a0 <
    1.13.0, 2.0.0rc1 < 2.0.0, 2.0.dev1 < 2.0, a +local label after its public version), with
    _legacy_version_key for labels that are not PEP 440 (they sort before every PEP 440
    version) and where packaging is not installed."""
    if _Version is not None:
        try:
            return (1, _Version(str(v)), ())
        except _InvalidVersion:
            pass
    return (0, None, _legacy_version_key(v))


_AT_DEVICE = re.compile(r"^[A-Za-z0-9_.]+@([A-Za-z0-9_]+)$")


def device_kind(target, device=None):
    """The device a record's tensors were on, as a word: the DEVICE of a `NAME@DEVICE[:...]`
    target, else the kind of its `device` field (`cuda:0` -> `cuda`), else `cpu`."""
    m = _AT_DEVICE.match(str(target).split(":", 1)[0])
    if m:
        return m.group(1)
    return str(device).split(":", 1)[0] if device else "cpu"


def _lib_order(name):
    return (name != "ref", not name.startswith("ref"), name)


def producer_consumer(r):
    if r.get("producer") and r.get("consumer"):
        return r["producer"], r["consumer"]
    if r.get("role") == "consumer":
        return r["peer"], r["target"]
    return r["target"], r["peer"]


def _peer_version(source, peer):
    info = ((source or {}).get("targets") or {}).get(peer) or {}
    own = (info.get("versions") or {}).get(peer.split(":", 1)[0])
    if own:
        return str(own)
    vals = [v for v in (info.get("versions") or {}).values() if v]
    if vals:
        return ", ".join(str(v) for v in vals)
    lib = ((source or {}).get("libraries") or {}).get(peer.split(":", 1)[0])
    return str(lib) if lib else ""


def _revision(s):
    """The dlconform revision a run came from, for people: `git describe` as make matrix
    recorded it, else the commit (12 digits) with -dirty when the tree had changes."""
    tier_info = s.get("tier_info") or {}
    if tier_info.get("revision"):
        return tier_info["revision"]
    git = (s.get("dlconform") or {}).get("git") or tier_info.get("host_git") or ""
    if git:
        return git[:12] + ("-dirty" if git.endswith("-dirty") else "")
    return (s.get("dlconform") or {}).get("version") or ""


def _source_row(s, counts):
    tier_info = s.get("tier_info") or {}
    py = s.get("python") or {}
    hdr = s.get("dlpack_header")
    row = {
        "id": s["id"], "tier": s.get("tier", "?"), "machine": (s.get("machine") or {}).get("name") or "?",
        "arch": (s.get("machine") or {}).get("arch") or "", "status": s.get("status", "ok"),
        "python": py.get("version") or py.get("error") or "", "file": s.get("file", ""),
        "generated": s.get("generated") or "", "results": counts.get(s["id"], 0),
        "header": ".".join(str(x) for x in hdr) if isinstance(hdr, list) else (str(hdr) if hdr else ""),
        "header_source": tier_info.get("header", ""),
        # inside a tier there is no .git: the host's revision that make matrix recorded
        "git": ((s.get("dlconform") or {}).get("git") or tier_info.get("host_git")
                or (s.get("dlconform") or {}).get("version") or ""),
        "revision": _revision(s),
        "libraries": {k: v for k, v in (s.get("libraries") or {}).items() if v},
        "exit_status": (s.get("run") or {}).get("exit_status", s.get("exit_status")),
        "targets": {k: {"status": v.get("status", ""), "reason": v.get("reason", "")}
                    for k, v in (s.get("targets") or {}).items()},
    }
    if s.get("kind") == "failure":
        row.update(stage=s.get("stage", ""), message=s.get("message", ""), log=s.get("log", ""))
    if "performance" in s:
        row["performance"] = True
    return row


class _Strings:
    def __init__(self):
        self.items, self._ix = [""], {"": 0}

    def __call__(self, text):
        text = text or ""
        i = self._ix.get(text)
        if i is None:
            i = self._ix[text] = len(self.items)
            self.items.append(text)
        return i


def build(doc, upstream=None):
    """The view of a merged matrix; `upstream`: a function (library, version, clause, messages)
    -> [{"ref", "state", ...}] (dlconform.matrix.upstream.matcher), or None for no context."""
    upstream = upstream or (lambda lib, version, clause, messages: [])
    results = doc.get("results", [])
    sources = doc.get("sources", [])
    src_index = {s["id"]: i for i, s in enumerate(sources)}
    src_by_id = {s["id"]: s for s in sources}
    clauses = doc.get("clauses", {})
    in_conflict = set()
    for c in doc.get("conflicts", []):
        in_conflict.update(c.get("results", ()))
    strings = _Strings()
    details, detail_of = [], {}
    counts_by_source = {}

    # ---- rows: catalogue order, then unknown clauses, then session records
    group_order, group_rows = [], {}
    for cid, c in clauses.items():
        g = c.get("group") or cid.split("-", 1)[0]
        if g not in group_rows:
            group_order.append(g)
            group_rows[g] = []
        group_rows[g].append(cid)
    known = set(clauses)
    for r in results:
        cid = r["clause"]
        if cid not in known:
            known.add(cid)
            g = "*" if cid == "*" else (r.get("group") or cid.split("-", 1)[0])
            if g not in group_rows:
                group_order.append(g)
                group_rows[g] = []
            group_rows[g].append(cid)
    if "*" in group_order:
        group_order.remove("*")
        group_order.append("*")
    rows, row_ix, groups = [], {}, []
    for g in group_order:
        ids = group_rows[g]
        groups.append({"id": g, "title": GROUP_TITLES.get(g, g), "rows": list(range(len(rows), len(rows) + len(ids)))})
        for cid in ids:
            c = clauses.get(cid, {})
            row_ix[cid] = len(rows)
            rows.append({"clause": cid, "group": g, "level": c.get("level") or ("" if cid == "*" else "MUST"),
                         "text": c.get("text", "") if cid != "*" else "Records about a whole run: a target that "
                         "could not be loaded, a collection error, a crash outside a test.",
                         "reading": c.get("reading", ""), "source": c.get("source", ""), "binds": c.get("binds", "")})

    # ---- aggregate
    col_ix, columns = {}, []
    cell_ix, cells, cell_acc = {}, [], []
    cell_records, cell_counts = [], []
    tiers_interop = {}

    def add(cell_key, make_cell, r, i):
        ci = cell_ix.get(cell_key)
        if ci is None:
            ci = cell_ix[cell_key] = len(cells)
            cells.append(make_cell())
            cell_acc.append({})
            cell_records.append([])
            cell_counts.append([0, 0, 0])
        cell = cells[ci]
        cell_acc[ci][r["source"]] = 1
        cell_records[ci].append(i)
        v = r["verdict"]
        counts = cell_counts[ci]
        counts[0] += v not in ("unsupported", "skip")
        counts[1] += v in matrix_findings.BREACHES
        counts[2] += v == "warn"
        cell[3] += 1
        if v == "pass":
            cell[4] += 1
        if _RANK.get(v, 99) > _RANK.get(cell[2], 99):
            cell[2] = v
        if i in in_conflict:
            cell[6] = 1
        if v != "pass" or i in in_conflict:
            details.append([src_index.get(r["source"], -1), r["target"], r.get("version", "?"), r["clause"],
                            r.get("test", ""), r.get("role", ""), v, strings(r.get("message")),
                            strings(r.get("repro")), strings(r.get("evidence")), r.get("peer") or ""])
            detail_of[i] = len(details) - 1
            cell[5].append(len(details) - 1)
        return ci

    interop_recs, conf = [], []
    for i, r in enumerate(results):
        counts_by_source[r["source"]] = counts_by_source.get(r["source"], 0) + 1
        if r.get("peer") or (r.get("producer") and r.get("consumer")):
            interop_recs.append(i)
            continue
        key = (r["target"], r.get("version", "?"))
        c = col_ix.get(key)
        if c is None:
            c = col_ix[key] = len(columns)
            columns.append({"lib": key[0], "version": key[1], "tiers": [], "sources": [], "machines": [],
                            "device": device_kind(key[0])})
        col = columns[c]
        if col["device"] == "cpu" and r.get("device"):
            col["device"] = device_kind(key[0], r["device"])
        src = src_by_id.get(r["source"], {})
        if r["source"] not in col["sources"]:
            col["sources"].append(r["source"])
            if src.get("tier") not in col["tiers"]:
                col["tiers"].append(src.get("tier"))
            m = (src.get("machine") or {}).get("name")
            if m not in col["machines"]:
                col["machines"].append(m)
        row = row_ix[r["clause"]]
        # worst starts as the first verdict; add() keeps the worst
        add((c, row), lambda c=c, row=row, v=r["verdict"]: [c, row, v, 0, 0, [], 0], r, i)
        conf.append((i, c, row))

    # order columns: libraries (ref first), versions oldest first; remap cell column indexes
    order = sorted(range(len(columns)), key=lambda k: (_lib_order(columns[k]["lib"]),
                                                         version_key(columns[k]["version"]),
                                                         columns[k]["tiers"]))
    remap = {old: new for new, old in enumerate(order)}
    columns = [columns[k] for k in order]
    for cell in cells:
        cell[0] = remap[cell[0]]
    conf = [(i, remap[c], row) for i, c, row in conf]
    libraries = []
    for k, col in enumerate(columns):
        if not libraries or libraries[-1]["name"] != col["lib"]:
            libraries.append({"name": col["lib"], "columns": []})
        libraries[-1]["columns"].append(k)
    n_conf_cells = len(cells)

    # ---- interop per tier
    for i in interop_recs:
        r = results[i]
        src = src_by_id.get(r["source"], {})
        tier = src.get("tier", "?")
        t = tiers_interop.get(tier)
        if t is None:
            t = tiers_interop[tier] = {"tier": tier, "producers": [], "consumers": [], "cells": [],
                                       "_p": {}, "_c": {}, "_seen": set()}
        prod, cons = producer_consumer(r)
        own_v = r.get("version", "")
        peer_v = r.get("peer_version") or (_peer_version(src, r["peer"]) if r.get("peer") else "")
        pv, cv = (own_v, peer_v) if prod == r["target"] else (peer_v, own_v)
        plab = ("%s %s" % (prod, pv)).strip() if pv and pv != "?" else prod
        clab = ("%s %s" % (cons, cv)).strip() if cv and cv != "?" else cons
        if plab not in t["_p"]:
            t["_p"][plab] = len(t["producers"])
            t["producers"].append(plab)
        if clab not in t["_c"]:
            t["_c"][clab] = len(t["consumers"])
            t["consumers"].append(clab)
        p, cc = t["_p"][plab], t["_c"][clab]
        ci = add(("x", tier, p, cc), lambda cc=cc, p=p, v=r["verdict"]: [cc, p, v, 0, 0, [], 0], r, i)
        if ci not in t["_seen"]:
            t["_seen"].add(ci)
            t["cells"].append(ci)
    interop = []
    for tier in sorted(tiers_interop, key=lambda x: (x not in ("bookworm", "trixie", "sid"), x)):
        t = tiers_interop[tier]
        del t["_p"], t["_c"], t["_seen"]
        interop.append(t)

    for ci, seen in enumerate(cell_acc):
        cells[ci].append(sorted(src_index.get(x, -1) for x in seen))
        cells[ci].extend(cell_counts[ci])
    slug = matrix_findings.slug
    cell_anchors = [slug(columns[c[0]]["lib"], columns[c[0]]["version"], rows[c[1]]["clause"])
                    for c in cells[:n_conf_cells]] + [None] * (len(cells) - n_conf_cells)
    for t in interop:
        for k in t["cells"]:
            cell_anchors[k] = slug("interop", t["tier"], t["producers"][cells[k][1]], "to", t["consumers"][cells[k][0]])
    findings, headlines = matrix_findings.conformance(results, conf, columns, rows, detail_of, upstream)
    interop_findings = matrix_findings.interop(results, cells, interop, cell_records, detail_of, upstream)

    # ---- version history per library
    cell_at = {(cells[k][0], cells[k][1]): k for k in range(n_conf_cells)}
    history = []
    for lib in libraries:
        cols = lib["columns"]
        h = {"lib": lib["name"], "columns": cols, "rows": [], "unchanged": 0, "regressions": 0, "fixes": 0}
        for ri in range(len(rows)):
            refs = [cell_at.get((c, ri)) for c in cols]
            if all(x is None for x in refs):
                continue
            verdicts = [cells[x][2] if x is not None else None for x in refs]
            changes, prev = [], None
            for k, v in enumerate(verdicts):
                if v is None or v == "skip":
                    changes.append("")
                    continue
                if prev is not None and _HEALTH[v] != _HEALTH[prev]:
                    changes.append("regressed" if _HEALTH[v] > _HEALTH[prev] else "fixed")
                else:
                    changes.append("")
                prev = v
            if len(set(v for v in verdicts if v is not None)) <= 1:
                h["unchanged"] += 1
                continue
            h["regressions"] += changes.count("regressed")
            h["fixes"] += changes.count("fixed")
            h["rows"].append({"row": ri, "cells": refs, "changes": changes})
        history.append(h)

    return {
        "schema": "dlconform-matrix-view/1",
        "generated": doc.get("generated", ""),
        "verdicts": list(VERDICTS),
        "failures_filter": list(FAILURES),
        "summary": doc.get("summary", {}),
        "sources": [_source_row(s, counts_by_source) for s in sources],
        "errors": doc.get("errors", []),
        "failures": doc.get("failures", []),
        "n_results": len(results),
        "n_conflicts": len(doc.get("conflicts", [])),
        "n_duplicates": len(doc.get("duplicates", [])),
        "conflicts": [[c["target"], c["version"], c["clause"], c["test"], c.get("role", ""), c.get("peer", ""),
                       {v: [src_index.get(s, -1) for s in ss] for v, ss in c["verdicts"].items()}]
                      for c in doc.get("conflicts", [])],
        "groups": groups,
        "rows": rows,
        "columns": columns,
        "devices": sorted({c["device"] for c in columns}, key=lambda d: (d != "cpu", d)),
        "libraries": libraries,
        "cells": cells,
        "n_matrix_cells": n_conf_cells,
        "details": details,
        "strings": strings.items,
        "interop": interop,
        "history": history,
        "cell_anchors": cell_anchors,
        "findings": findings,
        "headlines": headlines,
        "interop_findings": interop_findings,
    }
