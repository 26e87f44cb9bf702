"""The exchange-overhead benchmark, `dlconform bench`: this module is the parent.

The parent never imports a framework. Each target is measured in a child process
(`python3 -m dlconform.bench --child SPEC ...`, bench/child.py) that prints one JSON line, so
a framework that crashes costs that target's figures only. `--repeats N` runs the whole set N times, targets
interleaved, each run in fresh children; a figure whose per-run medians differ by more than
NOISY (10 %) is marked noisy.

The timing loops are C (`_probe.bench`, probes/probe/bench.c). A figure is ns per iteration:
one exchange, or three for the `x3:` figures. Every figure is also a ratio to the no-op
baseline (an indirect call of an empty C function) measured in the same child, so ratios
are comparable across runs; nanoseconds are comparable only within one run on one machine.

`--suite` also measures the suite's own throughput (issue 22): the conformance suites run
once per target, one target at a time (`dlconform run --jobs 1` in a child), and the figure
is checks (result records) per second of that target's child, so a regression in the
suite's speed shows beside the exchange figures.
"""
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time

SCHEMA = "dlconform-bench/1"
NOISY = 0.10
DEFAULT_TARGETS = ("ref", "numpy", "torch", "tvm_ffi")
# ref's bounds, as ratios to the no-op baseline
REF_BOUNDS = (("xapi_dltensor", 5.0), ("xapi_managed", 6.0), ("xapi_managed_uncached", 40.0))
NOTE = ("Figures are comparable only within one run on one machine: nanoseconds depend on the "
        "CPU, its clock and the load; the ratios to the no-op baseline (measured in the same "
        "process) travel better.")

LABELS = {
    "noop": "no-op: indirect call of an empty C function (baseline)",
    "dlpack_legacy": "x.__dlpack__() + capsule release",
    "dlpack_versioned": "x.__dlpack__(max_version=(1, 3)) + capsule release",
    "xapi_lookup": "type(x).__dlpack_c_exchange_api__ lookup (table only)",
    "xapi_managed": "C API managed_tensor_from_py_object_no_sync + deleter, same tensor repeated",
    "xapi_managed_uncached": "C API managed export + deleter, cache bypassed (fresh struct)",
    "xapi_dltensor": "C API dltensor_from_py_object_no_sync",
    "xapi_stream": "C API current_work_stream(kDLCPU, 0)",
    "xapi_alloc": "C API managed_tensor_allocator float32 (8, 8) + deleter",
    "xapi_lookup_managed": "C API lookup + managed export + deleter",
}


def label(fid):
    if fid in LABELS:
        return LABELS[fid]
    if fid.startswith("x3:"):
        return "3 arguments: " + label(fid[3:])
    if fid.startswith("from_dlpack:"):
        return "%s.from_dlpack(x) + result release" % fid.split(":", 1)[1]
    return fid


def run_child(spec, python, env, batches, target_ms, warmup_ms, timeout=600):
    cmd = [python, "-m", "dlconform.bench", "--child", spec, "--batches", str(batches),
           "--target-ms", str(target_ms), "--warmup-ms", str(warmup_ms)]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              timeout=timeout, check=False, start_new_session=True)
    except subprocess.TimeoutExpired:
        return {"spec": spec, "status": "crashed", "reason": "timed out after %ds" % timeout}
    for line in reversed(proc.stdout.decode(errors="replace").splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    from ..targets.loader import describe_status

    tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
    return {"spec": spec, "status": "crashed",
            "reason": "%s: %s" % (describe_status(proc.returncode), " | ".join(tail)[-400:])}


def _stats(samples):
    q = statistics.quantiles(samples, n=4) if len(samples) >= 2 else [samples[0]] * 3
    med = statistics.median(samples)
    return med, (q[2] - q[0]) / med if med > 0 else 0.0


def aggregate(spec, runs):
    """One target's entry of `performance.targets` from its per-run child results."""
    good = [r for r in runs if r.get("status", "ran") == "ran" and "figures" in r]
    if not good:
        bad = runs[-1] if runs else {}
        return {"status": bad.get("status", "crashed"), "reason": bad.get("reason", "no run"),
                "versions": {}, "figures": {}}
    first = good[0]
    entry = {"status": "ran", "reason": "" if len(good) == len(runs) else
             "%d of %d runs failed: %s" % (len(runs) - len(good), len(runs),
                                            next(r.get("reason", "") for r in runs if r not in good)),
             "versions": first["versions"], "own_consumer": first.get("own_consumer"),
             "cache": first.get("cache", {}), "notes": first.get("notes", []), "runs": len(good),
             "figures": {}}
    for fid in first["figures"]:
        per = [r["figures"].get(fid, {}) for r in good]
        if not all("samples" in p for p in per):
            bad = next(p for p in per if "samples" not in p)
            entry["figures"][fid] = {"label": label(fid), "status": bad.get("status", "error"),
                                     "reason": bad.get("reason", "")}
            continue
        meds, spreads, ratios = [], [], []
        for r, p in zip(good, per):
            m, s = _stats(p["samples"])
            base = statistics.median(r["figures"]["noop"]["samples"])
            meds.append(m)
            spreads.append(s)
            ratios.append(m / base if base > 0 else None)
        drift = (max(meds) - min(meds)) / min(meds) if min(meds) > 0 else 0.0
        entry["figures"][fid] = {
            "label": label(fid), "status": "ok", "ns": statistics.median(meds),
            "spread": statistics.median(spreads),
            "min_ns": min(min(p["samples"]) for p in per), "max_ns": max(max(p["samples"]) for p in per),
            "ratio": statistics.median([x for x in ratios if x is not None] or [0.0]),
            "batch": per[0]["batch"], "batches": len(per[0]["samples"]),
            "run_medians": meds, "drift": drift, "noisy": len(meds) > 1 and drift > NOISY,
        }
    if entry["own_consumer"] == "ref":
        bounds = {}
        for fid, limit in REF_BOUNDS:
            f = entry["figures"].get(fid, {})
            if f.get("status") == "ok":
                bounds[fid] = {"max_ratio": limit, "ratio": f["ratio"], "ns": f["ns"],
                               "ok": f["ratio"] <= limit}
            else:
                bounds[fid] = {"max_ratio": limit, "ratio": None, "ns": None, "ok": False}
        entry["bounds"] = bounds
    return entry


def measure_all(specs, python, env, repeats, batches, target_ms, warmup_ms, say=None):
    runs = {s: [] for s in specs}
    for i in range(repeats):
        for spec in specs:
            if say:
                say("bench run %d/%d: %s" % (i + 1, repeats, spec))
            runs[spec].append(run_child(spec, python, env, batches, target_ms, warmup_ms))
            if runs[spec][-1].get("status") == "skipped":
                specs = [s for s in specs if s != spec]
    return runs


def build(runs, repeats, batches, target_ms, warmup_ms, started):
    targets = {spec: aggregate(spec, rs) for spec, rs in runs.items()}
    noop = [t["figures"]["noop"]["ns"] for t in targets.values()
            if t.get("figures", {}).get("noop", {}).get("status") == "ok"]
    return {
        "schema": SCHEMA, "note": NOTE,
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"platform": platform.platform(), "machine": platform.machine(),
                    "cpu": _cpu_model(), "cpus": os.cpu_count()},
        "method": {"repeats": repeats, "batches": batches, "batch_target_ms": target_ms,
                   "warmup_ms": warmup_ms, "noisy_threshold": NOISY,
                   "clock": "clock_gettime(CLOCK_MONOTONIC) around batches"},
        "baseline_ns": statistics.median(noop) if noop else None,
        "duration": round(time.time() - started, 3),
        "targets": targets,
    }


def suite_throughput(specs, python, env, tests=(), say=None):
    """{spec: {checks, seconds, checks_per_s, status, tests}}: one `dlconform run` per target,
    alone (nothing else of ours runs beside it), read back from its results.json."""
    import tempfile

    out = {}
    for spec in specs:
        with tempfile.TemporaryDirectory(prefix="dlc-suite-") as tmp:
            cmd = [python, "-m", "dlconform", "run", "--target", spec, "--out", tmp, "--jobs", "1", "-q"]
            for t in tests:
                cmd += ["--tests", t]
            if say:
                say("suite throughput: %s ..." % spec)
            p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            try:
                with open(os.path.join(tmp, "results.json")) as f:
                    doc = json.load(f)
            except (OSError, ValueError):
                lines = p.stdout.strip().splitlines()
                out[spec] = {"status": "failed", "reason": lines[-1] if lines else "exit %d" % p.returncode}
                continue
        t = doc.get("targets", {}).get(spec, {})
        checks = sum(1 for r in doc.get("results", []) if r.get("target") == spec)
        seconds = t.get("duration")
        if t.get("status") != "ran" or not seconds:
            out[spec] = {"status": t.get("status") or "failed", "reason": t.get("reason") or "no duration"}
            continue
        out[spec] = {"status": "ran", "checks": checks, "seconds": seconds, "tests": list(tests) or "all",
                     "checks_per_s": round(checks / seconds, 1)}
    return out


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def write(out, perf, environment, run_info):
    """Merges perf into OUT/results.json (kept when it is a conformance run's) and rewrites
    results.md, results.junit.xml and bench.svg. Returns the paths."""
    from .. import report as _report
    from ..report import bench_svg, json_report

    path = os.path.join(out, "results.json")
    doc = None
    if os.path.exists(path):
        try:
            doc = json_report.load(path)
        except (OSError, ValueError):
            doc = None
    if doc is None:
        doc = json_report.build({}, [], environment, run_info)
    doc["performance"] = perf
    paths = _report.write_all(out, doc)
    paths["svg"] = _report.atomic_write(os.path.join(out, "bench.svg"), bench_svg.render(perf))
    return paths


def cmd_bench(args, say):
    """The `bench` subcommand (cli.py): 0, 1 when a target crashed, 2 on a usage error."""
    from .. import environment as _environment
    from ..runner import child_env
    from ..targets.loader import quick_check

    out = os.path.abspath(args.out)
    os.makedirs(out, exist_ok=True)
    env = child_env()
    started = time.time()
    specs = list(dict.fromkeys(args.target)) or list(DEFAULT_TARGETS)
    runnable = []
    for spec in specs:
        why = quick_check(spec, args.python)
        if why:
            if args.target:
                say("target %r: %s" % (spec, why))
            continue
        runnable.append(spec)
    if not runnable:
        say("error: no target can be run")
        return 2
    runs = measure_all(runnable, args.python, env, args.repeats, args.batches, args.target_ms,
                       args.warmup_ms, say=None if args.quiet else say)
    perf = build(runs, args.repeats, args.batches, args.target_ms, args.warmup_ms, started)
    if args.suite:
        perf["suite"] = suite_throughput(runnable, args.python, env, args.suite_tests or (),
                                         say=None if args.quiet else say)
        perf["duration"] = round(time.time() - started, 3)
    run_info = {"argv": sys.argv[1:], "python": args.python, "started": datetime.datetime.fromtimestamp(
        started, datetime.timezone.utc).isoformat(timespec="seconds"), "duration": perf["duration"]}
    environment = _environment.collect(args.python, env=env)
    paths = write(out, perf, environment, run_info)
    if not args.quiet:
        from ..report.performance import summary_lines

        for line in summary_lines(perf):
            print(line)
        print("dlconform: wrote %s" % ", ".join(os.path.relpath(p) for p in paths.values()))
    crashed = [s for s, t in perf["targets"].items() if t["status"] == "crashed"]
    return 1 if crashed else 0
