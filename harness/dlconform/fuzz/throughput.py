"""Exec/s of the consumer target against its two baselines.

    PYTHONPATH=harness /usr/bin/python3 -m dlconform.fuzz.throughput [--engine libfuzzer|afl|both] [--rounds 5]
        [--runs 5000000] [--seconds 30] [--core 1] [--consumer numpy] [--corpus DIR ...]

Targets (build/fuzz/, `make fuzz-build`): pyempty (Python start-up, empty body: the empty
harness), pybase (one fixed legacy float32[4] capsule per input through from_dlpack, no
decoding, no oracles) and consumer (the consumer target). Every run of every target gets the
same engine settings, pinned with taskset to one core, in rounds (pyempty, pybase, consumer,
pyempty, ...), so that load from elsewhere hits all three alike; medians are reported with
their range.
  libFuzzer (T.fast, no sanitizers): fuzz-ci's flags (-rss_limit_mb=2048 -max_len=2200
    -timeout=20 -dict=fuzz/dlpack.dict) and -runs=RUNS, a fresh empty output corpus plus
    the --corpus directories (default fuzz/corpus/seeds), DLCONFORM_FUZZ_IGNORE_FILE =
    fuzz/known/CONSUMER.txt (as fuzz-ci sets known findings aside). Each target keeps its own
    mutators: the consumer its structure-aware LLVMFuzzerCustomMutator, the baselines
    libFuzzer's. Two figures: "cpu", executions per CPU second of the process after start-up
    ((units - units of a -runs=1 run) / (CPU - CPU of that run), so load elsewhere does not
    count), and "wall", the same per second of elapsed time.
  AFL++ (T.afl, persistent mode, shared-memory input): afl-fuzz -V SECONDS -t 20000 -m none
    -i fuzz/corpus/seeds -x fuzz/dlpack.dict with AFL_CUSTOM_MUTATOR_LIBRARY=dlc_mutator.so
    for all three targets, afl-fuzz and its target on the same core (AFL_NO_AFFINITY=1).
    "wall": execs_done / run_time of fuzzer_stats; "cpu": execs_done per CPU second of
    afl-fuzz and its descendants.
The consumer's input mix (accepted / refused / set aside, DLCONFORM_FUZZ_STATS) is printed
too: set-aside inputs break a must-refuse clause the known list sets aside as a whole
(fuzz/known/numpy.txt: LAY-01, LAY-09, LAY-10) and are not sent, exactly as in fuzz-ci.
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from .. import REPO_DIR

TARGETS = ("pyempty", "pybase", "consumer")


def env_for(args):
    env = dict(os.environ, DLCONFORM_FUZZ_CONSUMER=args.consumer, DLCONFORM_FUZZ_STATS="1")
    known = os.path.join("fuzz", "known", args.consumer + ".txt")
    if os.path.exists(known):
        env["DLCONFORM_FUZZ_IGNORE_FILE"] = known
    return env


def libfuzzer_run(args, binary, runs):
    out = tempfile.mkdtemp(prefix="throughput-")
    try:
        cmd = ["taskset", "-c", str(args.core), binary, "-rss_limit_mb=2048", "-max_len=2200",
               "-timeout=20", "-dict=fuzz/dlpack.dict", "-runs=%d" % runs,
               "-print_final_stats=1", out] + args.corpus
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, env=env_for(args), stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        err = p.stderr.read().decode("latin-1")
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    units = re.search(r"stat::number_of_executed_units:\s+(\d+)", err)
    mix = re.search(r"dlconform-fuzz: consumer .*", err)
    if not units:
        sys.exit("throughput: %s failed:\n%s" % (binary, err[-3000:]))
    return int(units.group(1)), ru.ru_utime + ru.ru_stime, wall, mix.group(0) if mix else ""


def afl_run(args, binary):
    out = tempfile.mkdtemp(prefix="throughput-afl-")
    env = env_for(args)
    env.update(AFL_NO_UI="1", AFL_SKIP_CPUFREQ="1", AFL_NO_AFFINITY="1",
               AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES="1",
               AFL_CUSTOM_MUTATOR_LIBRARY=os.path.abspath(os.path.join(args.bin_dir,
                                                                        "dlc_mutator.so")))
    try:
        cmd = ["taskset", "-c", str(args.core), "afl-fuzz", "-V", str(args.seconds), "-t",
               "20000", "-m", "none", "-i", "fuzz/corpus/seeds", "-o", out, "-x",
               "fuzz/dlpack.dict", "--", binary]
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read().decode("latin-1")
        _, status, ru = os.wait4(p.pid, 0)
        stats = {}
        try:
            with open(os.path.join(out, "default", "fuzzer_stats")) as f:
                for line in f:
                    k, _, v = line.partition(":")
                    stats[k.strip()] = v.strip()
        except OSError:
            sys.exit("throughput: afl-fuzz on %s failed:\n%s" % (binary, err[-3000:]))
    finally:
        shutil.rmtree(out, ignore_errors=True)
    done = int(stats["execs_done"])
    run_time = int(stats.get("run_time") or 0) or \
        (int(stats["last_update"]) - int(stats["start_time"]))
    return done / max(run_time, 1), done / (ru.ru_utime + ru.ru_stime), stats.get("stability", "?")


def summary(values):
    v = sorted(values)
    return statistics.median(v), v[0], v[-1]


def report(title, table):
    print(title)
    med = {}
    for t, rows in table.items():
        for kind in ("cpu", "wall"):
            m, lo, hi = summary([r[kind] for r in rows])
            med[(t, kind)] = m
            extra = rows[-1].get("note", "") if kind == "cpu" else ""
            print("  %-9s %-4s %10.0f  [%10.0f .. %10.0f]  n=%d  %s" % (t, kind, m, lo, hi,
                                                                       len(rows), extra))
    for kind in ("cpu", "wall"):
        c = med.get(("consumer", kind))
        if c:
            print("  consumer / pyempty (%s): %.1f%%   consumer / pybase (%s): %.1f%%" % (
                kind, 100 * c / med[("pyempty", kind)], kind, 100 * c / med[("pybase", kind)]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--engine", choices=("libfuzzer", "afl", "both"), default="both")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=5000000, help="libFuzzer -runs per run")
    ap.add_argument("--seconds", type=int, default=30, help="AFL++ -V per run")
    ap.add_argument("--core", type=int, default=1)
    ap.add_argument("--consumer", default="numpy")
    ap.add_argument("--corpus", nargs="*", default=[os.path.join("fuzz", "corpus", "seeds")])
    ap.add_argument("--bin-dir", default=os.path.join("build", "fuzz"))
    args = ap.parse_args()
    os.chdir(REPO_DIR)
    print("throughput: core %d, consumer %s, %s" % (args.core, args.consumer,
                                                   time.strftime("%Y-%m-%d %H:%M")))
    if args.engine in ("libfuzzer", "both"):
        bins = {t: os.path.join(args.bin_dir, t + ".fast") for t in TARGETS}
        start = {}
        for t, b in bins.items():
            runs = [libfuzzer_run(args, b, 1) for _ in range(3)]
            start[t] = [statistics.median(r[i] for r in runs) for i in range(3)]
        table = {t: [] for t in TARGETS}
        for _ in range(args.rounds):
            for t, b in bins.items():
                units, cpu, wall, mix = libfuzzer_run(args, b, args.runs)
                table[t].append({"cpu": (units - start[t][0]) / (cpu - start[t][1]),
                                 "wall": (units - start[t][0]) / (wall - start[t][2]),
                                 "note": mix})
        report("libFuzzer, -runs=%d, corpus %s:" % (args.runs, " ".join(args.corpus)), table)
    if args.engine in ("afl", "both"):
        table = {t: [] for t in TARGETS}
        for _ in range(args.rounds):
            for t in TARGETS:
                wall, cpu, stability = afl_run(args, os.path.join(args.bin_dir, t + ".afl"))
                table[t].append({"cpu": cpu, "wall": wall, "note": "stability " + stability})
        report("AFL++ persistent, -V %d, seeds fuzz/corpus/seeds:" % args.seconds, table)


if __name__ == "__main__":
    main()
