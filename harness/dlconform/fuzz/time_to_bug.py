"""Seconds until the consumer target finds each consumer-side fault of ref.

    PYTHONPATH=harness /usr/bin/python3 -m dlconform.fuzz.time_to_bug [--runs 5] [--limit 60] [--fault NAME ...]
        [--binary build/fuzz/consumer.asan] [--json FILE] [--log-dir DIR]

The issue 4 benchmark ("each consumer-side built-in fault of ref is found within 60 s, median
of 5 runs"). For every fault with FAULT_SIDES == "consumer" that fuzz/ci/unfuzzable.txt does
not list, RUNS runs of the CI build (ASan+UBSan libFuzzer, the flags of fuzz-ci and the smoke)
start from the seed corpus alone, each with its own -seed, with DLCONFORM_REF_FAULT set, and
stop at the first crash or after LIMIT seconds. A run counts as finding the fault only when
its first oracle line names the fault's clause, or, for a fault that crashes by design
(FAULTS[name][1] mentions "crash"), when it ends in a sanitizer report or deadly signal. The
time is the wall time from start to exit, start-up included. Prints one line per fault
(median, range, misses); exit 1 when a median exceeds LIMIT. A cuda_* fault runs in the CUDA
mode (ref@cuda), on the simulated runtime where no other is at hand. A run that misses counts as
infinitely long, so a fault missed in most runs fails the bound. The fuzz smoke of .ci/run
(fuzz/ci/smoke.sh) is this script with --runs 1 --limit 20: one rule for "found".
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .. import REPO_DIR


def consumer_faults(only):
    from .. import _ref
    skip = {}
    path = os.path.join(REPO_DIR, "fuzz", "ci", "unfuzzable.txt")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                name, _, why = line.strip().partition(" ")
                if name:
                    skip[name] = why
    unknown = [n for n in only if n not in _ref.FAULT_SIDES]
    if unknown:
        sys.exit("time_to_bug: unknown fault(s): %s" % ", ".join(unknown))
    out = []
    for name, side in sorted(_ref.FAULT_SIDES.items()):
        if side != "consumer" or (only and name not in only):
            continue
        clause, what = _ref.FAULTS[name][0], _ref.FAULTS[name][1]
        out.append((name, clause, "crash" in what, skip.get(name)))
    return out


def device_env(fault):
    """The environment a fault needs: a cuda_* fault acts in ref's import of CUDA memory
    (faults.h), so it runs in the consumer target's CUDA mode (ref@cuda, fuzz/devmem.h), on
    DLCONFORM_CUDART's runtime, else the system's, else the simulated one of make build."""
    if not fault.startswith("cuda_"):
        return {}
    from ..kit import cuda
    from .devmem import ENV

    env = {ENV: "cuda"}
    if not os.environ.get(cuda.ENV) and cuda.runtime() is None:
        env[cuda.ENV] = os.path.join(REPO_DIR, "build", "cuda", "sim", "libcudart.so")
    return env


def one_run(binary, fault, clause, crashes, seed, limit, log=None):
    work = tempfile.mkdtemp(prefix="ttb-")
    env = dict(os.environ, DLCONFORM_FUZZ_CONSUMER="ref", DLCONFORM_REF_FAULT=fault,
               ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1", **device_env(fault))
    cmd = [binary, "-rss_limit_mb=2048", "-max_len=2200", "-timeout=20",
           "-dict=" + os.path.join("fuzz", "dlpack.dict"), "-seed=%d" % seed,
           "-max_total_time=%d" % limit, "-artifact_prefix=" + work + "/",
           os.path.join(work, "corpus"), os.path.join("fuzz", "corpus", "seeds")]
    os.mkdir(os.path.join(work, "corpus"))
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=REPO_DIR, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=limit + 60)
        err = proc.stderr.decode("latin-1")
    except subprocess.TimeoutExpired:
        err = ""
    secs = time.monotonic() - t0
    if log:
        with open(log, "w", encoding="latin-1") as f:
            f.write(err)
    found = any(n.startswith("crash-") for n in os.listdir(work))
    shutil.rmtree(work, ignore_errors=True)
    if not found:
        return None, "not found"
    m = re.search(r"^dlconform-oracle: ([A-Z]+-[0-9]+):", err, re.M)
    if m:
        return (secs, m.group(1)) if m.group(1) == clause else (None, "found as " + m.group(1))
    plain = re.search(r"AddressSanitizer: [A-Za-z-]+|deadly signal|runtime error", err)
    if plain and crashes:
        return secs, plain.group(0)
    return None, "found as " + (plain.group(0) if plain else "an unclassified crash")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--limit", type=int, default=60, help="seconds per run, and the bound")
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--binary", default=os.path.join("build", "fuzz", "consumer.asan"))
    ap.add_argument("--json", help="also write the figures here")
    ap.add_argument("--log-dir", help="keep each run's output here, as FAULT-RUN.log")
    args = ap.parse_args()
    if args.runs < 1 or args.limit < 1:
        ap.error("--runs and --limit must be positive")
    binary = os.path.join(REPO_DIR, args.binary)
    if args.log_dir:
        os.makedirs(args.log_dir, exist_ok=True)
    if not os.access(binary, os.X_OK):
        sys.exit("time_to_bug: %s is not built (make fuzz-build)" % args.binary)
    rows, bad = [], 0
    for name, clause, crashes, skipped in consumer_faults(args.fault):
        if skipped:
            print("%-34s %-7s skipped: %s" % (name, clause, skipped))
            rows.append({"fault": name, "clause": clause, "skipped": skipped})
            continue
        times, misses = [], []
        for i in range(args.runs):
            log = os.path.join(args.log_dir, "%s-%d.log" % (name, i)) if args.log_dir else None
            secs, how = one_run(binary, name, clause, crashes, 1000 + i, args.limit, log)
            if secs is None:
                misses.append(how)
                times.append(math.inf)
            else:
                times.append(secs)
        med = statistics.median(times)
        ok = med <= args.limit
        bad += not ok
        finite = [t for t in times if t != math.inf]
        print("%-34s %-7s median %6.2f s  [%s .. %s]  misses %d%s%s" % (
            name, clause, med, "%.2f" % min(finite) if finite else "-",
            "%.2f" % max(finite) if finite else "-", len(misses),
            " (%s)" % "; ".join(sorted(set(misses))) if misses else "", "" if ok else "  OVER"))
        rows.append({"fault": name, "clause": clause, "median_s": None if med == math.inf else med,
                     "seconds": [None if t == math.inf else t for t in times], "misses": misses,
                     "ok": ok})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"runs": args.runs, "limit_s": args.limit, "faults": rows}, f, indent=1)
    print("time_to_bug: %d fault(s) over %d s" % (bad, args.limit) if bad else
          "time_to_bug: every median within %d s" % args.limit)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
