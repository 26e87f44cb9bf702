"""`make matrix`: conformance in every Debian tier and on the host, merged into one matrix.

    python3 -m dlconform.matrix.run [--tiers "bookworm trixie sid"] [--no-host] [--targets "..."]
                                    [--jobs 3] [--runs reports/out/matrix] [--out reports/matrix] [--publish]

Each run writes RUNS/LABEL/ (LABEL = a tier or `host`): the runner's reports, plus
`provenance.json` (tier, machine, the tier's stamp: package versions and where its dlpack header
came from, the host's git revision). Missing tiers are built by tier.sh. A tier that fails to
build or run gets RUNS/LABEL/failure.json (schema dlconform-run-failure/1: stage, exit status,
the last lines of its log) and the other runs still publish. Interop is part of the conformance
run (suites/test_interop.py: records with `peer`). Then every RUNS/*/results.json and
failure.json is merged into OUT (matrix.json, MATRIX.md, index.html).

`--publish` runs nothing: it merges what RUNS holds (the latest results), or, when RUNS has
nothing, re-renders OUT/matrix.json.

Provenance: the runs carry the revision they were made from (`revision` in provenance.json,
`git describe --tags --always`). A tree with changes (tracked or untracked, not ignored: the
tiers copy both) has no such revision, so a run refuses it; `--allow-dirty` (make matrix
ALLOW_DIRTY=1) runs anyway and records the revision with `-dirty`.

Exit status: 0 when the matrix was written (findings in the libraries are data, not errors),
1 when it could not be written or a run failed to produce results, 2 on a usage error or a
tree with changes.
"""
import argparse
import concurrent.futures
import datetime
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time

from .. import REPO_DIR
from . import merge
from ..environment import git_revision

TIER_SH = os.path.join(REPO_DIR, "harness", "tiers", "tier.sh")
DEFAULT_TIERS = ("bookworm", "trixie", "sid")
LOG_TAIL = 40


def _now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def _say(msg):
    print("matrix: %s" % msg, flush=True)


def _tail(path, n=LOG_TAIL):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-n:])


def _last_error(text):
    for line in reversed(text.splitlines()):
        s = line.strip()
        if s and not s.startswith(("dlconform: running", "dlconform: wrote")):
            return s[:400]
    return ""


def _write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def source_revision(repo=REPO_DIR):
    """(`git describe --tags --always --abbrev=12` of repo, whether the tree has changes that
    are not ignored); (None, False) outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", "-C", repo] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=30, check=False)
    try:
        described = git("describe", "--tags", "--always", "--abbrev=12")
        if described.returncode != 0:
            return None, False
        status = git("status", "--porcelain")
        return described.stdout.decode().strip(), bool(status.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, False


def _tier_stamp(tier_dir, tier):
    """The tier's stamp (tier.sh write_stamp) as a dict; {} when there is none."""
    info, pkgs, py = {}, {}, {}
    try:
        with open(os.path.join(tier_dir, tier, ".dlconform-tier"), encoding="utf-8") as f:
            for line in f:
                key, _, value = line.rstrip("\n").partition("=")
                if key.startswith("pkg "):
                    pkgs[key[4:]] = value
                elif key.startswith("py "):
                    py[key[3:]] = value
                elif key in ("built", "mirror", "header"):
                    info[key] = value
    except OSError:
        return {}
    if pkgs:
        info["debian_packages"] = pkgs
    if py:
        info["modules"] = py
    return info


def _valid_results(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return isinstance(doc, dict) and doc.get("schema") == merge.RESULTS_SCHEMA
    except (OSError, ValueError):
        return False


def run_one(label, runs, args, tier_dir):
    """Runs conformance for one tier (or the host); returns a status dict."""
    dest = os.path.join(runs, label)
    log = os.path.join(runs, label + ".log")
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    env = dict(os.environ, OUT=runs, TARGETS=args.targets or "", TIER_DIR=tier_dir, CLAUSE=args.clause or "")
    if label == "host":
        cmd = [args.make, "--no-print-directory", "-C", REPO_DIR, "conformance", "OUT=%s" % dest,
               "TARGETS=%s" % (args.targets or ""), "TIER="]
        if args.clause:
            cmd.append("CLAUSE=%s" % args.clause)
    else:
        cmd = ["sh", TIER_SH, "conformance", label]
    started = time.time()
    _say("%s: running (log %s)" % (label, os.path.relpath(log)))
    with open(log, "w", encoding="utf-8") as f:
        f.write("$ %s\n" % " ".join(cmd))
        f.flush()
        try:
            rc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO_DIR,
                                timeout=args.run_timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            f.write("\nmatrix: %s killed after %d s\n" % (label, args.run_timeout))
    duration = round(time.time() - started, 1)
    os.makedirs(dest, exist_ok=True)
    try:  # the runner's own exit status (make turns a failing recipe into 2)
        with open(os.path.join(dest, "exit-status")) as f:
            rc = int(f.read().strip())
    except (OSError, ValueError):
        pass
    results = os.path.join(dest, "results.json")
    prov = {"tier": label, "machine": args.machine, "recorded": _now(), "duration": duration, "exit_status": rc,
            "host_git": git_revision(), "revision": args.revision, "host_platform": platform.platform(),
            "log": os.path.relpath(log, REPO_DIR)}
    if label != "host":
        prov.update(_tier_stamp(tier_dir, label))
    if _valid_results(results):
        _write_json(os.path.join(dest, merge.SIDECAR), prov)
        _say("%s: results in %.0f s (runner exit %s)" % (label, duration, rc))
        return {"label": label, "ok": True, "duration": duration, "exit_status": rc}
    tail = _tail(log)
    stage = "run"
    if label != "host":
        check = subprocess.run(["sh", TIER_SH, "check", label], env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, cwd=REPO_DIR)
        if check.returncode != 0:
            stage = "build"
        elif "building the probes inside the tier failed" in tail:
            stage = "probe build"
    failure = {"schema": merge.FAILURE_SCHEMA, "generated": _now(), "tier": label, "machine": args.machine,
               "stage": stage, "exit_status": rc, "message": _last_error(tail) or "no results.json was written",
               "log": tail, "duration": duration}
    _write_json(os.path.join(dest, "failure.json"), failure)
    _say("%s: FAILED at %s (exit %s) after %.0f s: %s" % (label, stage, rc, duration, failure["message"]))
    return {"label": label, "ok": False, "duration": duration, "exit_status": rc}


def collect_inputs(runs):
    inputs = []
    if not os.path.isdir(runs):
        return inputs
    for label in sorted(os.listdir(runs)):
        d = os.path.join(runs, label)
        if not os.path.isdir(d):
            continue
        for name in ("results.json", "failure.json"):
            p = os.path.join(d, name)
            if os.path.isfile(p):
                rel = os.path.relpath(p)
                inputs.append(p if rel.startswith("..") else rel)  # the tier: provenance.json or failure.json
                break
    return inputs


def publish(runs, out, quiet=False):
    inputs = collect_inputs(runs)
    if not inputs:
        old = os.path.join(out, "matrix.json")
        if not os.path.isfile(old):
            _say("nothing to publish: no runs under %s and no %s" % (runs, old))
            return 1
        _say("no runs under %s: re-rendering %s" % (runs, old))
        inputs = [old]
    t0 = time.time()
    doc, errors = merge.merge(inputs)
    for e in errors:
        print("matrix: error: %s (nothing merged from it)" % e, file=sys.stderr)
    if not doc["sources"]:
        return 1
    paths = merge.write(out, doc)
    _say("merged %d results from %d runs (%d failed, %d conflicts) in %.1f s: %s" % (
        len(doc["results"]), len(doc["sources"]), len(doc["failures"]), len(doc["conflicts"]), time.time() - t0,
        ", ".join(os.path.relpath(p) for p in paths.values())))
    return 1 if errors else 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m dlconform.matrix.run", description=__doc__.split("\n")[0])
    ap.add_argument("--tiers", default=" ".join(DEFAULT_TIERS), help="Debian tiers, space separated ('' for none)")
    ap.add_argument("--no-host", action="store_true", help="skip the run on the host")
    ap.add_argument("--targets", default="", help="space-separated target specs (default: every built-in)")
    ap.add_argument("--clause", default="", help="clause glob, as for run")
    ap.add_argument("--runs", default=os.path.join(REPO_DIR, "reports", "out", "matrix"), help="where runs write")
    ap.add_argument("--out", default=os.path.join(REPO_DIR, "reports", "matrix"), help="the published matrix")
    ap.add_argument("--tier-dir", default=os.environ.get("TIER_DIR") or os.path.expanduser("~/.cache/dlconform/tiers"))
    ap.add_argument("--machine", default=socket.gethostname() or "this machine", help="machine name in the provenance")
    ap.add_argument("--run-timeout", type=int, default=1800, help="wall limit per tier run, s (default 1800)")
    ap.add_argument("--jobs", type=int, default=3,
                    help="runs at a time (default 3: sid, trixie, and bookworm then host)")
    ap.add_argument("--make", default=os.environ.get("MAKE", "make"))
    ap.add_argument("--publish", action="store_true", help="run nothing; merge the latest runs")
    ap.add_argument("--allow-dirty", action="store_true", help="run from a tree with changes (revision -dirty)")
    args = ap.parse_args(argv)
    runs, out = os.path.abspath(args.runs), os.path.abspath(args.out)
    if args.publish:
        return publish(runs, out)
    revision, dirty = source_revision()
    if dirty and not args.allow_dirty:
        print("matrix: the tree has changes (git status): a run records the revision it came from, and %s-dirty "
              "names none. Commit them, or run with --allow-dirty (make matrix ALLOW_DIRTY=1)." % revision,
              file=sys.stderr)
        return 2
    args.revision = (revision or "") + ("-dirty" if dirty else "")
    tiers = args.tiers.split()
    bad = [t for t in tiers if t not in DEFAULT_TIERS]
    if bad:
        print("matrix: unknown tier %s (one of: %s)" % (", ".join(bad), " ".join(DEFAULT_TIERS)), file=sys.stderr)
        return 2
    os.makedirs(runs, exist_ok=True)
    # runs from an earlier `make matrix` with other TIERS must not leak into this one
    labels = tiers + ([] if args.no_host else ["host"])
    for old in os.listdir(runs):
        if old not in labels and os.path.isdir(os.path.join(runs, old)):
            shutil.rmtree(os.path.join(runs, old))
    t0 = time.time()
    # the longest runs first (sid, trixie); bookworm and host share the last slot
    order = sorted(labels, key=lambda x: (x != "sid", x != "trixie", x == "host"))
    if args.jobs > 1:
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            done = dict(zip(order, pool.map(lambda x: run_one(x, runs, args, args.tier_dir), order)))
    else:
        done = {x: run_one(x, runs, args, args.tier_dir) for x in order}
    status = [done[x] for x in labels]
    rc = publish(runs, out)
    _say("%d runs in %.0f s: %s" % (len(status), time.time() - t0, ", ".join(
        "%s %s (%.0f s)" % (s["label"], "ok" if s["ok"] else "FAILED", s["duration"]) for s in status)))
    if rc == 0 and not all(s["ok"] for s in status):
        rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
