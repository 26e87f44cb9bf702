"""`dlconform recheck`: run every finding's reproducer again, outside the suite, and say which
still reproduce.

A finding (fail, warn, crash or timeout of one test on one clause of one target, as
`dlconform report` groups them) carries the reproducer its check wrote. recheck writes each to
a folder of its own and runs it the way its first line says (`# run: [NAME=value ...]
PYTHONPATH=... PYTHON repro.py`), each in a process of its own, several at once; the library
is found where the run found it (recheck's PYTHONPATH and working folder follow the run line's). What the run
showed:
- `finding`: exit 1 with `REPRODUCED CLAUSE: ...` on the finding's clause (kit.check.reproduce);
- `died`: killed by a signal (a crash reproduces so);
- `timed out`: still running after --timeout (a timeout reproduces so);
- `passed`: exit 0, the check ran through (fixed, or the finding was flaky);
- `unsupported`: exit 0 saying the check does not apply here (another machine, another build);
- `undetermined`: exit 3, the check stopped on another clause before it reached this one;
- `broken`: anything else (the script could not run: dlconform's problem, never the library's),
  a script that says `NOT RUN` (exit 4: kit.check.EXIT_NOT_RUN) and a finding that is an import
  of a module of dlconform's or the suite's failing among them.
The first three reproduce the finding; the verdict is `reproduced` where the kind agrees too
(a crash that died, a fail that printed its line), `reproduced as KIND` where it does not.

`--standalone` runs the script the finding's bug report carries instead (report/bugreport.py:
the check's code with dlconform's modules embedded) in a folder where dlconform cannot be
imported, with dlconform's native module beside it where the target is ours (ref): it checks
that the report's reproducer stands alone. A finding whose check has no standalone form by
design (it needs another native module of dlconform's, a module other than the library, or
its interpreter's exit: repro.standalone_problem; a fuzz finding runs dlconform's oracles) is
`unsupported`, with that reason; a standalone script that says `NOT RUN` is `broken`.

A reproducer that is a rerun command (a generic target whose check could not be written out)
is run with its output folder one of ours (and RERUN_FACTOR times the limit), and reproduces
where that run records a finding on the same test and clause; a record of the run rather than
of a test (`<before TEST>`: a death between tests) where it records one like it again.

A fuzz finding (test `fuzz:TARGET:...`, merged into results.json by fuzz-ci) carries its Python
reproducer (fuzz/README.md, "Reproducers"), which ends the same way: an oracle's breach printed as
`REPRODUCED` reproduces the target's crash (its abort); a crash the sanitizer build reported and
the script, run without one, did not show is replayed by that build where this dlconform is a
clone that has it (fuzz/replay.py), else `unsupported`; the validator target's findings carry a
replay command, `unsupported` here too.

Exit status: 0 every finding reproduced; 1 some did not (each is listed); 2 a reproducer was
broken, or bad input (a results file that cannot be read, a bad flag).
"""
import argparse
import concurrent.futures
import fnmatch
import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from . import repro as _repro
from .kit.check import EXIT_FINDING, EXIT_NOT_RUN, EXIT_UNDETERMINED, MARK
from .report import atomic_write
from .report import bugreport as _bugreport
from .targets.loader import describe_status

#: what a run showed that reproduces a finding, and the verdicts each reproduces by kind
REPRODUCING = {"finding": ("fail", "warn"), "died": ("crash",), "timed out": ("timeout",)}
#: the test name of a fuzz finding's record (fuzz/README.md): fuzz:TARGET:KEYHASH
FUZZ_TEST = "fuzz:"
#: the seconds a reproducer may run (a timeout finding reproduces by running past them)
DEFAULT_TIMEOUT = 60.0
#: a rerun command runs the target's checks on a clause (or all of them) in a run of its own:
#: it may take this many times a script's limit
RERUN_FACTOR = 10
#: the literal output folder of a rerun command (repro.run_command)
_RERUN_OUT = '--out "$(mktemp -d)"'


class Outcome:
    """What one finding's reproducer did when it ran again."""

    def __init__(self, finding, seen, detail, seconds, script=None):
        self.finding, self.seen, self.detail, self.seconds, self.script = finding, seen, detail, seconds, script

    @property
    def reproduced(self):
        return self.seen in REPRODUCING

    @property
    def verdict(self):
        """reproduced, `reproduced as KIND`, not reproduced, unsupported, undetermined, or broken.
        Unsupported and undetermined say nothing of a fix: the check did not apply here, or
        stopped before it reached the finding's clause."""
        if self.seen in ("broken", "unsupported", "undetermined"):
            return self.seen
        if not self.reproduced:
            return "not reproduced"
        if self.finding.verdict in REPRODUCING[self.seen]:
            return "reproduced"
        if self.seen == "finding" and self.finding.test.startswith(FUZZ_TEST):
            return "reproduced"  # the fuzz target's crash is its oracle's abort: the script prints the breach
        return "reproduced as %s" % self.seen

    def as_dict(self):
        f = self.finding
        return {"target": f.target, "clause": f.clause, "test": f.test, "verdict": f.verdict,
                "recheck": self.verdict, "seen": self.seen, "detail": self.detail,
                "seconds": round(self.seconds, 3), "script": self.script}


# ---------------------------------------------------------------------------- one run
def _execute(argv, env, cwd, timeout):
    """(exit status or None on timeout, stdout, stderr, seconds); the process group is killed
    at the timeout, so a reproducer's children go with it."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    except OSError as e:
        return "cannot start %s: %s" % (argv[0], e), "", "", 0.0
    try:
        out, err = proc.communicate(timeout=timeout)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        rc = None
    return rc, out, err, time.monotonic() - start


def _last_line(text):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1].strip()[:300] if lines else ""


#: the message of a reproducer's finding that is an import failing (kit.check.reproduce:
#: "unexpected exception TYPE: message"), and the module it names
_IMPORT_FAILED = re.compile(r"unexpected exception (?:ImportError|ModuleNotFoundError): "
                            r"(?:cannot import name '([^']*)' from '([^']+)'|No module named '([^']+)')")


def _import_of_ours(line):
    """The module of dlconform's or the suite's whose import failed, where a finding's line says
    that (the script could not run: never the library's finding), else None."""
    m = _IMPORT_FAILED.search(line)
    if m is None:
        return None
    name = m.group(3) or "%s.%s" % (m.group(2), m.group(1))
    return name if _repro._module_file(name.split(".")[0]) else None


def _judge_script(finding, rc, out, err, timeout):
    """(seen, detail) of a script's run (the module's docstring)."""
    if isinstance(rc, str):
        return "broken", rc
    if rc is None:
        return "timed out", "still running after %g s" % timeout
    if rc < 0:
        return "died", "%s%s" % (describe_status(rc), (": " + _last_line(err)) if _last_line(err) else "")
    marks = [ln for ln in out.splitlines() if ln.startswith(MARK + " ")]
    if rc == EXIT_FINDING and marks:
        ours = _import_of_ours(marks[-1])
        if ours:
            return "broken", "it could not import %s (dlconform's problem, not the library's): %s" % (
                ours, marks[-1][:250])
        return "finding", marks[-1][:300]
    if rc == EXIT_NOT_RUN:
        return "broken", _last_line(out) or "exit %d" % rc
    if rc == 0:
        unsupported = [ln for ln in out.splitlines() if ln.startswith("UNSUPPORTED")]
        if unsupported:
            return "unsupported", unsupported[-1][:300]
        return "passed", _last_line(out) or "exit 0"
    if rc == EXIT_UNDETERMINED:
        return "undetermined", _last_line(out)
    return "broken", "exit %d: %s" % (rc, _last_line(err) or _last_line(out) or "no output")


def _judge_rerun(finding, rc, out, err, folder, timeout):
    """(seen, detail) of a rerun command's run, from the records of the run's results.json."""
    if isinstance(rc, str) or rc is None:
        return _judge_script(finding, rc, out, err, timeout)
    try:
        with open(os.path.join(folder, "out", "results.json"), encoding="utf-8") as f:
            records = json.load(f)["results"]
    except (OSError, ValueError, KeyError, TypeError):
        return "broken", "exit %d, and no results.json: %s" % (rc, _last_line(err) or _last_line(out))
    if finding.test.startswith("<"):  # a record of the run, not of a test (runner: "<before TEST>")
        mine = [r for r in records if str(r.get("test")).startswith("<") and r.get("clause") == finding.clause]
        if not mine:
            return "passed", "the rerun of the target recorded nothing like %s" % finding.test
    else:
        mine = [r for r in records if r.get("test") == finding.test and r.get("clause") == finding.clause]
    found = [r for r in mine if r.get("verdict") in _bugreport.FINDINGS]
    if found:
        worst = max((r["verdict"] for r in found), key=_bugreport.FINDINGS.index)
        seen = {"crash": "died", "timeout": "timed out"}.get(worst, "finding")
        return seen, "%s: %s" % (worst, (found[0].get("message") or "")[:250])
    if not mine:
        return "broken", "the rerun recorded nothing on %s %s" % (finding.test, finding.clause)
    return "passed", ", ".join(sorted({r["verdict"] for r in mine}))


def _native_beside(library, folder):
    """Copies dlconform's native module of `library` (ref: dlconform._ref) into folder; the
    reason when it cannot."""
    name = _bugreport.NATIVE_LIBRARY.get(library)
    if name is None:
        return None
    if library == "nanobind":
        return "nanobind's glue must be built beside the script (its bug report says how)"
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        return "%s is not built (make build)" % name
    shutil.copy(spec.origin, os.path.join(folder, os.path.basename(spec.origin)))
    return None


def _search_path(script_path, standalone):
    """A reproducer's PYTHONPATH: its run line's, then where the library was found when the
    suite ran (recheck's own PYTHONPATH and folder, as the run's were: a user's library beside
    them), never dlconform's own folders for a standalone script."""
    from . import HARNESS_DIR, SUITES_DIR

    ours = {os.path.realpath(HARNESS_DIR), os.path.realpath(SUITES_DIR)}
    # the caller's entries as absolute paths: a script runs in a folder of its own
    parts = (script_path or "").split(os.pathsep) + [
        os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    parts.append(os.getcwd())
    kept = [p for p in parts if p and not (standalone and os.path.realpath(p) in ours)]
    return os.pathsep.join(dict.fromkeys(kept))


def run_one(finding, folder, timeout, standalone=False):
    """Runs the finding's reproducer in `folder` (made here) and returns its Outcome."""
    os.makedirs(folder, exist_ok=True)
    text = finding.repro
    if not text:
        return Outcome(finding, "broken", "the finding has no reproducer", 0.0)
    if not text.startswith(_repro.RUN_PREFIX):
        if _RERUN_OUT not in text and finding.test.startswith(FUZZ_TEST):  # the validator target's
            return Outcome(finding, "unsupported", "a replay command, not a script: %s" % _last_line(text), 0.0)
        if standalone:
            return Outcome(finding, "broken", "a rerun command, not a script: nothing stands alone", 0.0)
        if _RERUN_OUT not in text:
            return Outcome(finding, "broken", "not a reproducer recheck can run: %s" % _last_line(text), 0.0)
        command = text.replace(_RERUN_OUT, "--out %s" % shlex.quote(os.path.join(folder, "out")))
        path = os.path.join(folder, "rerun.sh")
        atomic_write(path, command + "\n")
        limit = timeout * RERUN_FACTOR
        rc, out, err, secs = _execute(["/bin/sh", path], dict(os.environ), folder, limit)
        seen, detail = _judge_rerun(finding, rc, out, err, folder, limit)
        return Outcome(finding, seen, detail, secs, path)
    parsed = _repro.run_line(text)
    if parsed is None or not parsed[1]:
        return Outcome(finding, "broken", "its first line is no run line: %s" % text.split("\n", 1)[0][:200], 0.0)
    assigned, argv = parsed
    env = dict(os.environ)
    if standalone:
        script, why, by_design = _bugreport.standalone_form(finding, _bugreport.library_of(finding.target))
        if script is None:  # a check that needs a native module of ours (or fuzz's oracles) has no standalone form
            return Outcome(finding, "unsupported" if by_design else "broken", "no standalone script: %s" % why, 0.0)
        problem = _native_beside(_bugreport.library_of(finding.target), folder)
        if problem:
            return Outcome(finding, "broken", problem, 0.0)
        text = script
        assigned.pop("PYTHONPATH", None)  # dlconform must not be importable: the script stands alone
    env.update(assigned)
    env["PYTHONPATH"] = _search_path(assigned.get("PYTHONPATH"), standalone)
    path = os.path.join(folder, _repro.script_name(argv))
    atomic_write(path, text)
    rc, out, err, secs = _execute(argv, env, folder, timeout)
    seen, detail = _judge_script(finding, rc, out, err, timeout)
    return Outcome(finding, seen, detail, secs, path)


# ---------------------------------------------------------------------------- all of them
def recheck(findings, work, timeout=DEFAULT_TIMEOUT, jobs=1, standalone=False, progress=None):
    """The Outcomes of the findings' reproducers, in the findings' order, `jobs` at once,
    each in a folder of its own under `work`."""
    def one(i_finding):
        i, f = i_finding
        outcome = run_one(f, os.path.join(work, "%03d-%s" % (i, f.name)), timeout, standalone)
        if progress is not None:
            progress(outcome)
        return outcome

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, enumerate(findings)))


def counts(outcomes):
    out = {}
    for o in outcomes:
        key = "reproduced" if o.reproduced else o.verdict
        out[key] = out.get(key, 0) + 1
    return out


def exit_status(outcomes):
    """2 when a reproducer could not run, 1 when one no longer reproduces (fixed or flaky),
    else 0: unsupported and undetermined ones tell neither."""
    if any(o.verdict == "broken" for o in outcomes):
        return 2
    return 1 if any(o.verdict == "not reproduced" for o in outcomes) else 0


def summary(outcomes):
    c = counts(outcomes)
    told = "".join(", %d %s" % (c[k], k) for k in ("unsupported", "undetermined") if c.get(k))
    return "%d findings: %d reproduced, %d not reproduced, %d broken%s" % (
        len(outcomes), c.get("reproduced", 0), c.get("not reproduced", 0), c.get("broken", 0), told)


def markdown(outcomes, results_path, standalone):
    rows = ["# Recheck of %s" % results_path, "",
            "Each finding's %sreproducer, run again outside the suite: %s." % (
                "standalone " if standalone else "", summary(outcomes)), "",
            "| recheck | target | clause | test | verdict | what the run showed |",
            "|---|---|---|---|---|---|"]
    for o in outcomes:
        f = o.finding
        rows.append("| %s | %s | %s | %s | %s | %s: %s |" % (
            o.verdict, f.target, f.clause, f.test.replace("|", "\\|"), f.verdict, o.seen,
            o.detail.replace("|", "\\|").replace("\n", " ")))
    return "\n".join(rows) + "\n"


# ---------------------------------------------------------------------------- the command
def build_parser():
    p = argparse.ArgumentParser(prog="dlconform recheck", description=(
        "Run every finding's reproducer of a results.json again, each in a process of its own, and say "
        "which still reproduce. Exit 0: all reproduced; 1: some did not; 2: a reproducer broke, or bad input."))
    p.add_argument("--results", default=_bugreport.DEFAULT_RESULTS, metavar="FILE",
                   help="results.json of a run (default: reports/out/results.json)")
    p.add_argument("--target", metavar="T", help="only this target's findings (as in results.json)")
    p.add_argument("--clause", metavar="GLOB", help="only findings on these clauses (a glob: 'LAY-*')")
    p.add_argument("--test", metavar="GLOB", help="only findings of these tests (a glob of the test's id: "
                   "'test_layout.py::*')")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                   help="seconds one reproducer may run (default %g; a timeout finding reproduces by running "
                        "past them)" % DEFAULT_TIMEOUT)
    p.add_argument("--jobs", "-j", type=int, default=min(4, os.cpu_count() or 1), metavar="N",
                   help="reproducers at once (default: the CPU count, at most 4)")
    p.add_argument("--standalone", action="store_true",
                   help="run the standalone script each finding's bug report carries (no dlconform importable)")
    p.add_argument("--out", metavar="DIR",
                   help="write recheck.json and recheck.md there, and keep each reproducer's folder under DIR/runs")
    p.add_argument("-q", "--quiet", action="store_true", help="only the summary line")
    return p


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.timeout <= 0 or args.jobs < 1:
        parser.error("--timeout and --jobs must be positive")
    try:
        results, found = _bugreport.read_findings(args.results, args.target, args.clause)
        problem = _bugreport.selection_problem(results, args.results, args.target, args.clause)
    except _bugreport.BadResults as e:
        problem = str(e)
    if problem is not None:
        print("dlconform recheck: %s" % problem, file=sys.stderr)
        return 2
    if args.test:
        found = [f for f in found if fnmatch.fnmatchcase(f.test, args.test)]
    if not found:
        print("dlconform recheck: no findings%s in %s: nothing to rerun" % (
            "" if not (args.target or args.clause or args.test) else " of the selection", args.results))
        return 0
    if args.out:
        work = os.path.join(os.path.abspath(args.out), "runs")
    else:
        work = tempfile.mkdtemp(prefix="dlconform-recheck-")

    def progress(o):
        if not args.quiet:
            f = o.finding
            print("%-16s %s %s %s (%s; %s: %s)" % (o.verdict, f.target, f.clause, f.test, f.verdict, o.seen,
                                                   o.detail[:160]), flush=True)

    outcomes = []
    try:
        if args.out and os.path.isdir(work):
            shutil.rmtree(work)
        outcomes = recheck(found, work, args.timeout, args.jobs, args.standalone, progress)
        if args.out:
            atomic_write(os.path.join(args.out, "recheck.json"), json.dumps(
                {"results": os.path.abspath(args.results), "standalone": args.standalone, "timeout": args.timeout,
                 "summary": counts(outcomes), "findings": [o.as_dict() for o in outcomes]}, indent=1) + "\n")
            atomic_write(os.path.join(args.out, "recheck.md"), markdown(outcomes, args.results, args.standalone))
    except KeyboardInterrupt:
        print("dlconform recheck: interrupted", file=sys.stderr)
        return 130
    finally:
        if not args.out:
            shutil.rmtree(work, ignore_errors=True)
    print("dlconform recheck: %s%s" % (summary(outcomes), "; %s/recheck.md" % args.out if args.out else ""))
    return exit_status(outcomes)
