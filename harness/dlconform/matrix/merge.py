"""`python3 -m dlconform merge A.json B.json ... --out DIR`: result files from any machines in one
data set, schema "dlconform-matrix/1" (reports/README.md).

Inputs, each `PATH` or `LABEL=PATH` with LABEL = `TIER` or `TIER@MACHINE`:
- `dlconform-results/1` (results.json of `dlconform run`, from the host, a tier or another machine);
- `dlconform-run-failure/1` (written by `make matrix` when a tier fails to build or run);
- `dlconform-matrix/1` (an earlier merge: its sources keep their provenance).

Every input becomes one or more `sources` (a provenance block: file, sha256, tier, machine,
Python, library versions, dlpack header, dlconform revision, run) and every result names its
source and its library `version` (interop records also `peer_version`). Results with the same key
(target, library version, role, clause, test, peer and its version) from
different sources are `duplicates` when their verdicts agree and `conflicts` when they do not;
both are listed, nothing is dropped. A file that is not JSON, has a foreign schema or a malformed
field is rejected as a whole with one line naming the file and the field; the others are merged.
Unknown keys are kept: a results file's `performance` under its source's `performance` and in the
matrix's `performance` map (by source id), its other unknown top-level keys under the source's
`extra`, unknown record keys (`peer` for interop, ...) on the record.
"""
import datetime
import hashlib
import json
import os
import re
import sys

from .. import catalogue as _catalogue
from ..records import complete
from ..report import atomic_write
from ..kit.check import VERDICTS, rank

SCHEMA = "dlconform-matrix/1"
RESULTS_SCHEMA = "dlconform-results/1"
FAILURE_SCHEMA = "dlconform-run-failure/1"
KNOWN_TIERS = ("bookworm", "trixie", "sid", "host")
SIDECAR = "provenance.json"  # written by `make matrix` next to a tier's results.json
_RESULTS_KEYS = ("schema", "generated", "environment", "run", "targets", "results", "summary")
_LABEL = re.compile(r"^([A-Za-z0-9_.+-]+)(?:@([A-Za-z0-9_.:+-]+))?=(.+)$")


class InputError(Exception):
    """A rejected input file: str() is the one-line message."""

    def __init__(self, path, field, message):
        super().__init__(path, field, message)
        self.path, self.field, self.message = path, field, message

    def __str__(self):
        if self.field:
            return "%s: field '%s': %s" % (self.path, self.field, self.message)
        return "%s: %s" % (self.path, self.message)

    def to_dict(self):
        return {"file": self.path, "field": self.field, "message": self.message}


def parse_spec(arg):
    """`PATH` or `TIER[@MACHINE]=PATH` -> (path, tier or None, machine or None)."""
    m = _LABEL.match(arg)
    if m and not os.path.exists(arg):
        return m.group(3), m.group(1), m.group(2)
    return arg, None, None


def _typed(path, field, value, types, what):
    if not isinstance(value, types):
        raise InputError(path, field, "expected %s, got %s" % (what, type(value).__name__))
    return value


def _str_field(path, field, value, optional=True):
    if value is None and optional:
        return ""
    return _typed(path, field, value, str, "a string")


def _check_record(path, i, r, targets=None):
    where = "results[%d]" % i
    _typed(path, where, r, dict, "an object")
    for key in ("target", "clause", "verdict"):
        if key not in r:
            raise InputError(path, "%s.%s" % (where, key), "missing")
        _typed(path, "%s.%s" % (where, key), r[key], str, "a string")
    if r["verdict"] not in VERDICTS:
        raise InputError(path, where + ".verdict", "unknown verdict %r (expected one of %s)"
                         % (r["verdict"], ", ".join(VERDICTS)))
    for key in ("role", "test", "message", "repro", "level", "group", "evidence", "peer", "producer", "consumer"):
        if key in r and r[key] is not None:
            _typed(path, "%s.%s" % (where, key), r[key], str, "a string")
    if "duration" in r and r["duration"] is not None and not isinstance(r["duration"], (int, float)):
        raise InputError(path, where + ".duration", "expected a number, got %s" % type(r["duration"]).__name__)


_VERDICT_SET = frozenset(VERDICTS)
_TEXT_FIELDS = frozenset(("target", "clause", "verdict", "role", "test", "message", "repro", "level", "group",
                          "evidence", "peer", "producer", "consumer"))


def _check_records(path, results):
    """Fast path over every record; the first bad one is re-checked by _check_record for its field."""
    for i, r in enumerate(results):
        if type(r) is dict and r.get("verdict") in _VERDICT_SET and type(r.get("target")) is str \
                and type(r.get("clause")) is str:
            for k, v in r.items():
                if k in _TEXT_FIELDS and type(v) is not str and v is not None:
                    break
                if k == "duration" and v is not None and not isinstance(v, (int, float)):
                    break
            else:
                continue
        _check_record(path, i, r)


def _read_json(path):
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise InputError(path, None, "cannot read: %s" % (e.strerror or e))
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise InputError(path, None, "not UTF-8 text (byte %d)" % e.start)
    except ValueError as e:
        raise InputError(path, None, "not JSON (%s)" % e)
    return doc, hashlib.sha256(raw).hexdigest()


def _canonical_version(lib, environment):
    """The one spelling of library `lib`'s version in a run, or None: the environment's, which
    every run measures the same way (importlib.metadata, whichever targets ran; an adapter's own
    `__version__` may spell it otherwise: torch 1.13.0a0 for 1.13.0a0+gitunknown); for ref, which
    is dlconform's own _ref module, dlconform's version (targets/ref.py)."""
    if not isinstance(environment, dict):
        return None
    libs = environment.get("libraries")
    v = libs.get(lib) if isinstance(libs, dict) else None
    if not v and lib == "ref":
        own = environment.get("dlconform")
        v = own.get("version") if isinstance(own, dict) else None
    return str(v) if v else None


def _no_path(value):
    """A version entry without machine-local paths (a CUDA runtime's /tmp/.../libcudart.so: its
    file name stays), for labels and anchors; the run's `targets` keep the full entry."""
    return " ".join(os.path.basename(w) if w.startswith("/") else w for w in str(value).split(" "))


def _version_label(versions, target, environment):
    lib = target.split(":", 1)[0].split("@", 1)[0]
    # the same label whether the run tested the library or met it only as a peer
    canonical = _canonical_version(lib, environment)
    if canonical:
        return canonical
    versions = versions if isinstance(versions, dict) else {}
    # the library's own version (an adapter may list what it needs too, e.g. pyarrow: numpy), also
    # for the library's device variant (torch@cuda: torch's version; the device is in the name)
    own = versions.get(lib)
    if own:
        return _no_path(own)
    vals = [(k, _no_path(v)) for k, v in versions.items() if v]
    if len(vals) == 1:
        return vals[0][1]
    if vals:
        return ", ".join("%s %s" % kv for kv in vals)
    return "?"


def _guess_tier(path, doc):
    for holder in (doc, doc.get("environment") or {}, doc.get("run") or {}):
        if isinstance(holder, dict) and isinstance(holder.get("tier"), str) and holder["tier"]:
            return holder["tier"]
    parent = os.path.basename(os.path.dirname(os.path.abspath(path)))
    return parent if parent in KNOWN_TIERS else "host"


def _read_sidecar(path):
    side = os.path.join(os.path.dirname(os.path.abspath(path)), SIDECAR)
    try:
        with open(side, encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _results_source(path, doc, digest, tier, machine):
    """Validates a dlconform-results/1 document; returns (source, records)."""
    env = doc.get("environment", {})
    _typed(path, "environment", env, dict, "an object")
    targets = doc.get("targets", {})
    _typed(path, "targets", targets, dict, "an object")
    for name, info in targets.items():
        _typed(path, "targets.%s" % name, info, dict, "an object")
        if "versions" in info and info["versions"] is not None:
            _typed(path, "targets.%s.versions" % name, info["versions"], dict, "an object")
    if "results" not in doc:
        raise InputError(path, "results", "missing")
    results = _typed(path, "results", doc["results"], list, "a list")
    run = doc.get("run") or {}
    _typed(path, "run", run, dict, "an object")
    py = env.get("python") or {}
    _typed(path, "environment.python", py, dict, "an object")
    libs = env.get("libraries") or {}
    _typed(path, "environment.libraries", libs, dict, "an object")
    _check_records(path, results)
    side = _read_sidecar(path)
    tier = tier or (side.get("tier") if isinstance(side.get("tier"), str) else None) or _guess_tier(path, doc)
    host = machine or side.get("machine") or env.get("hostname") or env.get("node")
    versions = {}
    for name, info in targets.items():
        for lib, v in (info.get("versions") or {}).items():
            versions.setdefault(lib, v)
    for lib, v in libs.items():  # the environment's spelling wins, as in the labels (_canonical_version)
        if v or lib not in versions:
            versions[lib] = v
    source = {
        "kind": "results",
        "file": path,
        "sha256": digest,
        "schema": doc.get("schema"),
        "generated": doc.get("generated"),
        "tier": tier,
        "machine": {"name": host or ("this machine" if tier == "host" else "%s tier" % tier),
                    "arch": env.get("machine"), "platform": env.get("platform")},
        "python": py,
        "libraries": versions,
        "dlpack_header": env.get("dlpack_header"),
        "dlconform": env.get("dlconform"),
        "run": {k: run.get(k) for k in ("argv", "clause", "started", "duration", "exit_status") if k in run},
        "targets": targets,
        "status": "ok",
    }
    if side:
        source["tier_info"] = {k: v for k, v in side.items() if k not in ("tier", "machine")}
    if "performance" in doc:
        source["performance"] = doc["performance"]
    extra = {k: v for k, v in doc.items() if k not in _RESULTS_KEYS and k != "performance"}
    if extra:
        source["extra"] = extra
    recs = []
    labels = {}
    for r in results:
        r = dict(r)
        t = r["target"]
        r.setdefault("role", "any")
        r.setdefault("test", "")
        r.setdefault("message", "")
        r.setdefault("repro", "")
        label = labels.get(t)
        if label is None:
            label = labels[t] = _version_label((targets.get(t) or {}).get("versions"), t, env)
        r["version"] = label
        peer = r.get("peer")
        if peer and "peer_version" not in r:  # interop: the other library's version in this run
            pv = labels.get(peer)
            if pv is None:
                pv = labels[peer] = _version_label((targets.get(peer) or {}).get("versions"), peer, env)
            r["peer_version"] = pv
        recs.append(r)
    return source, recs


def _failure_source(path, doc, digest, tier, machine):
    for key in ("tier", "stage", "message"):
        if key in doc:
            _str_field(path, key, doc[key])
    if not (tier or doc.get("tier")):
        raise InputError(path, "tier", "missing")
    source = {
        "kind": "failure",
        "file": path,
        "sha256": digest,
        "schema": doc.get("schema"),
        "generated": doc.get("generated"),
        "tier": tier or doc.get("tier"),
        "machine": {"name": machine or doc.get("machine") or "this machine"},
        "status": "failed",
        "stage": doc.get("stage") or "run",
        "exit_status": doc.get("exit_status"),
        "message": doc.get("message") or "",
        "log": doc.get("log") or "",
    }
    extra = {k: v for k, v in doc.items() if k not in source and k not in ("schema",)}
    if extra:
        source["extra"] = extra
    return source


def _matrix_sources(path, doc):
    """An earlier merge: its sources (with their provenance) and results."""
    sources = _typed(path, "sources", doc.get("sources"), list, "a list")
    ids = set()
    for i, s in enumerate(sources):
        _typed(path, "sources[%d]" % i, s, dict, "an object")
        _typed(path, "sources[%d].id" % i, s.get("id"), str, "a string")
        ids.add(s["id"])
    results = _typed(path, "results", doc.get("results"), list, "a list")
    _check_records(path, results)
    for i, r in enumerate(results):
        if r.get("source") not in ids:
            raise InputError(path, "results[%d].source" % i, "names no source in 'sources'")
        r.setdefault("version", "?")
    for key in ("errors", "failures"):
        if key in doc:
            _typed(path, key, doc[key], list, "a list")
    return sources, results


def load_input(arg):
    """(list of (source, records)) for one input argument; raises InputError."""
    path, tier, machine = parse_spec(arg)
    doc, digest = _read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, None, "expected a JSON object, got %s" % type(doc).__name__)
    schema = doc.get("schema")
    if schema is None:
        raise InputError(path, "schema", "missing (not a dlconform results file)")
    if schema == RESULTS_SCHEMA:
        return [_results_source(path, doc, digest, tier, machine)], doc
    if schema == FAILURE_SCHEMA:
        return [(_failure_source(path, doc, digest, tier, machine), [])], doc
    if schema == SCHEMA:
        sources, results = _matrix_sources(path, doc)
        by_id = {s["id"]: (dict(s), []) for s in sources}
        for r in results:
            by_id[r["source"]][1].append(r)
        out = []
        for s, recs in by_id.values():
            s.setdefault("merged_from", path)
            out.append((s, recs))
        return out, doc
    raise InputError(path, "schema", "%r is not a dlconform results file (expected %s, %s or %s)"
                     % (schema, RESULTS_SCHEMA, FAILURE_SCHEMA, SCHEMA))


def find_overlaps(results):
    """(duplicates, conflicts): keys seen in more than one source with equal / different verdicts."""
    first, multi = {}, {}
    for i, r in enumerate(results):
        key = (r["target"], r.get("version", "?"), r.get("role", ""), r["clause"], r.get("test", ""),
               ("%s %s" % (r["peer"], r.get("peer_version", "?"))) if r.get("peer") else "")
        j = first.setdefault(key, i)
        if j != i:
            multi.setdefault(key, [j]).append(i)
    duplicates, conflicts = [], []
    for key, idx in multi.items():
        by_verdict = {}
        for i in idx:
            by_verdict.setdefault(results[i]["verdict"], set()).add(results[i]["source"])
        if len({results[i]["source"] for i in idx}) < 2:
            continue  # repeated inside one source: not an overlap between machines
        entry = {"target": key[0], "version": key[1], "role": key[2], "clause": key[3], "test": key[4],
                 "verdicts": {v: sorted(s) for v, s in sorted(by_verdict.items(), key=lambda kv: rank(kv[0]))},
                 "results": idx}
        if key[5]:
            entry["peer"] = key[5]
        (conflicts if len(by_verdict) > 1 else duplicates).append(entry)
    return duplicates, conflicts


def _clause_table(path=None):
    cat = _catalogue.load(path)
    out = {}
    for c in cat:
        entry = {"group": c.group, "level": c.level, "binds": c.binds, "text": c.text}
        for k in ("reading", "source", "since", "needs"):
            v = getattr(c, k)
            if v:
                entry[k] = v
        out[c.id] = entry
    return out


def merge(args, catalogue_path=None, generated=None):
    """Merges input arguments; returns (matrix document, [InputError])."""
    sources, results, errors, performance = [], [], [], {}
    failures, carried_errors = [], []
    for arg in args:
        try:
            loaded, doc = load_input(arg)
        except InputError as e:
            errors.append(e)
            continue
        if doc.get("schema") == SCHEMA:
            carried_errors.extend(e for e in doc.get("errors", []) if isinstance(e, dict))
        for src, recs in loaded:
            sid = "s%d" % len(sources)
            src["id"] = sid
            sources.append(src)
            if "performance" in src:
                performance[sid] = src["performance"]
            if src.get("kind") == "failure":
                failures.append({"source": sid, "tier": src.get("tier", "?"),
                                 "machine": (src.get("machine") or {}).get("name"),
                                 "stage": src.get("stage"), "exit_status": src.get("exit_status"),
                                 "message": src.get("message", ""), "log": src.get("log", "")})
            for r in recs:
                r = dict(r)
                r["source"] = sid
                results.append(r)
    clauses = _clause_table(catalogue_path)
    cat = _catalogue.load(catalogue_path)
    for r in results:
        complete(r, cat)
    duplicates, conflicts = find_overlaps(results)
    generated = generated or datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    summary = {v: 0 for v in VERDICTS}
    for r in results:
        summary[r["verdict"]] = summary.get(r["verdict"], 0) + 1
    doc = {
        "schema": SCHEMA,
        "generated": generated,
        "inputs": list(args),
        "sources": sources,
        "errors": carried_errors + [e.to_dict() for e in errors],
        "failures": failures,
        "clauses": clauses,
        "summary": summary,
        "duplicates": duplicates,
        "conflicts": conflicts,
        "performance": performance,
        "results": results,
    }
    return doc, errors


def dumps(doc):
    """matrix.json's text: the document indented, with one result record per line, so that a
    new snapshot's diff shows which records changed."""
    head = {k: v for k, v in doc.items() if k != "results"}
    text = json.dumps(head, indent=1, default=str)
    if "results" not in doc:
        return text + "\n"
    rows = [json.dumps(r, separators=(",", ":"), default=str) for r in doc["results"]]
    opening = text[:-2] + ",\n" if head else "{\n"
    return opening + ' "results": [\n' + ",\n".join(rows) + ("\n" if rows else "") + " ]\n}\n"


def write(out_dir, doc):
    """matrix.json, MATRIX.md and index.html under out_dir; returns their paths."""
    from ..report import html, matrix_md

    os.makedirs(out_dir, exist_ok=True)
    paths = {"json": os.path.join(out_dir, "matrix.json"), "markdown": os.path.join(out_dir, "MATRIX.md"),
             "html": os.path.join(out_dir, "index.html")}
    atomic_write(paths["json"], dumps(doc))
    from ..report.matrix_view import build as build_view
    from . import upstream

    view = build_view(doc, upstream.matcher(upstream.load()))
    atomic_write(paths["markdown"], matrix_md.render(doc, view))
    atomic_write(paths["html"], html.render(doc, view))
    return paths


def main(args):
    """The `merge` subcommand; args: argparse namespace with inputs, out, quiet."""
    doc, errors = merge(args.inputs)
    for e in errors:
        print("dlconform merge: error: %s (nothing merged from it)" % e, file=sys.stderr)
    if not doc["sources"]:
        print("dlconform merge: error: no input could be merged", file=sys.stderr)
        return 1
    paths = write(args.out, doc)
    if not args.quiet:
        n_src = len(doc["sources"])
        print("dlconform merge: %d results from %d sources (%d rejected), %d conflicts, %d duplicates; wrote %s"
              % (len(doc["results"]), n_src, len(errors), len(doc["conflicts"]), len(doc["duplicates"]),
                 ", ".join(paths.values())))
    return 1 if errors else 0
