"""CI mode of the fuzz targets (fuzz/README.md, "CI mode"): `make fuzz-ci` runs

    python3 -m dlconform fuzz-ci --target T --seconds S [--bin B] [--out reports/out]

Within S seconds of fuzzing (libFuzzer, ASan+UBSan build, no UI) it:
  1. runs rounds: a round ends at a crash; the crash is triaged at once and its dedup key set
     aside (DLCONFORM_FUZZ_IGNORE_FILE) so the next round looks for something else. Keys of
     fuzz/known/T.txt are set aside from the start. A plain crash on an input that breaks a
     must-refuse clause sets that whole clause aside; any other plain crash cannot be set
     aside in process: the run goes on, and ends early when one key comes back 3 times in a row;
  2. triages each crash by replaying it with DLCONFORM_FUZZ_TRIAGE=1 (triage.py): the clause
     is the oracle line's ("dlconform-oracle: CLAUSE: message"), or for a plain crash the
     input's ("dlconform-input: CLAUSE: why", fuzz/target_consumer.c);
  3. minimises each new finding (-minimize_crash=1, bounded per finding and in all), keeping the minimised input
     only when it still gives the same key, and writes a Python reproducer (repro.py);
  4. writes OUT/fuzz/T-summary.json and .md and merges one `crash` record per finding into
     OUT/results.json (created when absent; earlier fuzz records of T are replaced).
Exit status: 1 when a finding's key is not in the known-findings file, else 0; 2 on a usage
or build error.
"""
import argparse
import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

from ..records import Record
from ..runner import kill_group
from ..kit.check import breach
from .triage import triage_log
from .breaches import read_known
from .replay import target_env
from . import devmem

ARTIFACT_KINDS = ("crash", "leak", "timeout", "oom", "slow-unit")


def run_group(cmd, timeout, **kw):
    """subprocess.run in a session of its own: (returncode, stdout or None). libFuzzer starts
    processes of its own (-minimize_crash runs the target again, the symbolizer), so on a
    timeout, and on any way out of fuzz-ci (Ctrl-C, SIGTERM: see main), the whole group is
    killed, and nothing of a run outlives it. TimeoutExpired carries what stdout held."""
    p = subprocess.Popen(cmd, start_new_session=True, **kw)
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except subprocess.TimeoutExpired as e:
        kill_group(p)
        out, _ = p.communicate()
        e.stdout = out
        raise
    except BaseException:
        kill_group(p)
        raise


# An EXC finding that is more than the class of a refusal: CPython's C API contract broken.
EXC_BROKEN = re.compile(r"SystemError|without setting an exception")
AMBIGUOUS = "(ambiguous: "  # fuzz/oracle.h DLC_AMBIGUOUS
INVALID_ARGUMENT = "(invalid argument: "  # fuzz/oracle.h DLC_INVALID_ARGUMENT


#: the clauses whose "accepted ..." finding is malformed metadata imported (the consumer target's
#: refusal_clause: an extent that overflows or is negative, an item size of 0, NULL data for
#: elements). The suites feed such input as invalid and warn when it is imported (feeds="invalid",
#: suites/README.md, Grading): no clause says a consumer must refuse it, and dying on it is a
#: crash (a signal, not this finding). VER-08, VER-09 and CAP-04 name refusals: their level holds.
INVALID_INPUT = ("LAY-01", "LAY-09", "LAY-10", "DT-10")


def finding_level(clause, message, catalogue_level):
    """The level a finding is reported at: the clause's own (MUST when the catalogue has none),
    with three fuzz-specific exceptions below."""
    if clause == "EXC" and not EXC_BROKEN.search(message):
        # EXC is the fuzz label for a refusal's exception class (fuzz/README.md). The array
        # API phrases a Raises section's classes as a should (design_topics/exceptions.rst), so
        # an ordinary class is a SHOULD-level finding; SystemError or NULL without an
        # exception breaks the C API: MUST.
        return "SHOULD"
    if AMBIGUOUS in message or INVALID_ARGUMENT in message:
        # the target marks a breach the spec leaves ambiguous (fuzz/oracle.h, DLC_AMBIGUOUS:
        # a CPU export for stream=-1, a CPU dl_device with an id other than 0) or an invalid
        # argument accepted (DLC_INVALID_ARGUMENT: another stream for a CPU tensor); the
        # suites warn for such cases too (suites/README.md, Grading)
        return "SHOULD"
    if clause in INVALID_INPUT and message.startswith("accepted "):
        return "SHOULD"  # invalid input accepted, as the suites grade it (INVALID_INPUT)
    return catalogue_level or "MUST"


class Fuzz:
    def __init__(self, args):
        self.a = args
        self.dir = os.path.join(args.out, "fuzz")
        self.prefix = os.path.join(self.dir, args.target + "-")
        self.ignore = os.path.join(self.dir, args.target + ".ignore")
        self.log = os.path.join(self.dir, args.target + ".log")
        self.known = read_known(args.known)
        self.set_aside = list(self.known)
        self.findings = {}  # key -> finding dict
        self.execs = 0
        self.round_start = 0  # where the last round's part of the log begins
        self.written = []  # artifacts the last round wrote (its "Test unit written to" lines)
        self.fuzz_seconds = 0.0

    def env(self, ignore_file=None, triage=False):
        return target_env(self.a.consumer or self.a.target, self.a.producer, ignore_file or self.ignore, triage)

    def write_ignore(self, path, entries):
        with open(path, "w", encoding="utf-8") as f:
            f.write("# set aside by dlconform fuzz-ci (fuzz/oracle.h)\n")
            for k in entries:
                f.write(k + "\n")

    def replay(self, path, ignore_entries):
        tmp = path + ".ignore"
        self.write_ignore(tmp, ignore_entries)
        try:
            _, out = run_group([self.a.bin, "-runs=1", path], 120, env=self.env(tmp, triage=True),
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            out = out.decode("utf-8", "replace")
        except subprocess.TimeoutExpired as e:
            out = (e.stdout or b"").decode("utf-8", "replace") + "\nERROR: libFuzzer: timeout (replay)"
        finally:
            os.unlink(tmp)
        return out

    def artifacts(self):
        found = []
        for kind in ARTIFACT_KINDS:
            found += glob.glob(self.prefix + kind + "-*")
        return sorted(p for p in found if not p.endswith((".ignore", ".py")))

    def round(self, seconds):
        self.write_ignore(self.ignore, self.set_aside)
        corpus = self.a.corpus or os.path.join("build", "fuzz", "corpus-" + self.a.target)
        os.makedirs(corpus, exist_ok=True)
        cmd = [self.a.bin, "-rss_limit_mb=2048", "-max_len=2200", "-timeout=20", "-print_final_stats=1",
               "-max_total_time=%d" % max(1, int(seconds)), "-artifact_prefix=" + self.prefix, corpus]
        if os.path.isdir(self.a.seeds):
            cmd.append(self.a.seeds)
        if self.a.dict and os.path.exists(self.a.dict):
            cmd.insert(1, "-dict=" + self.a.dict)
        t0 = time.time()
        self.round_start = os.path.getsize(self.log) if os.path.exists(self.log) else 0
        with open(self.log, "a", encoding="utf-8") as logf:
            logf.write("\n### round: %s\n" % " ".join(cmd))
            logf.flush()
            try:
                rc, _ = run_group(cmd, seconds + 120, env=self.env(), stdout=logf, stderr=subprocess.STDOUT)
            except subprocess.TimeoutExpired:
                rc = 124
        self.fuzz_seconds += time.time() - t0
        tail = self.round_log()
        m = re.findall(r"stat::number_of_executed_units:\s*(\d+)", tail) or re.findall(r"^#(\d+)\s", tail, re.M)
        if m:
            self.execs += int(m[-1])
        self.written = re.findall(r"Test unit written to (\S+)", tail)
        return rc

    def round_log(self):
        """The log of the last round, whole: a library that prints much (a warning per input)
        can push the round's start, and libFuzzer's final stats, far from the end."""
        with open(self.log, "rb") as f:
            f.seek(self.round_start)
            return f.read().decode("utf-8", errors="replace")

    @staticmethod
    def must_refuse(context):
        """Whether a plain crash's input class can be set aside: a must-refuse clause the input
        breaks (dlconform-input), not a legal export (LAY-11), another device (DEV-07) or none."""
        return bool(context) and context not in ("LAY-11", "DEV-07", "*")

    def again(self, path, rounds):
        """A copy of an artifact libFuzzer wrote over in this round. Artifacts are named by the
        input's hash, so an input whose first finding is now set aside and that breaks another
        oracle is written to the same name again: it is a new finding with an input of its own
        (its own minimised input and reproducer), not "the target exited without a crash input"."""
        copy = "%s-again%d" % (path, rounds)
        shutil.copyfile(path, copy)
        return copy

    def run(self):
        os.makedirs(self.dir, exist_ok=True)
        for p in set(glob.glob(self.prefix + "*")) - {self.ignore, self.log}:
            if not p.endswith(("-summary.json", "-summary.md")) and os.path.isfile(p):
                os.unlink(p)
        if os.path.exists(self.log):
            os.unlink(self.log)
        seen, start, rounds, repeats, last = set(), time.time(), 0, 0, None
        while True:
            left = self.a.seconds - (time.time() - start)
            if (rounds and left < 1) or rounds >= self.a.max_rounds:
                break  # the first round always runs: a target that cannot start says so
            rounds += 1
            rc = self.round(left)
            new = [p for p in self.artifacts() if p not in seen]
            new += [self.again(p, rounds) for p in self.written if p in seen and p not in new and os.path.isfile(p)]
            if rc == 0 and not new:
                break
            if not new:  # the target did not start (import error, ...): not a finding
                print("fuzz-ci: %s: the fuzz target exited %d without a crash input; see %s"
                      % (self.a.target, rc, self.log), file=sys.stderr)
                for line in start_failure(self.round_log()):
                    print("fuzz-ci: %s: %s" % (self.a.target, line), file=sys.stderr)
                return 2
            stop = False
            for path in new:
                seen.add(path)
                t = triage_log(self.replay(path, self.set_aside))
                t.update(input=path, found_after=round(time.time() - start, 1))
                f = self.findings.get(t["key"])
                if f:  # a plain crash that could not be set aside; 3 hits in a row end the run
                    f["count"] += 1
                    if self.must_refuse(t["context"]) and t["context"] not in self.set_aside:
                        # the same crash from an input that breaks another must-refuse clause
                        # first (VER-08 before LAY-09, ...): set that clause aside too
                        self.set_aside.append(t["context"])
                        f.setdefault("contexts", [f["context"]]).append(t["context"])
                        repeats, last = 0, None
                        continue
                    repeats = repeats + 1 if t["key"] == last else 1
                    last = t["key"]
                    stop = stop or repeats >= 3
                    continue
                repeats, last = 0, None
                t["count"] = 1
                self.findings[t["key"]] = t
                if t["kind"] == "oracle":
                    self.set_aside.append(t["key"])
                elif self.must_refuse(t["context"]):
                    self.set_aside.append(t["context"])  # must-refuse inputs: not sent again
            if stop or not new:
                break
        self.rounds = rounds
        budget_end = time.time() + self.a.minimize_total  # all minimisation together
        for f in sorted(self.findings.values(), key=lambda x: x["found_after"]):
            f["new"] = f["key"] not in self.known and f["clause"] not in self.known  # bare clause
            if f["new"] and time.time() + self.a.minimize_seconds <= budget_end:
                self.minimize(f)
            self.repro(f)
        return self.report()

    def minimize(self, f):
        if self.a.minimize_seconds <= 0:
            return
        out = self.prefix + "min-" + os.path.basename(f["input"])[len(self.a.target) + 1:]
        others = [k for k in self.set_aside if k not in (f["key"], f.get("context"))]
        tmp = out + ".ignore"
        self.write_ignore(tmp, others)
        try:
            run_group([self.a.bin, "-minimize_crash=1", "-max_total_time=%d" % self.a.minimize_seconds,
                       "-timeout=20", "-exact_artifact_path=" + out, f["input"]], self.a.minimize_seconds + 60,
                      env=self.env(tmp), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            pass
        finally:
            os.unlink(tmp)
        if os.path.exists(out) and triage_log(self.replay(out, others))["key"] == f["key"]:
            f["minimized"] = out
        elif os.path.exists(out):
            os.unlink(out)

    def repro(self, f):
        from . import repro

        path = f.get("minimized") or f["input"]
        f["repro_file"] = path + ".py"
        if self.a.target == "validator":
            f["repro"] = "build/fuzz/dump_record %s; make fuzz-replay TARGET=validator FILE=%s" % (path, path)
            return
        with open(path, "rb") as fh:
            data = fh.read()
        finding = "%s: %s" % (f["clause"], f["message"])
        target = "producer-" + self.a.producer if self.a.producer else self.a.consumer or self.a.target
        try:
            known = os.path.abspath(self.a.known) if self.a.known and os.path.exists(self.a.known) else None
            text = repro.script(data, target, finding, os.path.basename(path), known,
                                None if f["kind"] == "oracle" else f["kind"])
        except Exception as e:  # a reproducer that cannot be written is reported, not fatal
            text = "# no reproducer: %s: %s\n" % (type(e).__name__, e)
        with open(f["repro_file"], "w", encoding="utf-8") as fh:
            fh.write(text)
        f["repro"] = text

    def report(self):
        from .. import catalogue

        try:
            cat = catalogue.load()
        except catalogue.CatalogueError:  # unreadable: every finding at MUST (Catalogue.level)
            cat = catalogue.Catalogue()
        records = []
        for f in sorted(self.findings.values(), key=lambda x: x["found_after"]):
            level = finding_level(f["clause"], f["message"], cat.level(f["clause"]))
            f["level"] = level
            records.append(Record(
                target=self.a.target, role="any" if self.a.target == "validator" else
                ("producer" if self.a.producer else "consumer"),
                clause=f["clause"], level=level, catalogue=cat,
                # an oracle breach of a SHOULD/MAY clause is a warn, as in the suites; a
                # signal or sanitizer report is a crash whatever the clause
                verdict="warn" if f["kind"] == "oracle" and breach(level) == "warn" else "crash",
                message="fuzz (%s): %s%s; key %s; input %s" % (
                    f["kind"], f["message"], "" if f["new"] else " (known finding)", f["key"],
                    f.get("minimized") or f["input"]),
                repro=f.get("repro", ""),
                test="fuzz:%s:%s" % (self.a.target, hashlib.sha1(f["key"].encode()).hexdigest()[:12]),
                duration=f["found_after"], evidence=f["evidence"]))
        new = [f for f in self.findings.values() if f["new"]]
        summary = {"target": self.a.target, "binary": self.a.bin, "seconds": self.a.seconds,
                   "fuzz_seconds": round(self.fuzz_seconds, 1), "rounds": self.rounds, "executions": self.execs,
                   "exec_per_s": round(self.execs / self.fuzz_seconds) if self.fuzz_seconds else 0,
                   "known_file": self.a.known if self.a.known and os.path.exists(self.a.known) else None,
                   "new": len(new),
                   "findings": [{k: f.get(k) for k in ("key", "clause", "level", "kind", "message", "new", "count",
                                                        "found_after", "input", "minimized", "repro_file", "evidence")}
                                for f in sorted(self.findings.values(), key=lambda x: x["found_after"])]}
        with open(os.path.join(self.dir, self.a.target + "-summary.json"), "w", encoding="utf-8") as fh:
            json.dump(summary, fh, indent=1)
        with open(os.path.join(self.dir, self.a.target + "-summary.md"), "w", encoding="utf-8") as fh:
            fh.write(render_md(summary))
        if not self.a.no_merge:
            spec = None if self.a.target == "validator" else self.a.producer or self.a.consumer or self.a.target
            merge_results(self.a.out, self.a.target, records, spec)
        for f in summary["findings"]:
            print("fuzz-ci: %s: %s %s [%s] %s" % (self.a.target, "NEW  " if f["new"] else "known", f["clause"],
                                                  f["kind"], f["key"]))
        print("fuzz-ci: %s: %d execs in %.0f s (%d/s), %d round(s), %d finding(s), %d new; summary %s" % (
            self.a.target, self.execs, self.fuzz_seconds, summary["exec_per_s"], self.rounds,
            len(self.findings), len(new), os.path.join(self.dir, self.a.target + "-summary.md")))
        if self.findings and not self.a.no_merge:  # as dlconform run says it
            from ..cli import recheck_line

            print("fuzz-ci: %s: each finding's reproducer, run again: %s --test %s" % (
                self.a.target, recheck_line(os.path.join(self.a.out, "results.json")),
                shlex.quote("fuzz:%s:*" % self.a.target)))
        return 1 if new else 0


# the last line of a Python exception as PyErr_Print writes it: "ModuleNotFoundError: No module named 'x'"
EXC_LINE = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::\s.*)?$")


def start_failure(log):
    """Why a target did not start, from its log: the exception Python printed last before
    pyhost's own lines (the import error of the library under test, ...), then those lines
    ("dlconform-fuzz: cannot import the consumer module (consumer 'x')"). Empty when neither."""
    lines = log.splitlines()
    said = [i for i, l in enumerate(lines) if l.startswith("dlconform-fuzz: ")]
    before = lines[:said[0]] if said else lines
    exc = [l for l in before if EXC_LINE.match(l)]
    return exc[-1:] + [lines[i] for i in said]


def render_md(s):
    lines = ["# fuzz-ci: %s" % s["target"], "",
             "%d executions in %.0f s (%d/s), %d round(s); %d finding(s), %d new (known: %s)." % (
                 s["executions"], s["fuzz_seconds"], s["exec_per_s"], s["rounds"], len(s["findings"]), s["new"],
                 s["known_file"] or "none"), ""]
    if s["findings"]:
        lines += ["| new | clause | level | kind | after (s) | key | reproducer |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for f in s["findings"]:
            lines.append("| %s | %s | %s | %s | %s | `%s` | `%s` |" % (
                "yes" if f["new"] else "known", f["clause"], f["level"], f["kind"], f["found_after"],
                f["key"].replace("|", "\\|"), f["repro_file"]))
        for f in s["findings"]:
            lines += ["", "<details><summary>%s</summary>" % f["key"].replace("<", "&lt;"), "", "```",
                      f["evidence"], "```", "", "</details>"]
    return "\n".join(lines) + "\n"


def merge_results(out, target, records, spec=None):
    """Replaces target's fuzz records in OUT/results.json (creating it when absent). Its
    `environment`, and the target's `versions` from dlconform target `spec` (None: no library,
    the validator), are read as `dlconform run` reads them, in subprocesses, when absent."""
    from ..report import json_report, write_all

    path = os.path.join(out, "results.json")
    if os.path.exists(path):
        doc = json_report.load(path)
        results = [r for r in doc["results"] if not str(r.get("test", "")).startswith("fuzz:%s:" % target)]
        targets, environment, run = doc.get("targets", {}), doc.get("environment", {}), doc.get("run", {})
    else:
        results, targets, environment, run = [], {}, {}, {"argv": sys.argv[1:]}
    results += records
    info = targets.setdefault(target, {"status": "ran", "reason": "fuzz-ci", "roles": sorted(
        {r["role"] for r in records}) or ["consumer"], "versions": {}})
    if not environment or (spec and not info.get("versions")):
        environment, versions = _described(spec, environment)
        info["versions"] = info.get("versions") or versions
    doc = json_report.build(targets, results, environment, run)
    write_all(out, doc)


def _described(spec, environment):
    """(environment, versions of spec) as cli.run reads them: environment.collect and the
    target's probe, each in a subprocess of this interpreter; `environment` kept when given."""
    from .. import environment as _environment
    from ..runner import child_env
    from ..targets.loader import probe

    env = child_env()
    versions = (probe(spec, env=env).get("versions") or {}) if spec else {}
    return environment or _environment.collect(env=env), versions


def parse(argv):
    ap = argparse.ArgumentParser(prog="dlconform fuzz-ci", description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="validator, numpy, torch, ref or a module (consumer target; "
                    "NAME@cuda: fed CUDA memory), or producer-NAME (producer-NAME@cuda: its CUDA tensors)")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--bin", default=None, help="fuzz binary (default build/fuzz/{validator,consumer}.asan)")
    ap.add_argument("--consumer", default=None, help="DLCONFORM_FUZZ_CONSUMER (default: the target)")
    ap.add_argument("--producer", default=None, help="DLCONFORM_FUZZ_PRODUCER (producer target)")
    ap.add_argument("--out", default=os.path.join("reports", "out"))
    ap.add_argument("--known", default=None, help="known-findings file (default fuzz/known/TARGET.txt)")
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--seeds", default=os.path.join("fuzz", "corpus", "seeds"))
    ap.add_argument("--dict", default=os.path.join("fuzz", "dlpack.dict"))
    ap.add_argument("--minimize-seconds", type=int, default=10)
    ap.add_argument("--minimize-total", type=int, default=None,
                    help="seconds for all minimisation together (default: the fuzzing time, at most 120)")
    ap.add_argument("--max-rounds", type=int, default=16)
    ap.add_argument("--no-merge", action="store_true", help="do not touch results.json")
    a = ap.parse_args(argv)
    if not a.seconds > 0 or a.max_rounds < 1:
        ap.error("--seconds must be above 0 and --max-rounds at least 1")
    if a.target != "validator":
        try:
            devmem.split_target(a.producer or a.consumer or a.target)
        except devmem.Unavailable as e:
            ap.exit(2, "fuzz-ci: %s\n" % e)
    if a.bin is None:
        kind = "validator" if a.target == "validator" else "producer" if a.producer else "consumer"
        a.bin = os.path.join("build", "fuzz", kind + ".asan")
    if a.minimize_total is None:
        a.minimize_total = int(min(120, max(a.minimize_seconds, a.seconds)))
    if a.known is None:
        a.known = os.path.join("fuzz", "known", a.target + ".txt")
    return a


def main(argv):
    a = parse(argv)
    if not os.access(a.bin, os.X_OK):
        print("fuzz-ci: no fuzz binary %s (make fuzz)" % a.bin, file=sys.stderr)
        return 2
    for sig in (signal.SIGTERM, signal.SIGHUP):  # unwind, so run_group kills the running group
        signal.signal(sig, _stop)
    try:
        return Fuzz(a).run()
    except KeyboardInterrupt:
        print("fuzz-ci: %s: interrupted; its fuzzer processes were stopped" % a.target, file=sys.stderr)
        return 130


def _stop(signum, frame):
    raise KeyboardInterrupt
