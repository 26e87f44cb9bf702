"""`python3 -m dlconform run ...`: exit 0 when nothing fails, 1 on fail/crash/timeout, 2 on a
usage error or when no target can be run."""
import argparse
import concurrent.futures
import datetime
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

from . import SUITES_DIR, __version__
from . import catalogue as _catalogue
from . import environment as _environment
from . import known as _known
from . import repro as _repro
from . import report as _report
from .records import Record
from .runner import Runner, SharedZygote, child_env, merge_lanes, safe_name
from .device_files import DEVICE_FILES, DEVICE_TESTS  # noqa: F401 - DEVICE_FILES: cli's name for the tests
from .kit.check import FAILING, HARNESS_ERROR, VERDICTS
from .targets.loader import BUILTIN, probe

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
DEFAULT_OUT = os.path.join("reports", "out")


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, "dlconform: error: %s (see `python3 -m dlconform %s--help`)\n"
                  % (message, "run " if self.prog.endswith(" run") else ""))


def build_parser():
    p = _Parser(prog="dlconform", description="DLPack conformance suite.")
    p.add_argument("--version", action="version", version="dlconform %s" % __version__)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    r = sub.add_parser("run", help="run the suites against targets", prog="dlconform run")
    r.add_argument("--target", action="append", default=[], metavar="T",
                   help="target spec (repeatable): ref, ref:fault=NAME, numpy, torch, a module with "
                        "from_dlpack, module:attr or path/file.py:attr; NAME@cuda for a library's CUDA "
                        "tensors (torch@cuda, cupy@cuda, jax@cuda, mylib@cuda). Default: every built-in "
                        "target that can be imported.")
    r.add_argument("--out", default=DEFAULT_OUT, metavar="DIR", help="output folder (default: reports/out)")
    r.add_argument("--clause", action="append", default=None, metavar="GLOB",
                   help="only the checks of a clause matching this glob (e.g. 'CAP-*', in any case; a check selected "
                        "still records every clause it judges); repeat or separate with commas")
    r.add_argument("--timeout", type=_positive, default=None, metavar="SECONDS",
                   help="per-test limit (default 30, and 30 per 20 examples with --examples)")
    r.add_argument("--examples", type=_examples, default=None, metavar="N",
                   help="draw N examples in every property exploration (strided views, high ndim, views "
                        "imported, CUDA views) instead of each check's own bound (12-20): a deeper search, "
                        "for a CI job that fuzzes; a finding still shrinks to one example its reproducer runs")
    r.add_argument("--seed", type=_seed, default=None, metavar="S",
                   help="mix S into every exploration's seed: other examples than the default run's (a CI "
                        "job can pass its run number)")
    r.add_argument("--target-timeout", type=_positive, default=3600.0, metavar="SECONDS",
                   help="wall limit per target (default 3600)")
    r.add_argument("--max-restarts", type=int, default=100, metavar="N",
                   help="restarts of a target's child after crashes (default 100)")
    r.add_argument("--suites", default=SUITES_DIR, metavar="DIR", help="the suites folder (default: <repo>/suites)")
    r.add_argument("--tests", action="append", default=None, metavar="FILE",
                   help="run only this test file of the suites folder, e.g. test_layout.py (repeatable)")
    r.add_argument("--device", choices=sorted(DEVICE_TESTS), default=None,
                   help="judge device tensors: the targets' variants on DEVICE (ref... -> ref@DEVICE, a module "
                        "with from_dlpack -> mylib@DEVICE; default: every built-in target that has one) on the "
                        "device checks; exits 2 when no such device is here")
    r.add_argument("--python", default=sys.executable, metavar="EXE", help="interpreter for the children")
    r.add_argument("--jobs", "-j", type=_jobs, default=None, metavar="N",
                   help="children at once: each target's tests are shared by N lanes (harness/README.md, "
                        "\"Lanes\"; default: the CPU count, at most 4)")
    r.add_argument("--known", metavar="FILE", help="known failures (harness/dlconform/known.py): findings it lists "
                   "are reported as known and do not make the run exit 1")
    r.add_argument("--write-known", metavar="FILE", help="write the run's findings as a known-failures file")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    b = sub.add_parser("bench", help="measure the exchange overhead (harness/dlconform/bench/)",
                       prog="dlconform bench")
    b.add_argument("--target", action="append", default=[], metavar="T",
                   help="target spec (repeatable), as for run. Default: ref, numpy, torch, tvm_ffi when importable")
    b.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help="output folder; an existing results.json gets a `performance` key (default: reports/out)")
    b.add_argument("--repeats", type=int, default=5, metavar="N",
                   help="runs of the whole set; figures whose run medians differ by > 10%% are noisy (default 5)")
    b.add_argument("--batches", type=int, default=31, metavar="N", help="timed batches per figure (default 31)")
    b.add_argument("--target-ms", type=_positive, default=1.0, metavar="MS", help="time per batch (default 1)")
    b.add_argument("--warmup-ms", type=float, default=20.0, metavar="MS", help="warm-up per figure (default 20)")
    b.add_argument("--python", default=sys.executable, metavar="EXE", help="interpreter for the children")
    b.add_argument("--suite", action="store_true",
                   help="also measure the suite's throughput: checks per second, each target run alone")
    b.add_argument("--suite-tests", action="append", default=None, metavar="FILE",
                   help="with --suite: only this test file of the suites (repeatable)")
    b.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    m = sub.add_parser("merge", help="merge result files into one matrix (matrix.json, MATRIX.md, index.html)",
                       prog="dlconform merge")
    m.add_argument("inputs", nargs="+", metavar="FILE",
                   help="results.json, a run-failure record or a matrix.json; TIER=FILE or TIER@MACHINE=FILE labels it")
    m.add_argument("--out", required=True, metavar="DIR", help="output folder")
    m.add_argument("-q", "--quiet", action="store_true", help="no summary line")
    # commands whose own parsers read the rest of the line (`dlconform COMMAND --help`)
    for name, helptext in _PASSTHROUGH.items():
        sub.add_parser(name, help=helptext, prog="dlconform " + name, add_help=False)
    return p


#: command -> (module, its help line): each parses its own arguments
_PASSTHROUGH = {
    "matrix": "every Debian tier and the host run and merged into reports/matrix/ (make matrix; --publish "
              "re-renders)",
    "fuzz-ci": "fuzz a consumer or producer for a set time, triage, reproducers (make fuzz-ci; fuzz/README.md)",
    "fuzz-repro": "the Python reproducer script of one fuzz input",
    "report": "one Markdown bug report per finding, with a reproducer that needs no dlconform",
    "recheck": "run every finding's reproducer again and say which still reproduce",
}
_PASSTHROUGH_MODULES = {"matrix": ".matrix.run", "fuzz-ci": ".fuzz.ci", "fuzz-repro": ".fuzz.repro",
                        "report": ".report.bugreport", "recheck": ".recheck"}


def _positive(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError("not a number: %r" % text)
    if not v > 0:
        raise argparse.ArgumentTypeError("must be > 0: %r" % text)
    return v


def recheck_line(results):
    """The command that reruns the findings' reproducers of `results` (dlconform recheck), from
    any folder: absolute paths; from a checkout it puts the harness folder before the caller's
    PYTHONPATH (where the library may be), as an installed dlconform needs not."""
    from . import HARNESS_DIR, PACKAGE_DIR, SUITES_DIR

    checkout = not SUITES_DIR.startswith(PACKAGE_DIR + os.sep)
    return "%s%s -m dlconform recheck --results %s" % (
        "PYTHONPATH=%s\"%s\" " % (shlex.quote(os.path.abspath(HARNESS_DIR)), _repro.CALLERS_PATH) if checkout else "",
        shlex.quote(sys.executable), shlex.quote(os.path.abspath(results)))


def _display(path):
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def _say(msg):
    print("dlconform: %s" % msg, file=sys.stderr, flush=True)


class _Sink:
    """results.jsonl as records arrive; safe to call from the --jobs worker threads."""

    def __init__(self, path):
        self.f = open(path, "w", encoding="utf-8")
        self.lock = threading.Lock()

    def __call__(self, rec):
        line = json.dumps(rec, default=str) + "\n"
        with self.lock:
            self.f.write(line)
            self.f.flush()

    def close(self):
        self.f.close()


class _Progress:
    """Tests begun per running target and the time elapsed. On a terminal: one line rewritten in
    place; elsewhere (CI logs): a line every `every` seconds at most. Safe from the --jobs
    worker threads."""

    def __init__(self, stream=None, every=10.0):
        self.stream = stream or sys.stdout
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.every = every
        self.started = time.monotonic()
        self.state = {}  # spec -> {lane: (begun, total)}
        self.last = 0.0
        self.lock = threading.Lock()
        self.shown = False

    def _line(self):
        parts = []
        for spec, lanes in self.state.items():
            begun = sum(b for b, _ in lanes.values())
            total = max((t for _, t in lanes.values() if t is not None), default=None)
            parts.append("%s %d/%s" % (spec, begun, total if total is not None else "?"))
        return "dlconform: %s; %ds" % (", ".join(parts), time.monotonic() - self.started)

    def __call__(self, spec, begun, total, lane=0):
        with self.lock:
            self.state.setdefault(spec, {})[lane] = (begun, total)
            now = time.monotonic()
            if self.tty:
                self.stream.write("\r\033[K" + self._line()[:200])
                self.shown = True
            elif now - self.last >= self.every:
                self.stream.write(self._line() + "\n")
                self.last = now
            else:
                return
            self.stream.flush()

    def done(self, spec, text):
        """A target finished: its summary line, in place of the progress line."""
        with self.lock:
            self.state.pop(spec, None)
            self.stream.write(("\r\033[K" if self.tty and self.shown else "") + text + "\n")
            self.shown = False
            self.stream.flush()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _at_least_one(what, flag):
    """An argparse type: a whole number of `what`, 1 or more (`flag` named when it is not)."""
    def parse(text):
        try:
            n = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError("expected a whole number of %s, got %r" % (what, text))
        if n < 1:
            raise argparse.ArgumentTypeError("%s must be at least 1, got %d" % (flag, n))
        return n
    return parse


_examples = _at_least_one("examples", "--examples")
_jobs = _at_least_one("jobs", "--jobs")


def _seed(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("expected an integer seed, got %r" % text)


def _unmatched_clauses(suites, globs):
    """The --clause globs that match no clause id of the suites' catalogue (none when the
    catalogue is absent: nothing to check against)."""
    return _catalogue.Catalogue.load(os.path.join(suites, "clauses.json")).unmatched(globs)


#: what the children's interpreter must import, and what to do when it cannot
_NEEDS = (("pytest", "install pytest for it (`PYTHON -m pip install pytest`; Debian's python3: apt-get install "
                     "python3-pytest)"),
          ("hypothesis", "install hypothesis for it (`PYTHON -m pip install hypothesis`; Debian's python3: apt-get "
                         "install python3-hypothesis)"),
          ("dlconform._probe", "run `make build` in the repository (or `pip install .`)"),
          ("dlconform._ref", "run `make build` in the repository (or `pip install .`)"))


def _environment_problem(python, env):
    """Why `python` cannot run the suites (a module it cannot import: pytest, hypothesis,
    dlconform's C extensions built for another Python), with what to do; "" when it can. This is
    the environment's fault, never a library's: the run stops before any target."""
    code = ("import importlib, sys\nfor n in %r:\n    try:\n        importlib.import_module(n)\n"
            "    except Exception as e:\n        print(n + ': ' + type(e).__name__ + ': ' + str(e).splitlines()[0]"
            " if str(e) else n + ': ' + type(e).__name__)\n        sys.exit(3)\n" % ([n for n, _ in _NEEDS],))
    try:
        p = subprocess.run([python, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "cannot start %s: %s" % (python, e)
    if p.returncode == 0:
        return ""
    what = (p.stdout.strip().splitlines() or [""])[-1]
    name = what.split(":", 1)[0]
    fix = dict(_NEEDS).get(name)
    if fix is None:
        lines = [line for line in p.stderr.strip().splitlines() if line.strip()]
        return "%s does not start (%s)" % (python, lines[-1] if lines else "exit status %d" % p.returncode)
    return "%s cannot import %s (%s): %s" % (python, name, what.split(": ", 1)[-1], fix.replace("PYTHON", python))


def _device_run(device, targets, tests):
    """--device: (target specs, test files) of the run, or (None, None, why not) in one line."""
    from .kit import cuda
    from .targets.loader import DEVICES

    if cuda.runtime() is None:
        return None, None, "--device %s: %s; nothing was run" % (device, cuda.why_not())
    able = sorted(name for name, devices in DEVICES.items() if device in devices)
    specs = []
    for spec in targets or able:
        name, colon, rest = spec.partition(":")
        if colon and name not in BUILTIN and "=" not in rest:
            specs.append(spec)  # an adapter (FILE.py:Class, module:Class): the device target it makes itself
            continue
        if "@" not in name:
            if name not in able and name in BUILTIN:  # a module's own: MODULE@DEVICE, generic
                return None, None, "--device %s: target %r has no %s variant (targets that have one: %s, any " \
                    "module with from_dlpack as a consumer, and an adapter of its own)" % (
                        device, spec, device, ", ".join(able))
            spec = "%s@%s%s%s" % (name, device, colon, rest)
        specs.append(spec)
    return specs, tests or list(DEVICE_TESTS[device]), None


#: how many targets' zygotes start with the run (and run their targets' probes): the zygotes of
#: a many-target run start one at a time, while the target before runs
EARLY_ZYGOTES = 4


def cmd_run(args):
    suites = os.path.abspath(args.suites)
    if not os.path.isdir(suites):
        _say("error: no suites folder %s" % suites)
        return EXIT_USAGE
    explicit = bool(args.target)  # the command line named targets (a device run's own are not named)
    if args.device:
        args.target, args.tests, why = _device_run(args.device, args.target, args.tests)
        if why:
            _say("error: %s" % why)
            return EXIT_USAGE
    missing = [t for t in args.tests or () if not os.path.isfile(os.path.join(suites, t))]
    if missing:
        _say("error: --tests %s: no such file in %s" % (", ".join(missing), suites))
        return EXIT_USAGE
    python = args.python
    if os.sep not in python:
        python = shutil.which(python) or python
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        _say("error: --python %s is not an executable" % args.python)
        return EXIT_USAGE
    out = os.path.abspath(args.out)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        _say("error: cannot create --out %s: %s" % (out, e))
        return EXIT_USAGE
    try:
        known_entries = _known.parse(args.known) if args.known else []
    except _known.KnownFileError as e:
        _say("error: %s" % e)
        return EXIT_USAGE
    env = child_env()
    # the depth of the explorations reaches the checks through their environment (strategies.py):
    # the flags, else the variables as the caller set them
    depth = {}
    for name, value, parse in (("DLCONFORM_EXAMPLES", args.examples, _examples), ("DLCONFORM_SEED", args.seed, _seed)):
        if value is not None:
            env[name] = str(value)
        try:
            depth[name] = parse(env[name]) if env.get(name, "").strip() else None
        except argparse.ArgumentTypeError as e:
            _say("error: %s in the environment: %s" % (name, e))
            return EXIT_USAGE
    examples, seed = depth["DLCONFORM_EXAMPLES"], depth["DLCONFORM_SEED"]
    timeout = args.timeout or 30.0 * max(1.0, (examples or 0) / 20.0)
    started = time.time()
    # clause ids are upper case (CAP-01): a glob is taken in any case
    globs = [g.strip().upper() for arg in (args.clause or ()) for g in arg.split(",") if g.strip()]
    unmatched = _unmatched_clauses(suites, globs)
    if unmatched:
        _say("error: --clause %s matches no clause of the catalogue (ids look like CAP-01; "
             "suites/clauses.md lists them)" % ", ".join(repr(g) for g in unmatched))
        return EXIT_USAGE
    specs = list(dict.fromkeys(args.target)) if args.target else list(BUILTIN)
    clause = ",".join(globs) or None
    jobs = args.jobs or min(os.cpu_count() or 1, 4)
    # A target's run is split in lanes, one a worker, that share its tests (Runner.run_target,
    # `claims`): the workers go through the targets together, so no core idles while the
    # slowest target runs alone. Not with --tests or --clause (short runs) nor on a device
    # (its checks would share the device). The lanes of a target share its zygote.
    lanes = {spec: jobs if jobs > 1 and not args.tests and not clause and "@" not in spec else 1
             for spec in specs}
    zygotes = {spec: SharedZygote(lanes[spec]) for spec in specs if lanes[spec] > 1}

    def runner(**kw):
        return Runner(suites, out, python=python, clause=clause, timeout=timeout,
                      target_timeout=args.target_timeout, env=env, max_restarts=args.max_restarts,
                      keep_warm=True, **kw)

    # the check of the interpreter, each target's probe and the description of the environment
    # are processes of their own: they run side by side (a probe's answer is used only when the
    # interpreter is fine). The first EARLY_ZYGOTES targets with lanes have their zygotes
    # started now: each runs the probe in a child once it imported the library, which a probe
    # of its own would import again (torch: 1.5 s of CPU); the other targets' probes (a run of
    # 171 faults has as many targets), and any a zygote could not run, are fresh interpreters,
    # and their zygotes start while the target before them runs.
    early = list(zygotes)[:EARLY_ZYGOTES]
    for spec in early:
        zygotes[spec].prefetch(runner().zygote_maker(spec, on_probe=zygotes[spec].took_probe))
    with concurrent.futures.ThreadPoolExecutor(max_workers=min(len(specs) + 2, 8)) as pool:
        why = pool.submit(_environment_problem, python, env)
        infos = [pool.submit(probe, spec, python=python, env=env, warm=zygotes[spec].probe if spec in early else None)
                 for spec in specs]
        described = pool.submit(_environment.collect, python, env=env)
        if why.result():
            for f in infos + [described]:
                f.cancel()
            for z in zygotes.values():
                z.close()
            _say("error: %s" % why.result())
            return EXIT_USAGE
        infos = [f.result() for f in infos]
    sink = _Sink(os.path.join(out, "results.jsonl"))
    targets, results = {}, []
    runnable = []
    for spec, info in zip(specs, infos):
        if info.get("ok"):
            targets[spec] = {"status": "pending", "reason": "", "roles": info.get("roles", []),
                             "versions": info.get("versions", {})}
            runnable.append(spec)
        else:
            reason = info.get("reason") or "unavailable"
            # a target the command line named is not a quiet skip: "not loaded" (the run exits 2)
            targets[spec] = {"status": "not loaded" if explicit else "skipped", "reason": reason, "roles": [],
                             "versions": {}}
            if explicit or spec == "ref" or args.device:  # a device run says why a device target did not
                _say("target %r: %s" % (spec, reason))
                rec = Record.session(spec, "<target>", "skip", reason,
                                     repro=_repro.run_command(spec, None))
                results.append(rec)
                sink(rec)
    for spec in [t for t in zygotes if t not in runnable]:  # its probe failed: no lane will run
        zygotes.pop(spec).close()
    environment = described.result()
    run_info = {"argv": sys.argv[1:], "suites": suites, "python": python, "clause": clause,
                "timeout": timeout, "target_timeout": args.target_timeout, "examples": examples, "seed": seed,
                "started": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(
                    timespec="seconds")}

    def finish(code):
        for z in zygotes.values():  # those no lane used (a run that stopped early)
            z.close()
        if args.known:
            used, fixed = _known.apply(known_entries, results, targets)
            run_info["known"] = {"file": os.path.abspath(args.known), "used": [e.text() for e in used],
                                 "fixed": [e.text() for e in fixed]}
            for e in fixed:
                _say("fixed, remove from %s (line %d): %s" % (args.known, e.line, e.text()))
            if code == EXIT_FAIL and not any(r["verdict"] in FAILING and not r.get("known") for r in results):
                code = EXIT_OK
        lines = _known.summary(results, gated=bool(args.known))
        for line in lines[:40]:
            _say(line)
        if len(lines) > 40:
            _say("... and %d more findings: %s" % (len(lines) - 41, os.path.join(out, "results.md")))
        if args.write_known:
            n = _known.write(args.write_known, results)
            _say("wrote %d findings to %s" % (n, args.write_known))
        run_info["duration"] = round(time.time() - started, 3)
        run_info["exit_status"] = code
        doc = _report.json_report.build(targets, results, environment, run_info)
        paths = _report.write_all(out, doc)
        sink.close()
        if not args.quiet:
            print("dlconform: wrote %s" % ", ".join(_display(p) for p in paths.values()))
            if lines:
                print("dlconform: each finding's reproducer, run again: %s" % recheck_line(paths["json"]))
        return code

    if not runnable:
        _say("error: no target can be run")
        return finish(EXIT_USAGE)
    # a CI job that names a library expects it tested: never a quiet skip, though the targets
    # that load run (their results are not lost) and the run exits 2 once they did
    unloadable = [spec for spec in specs if targets[spec]["status"] == "not loaded"]

    progress = None if args.quiet else _Progress()
    queue = [(spec, lane) for spec in runnable for lane in range(lanes[spec])]
    lane_runs = {spec: [] for spec in runnable}
    runners = [runner(sink=sink, progress=progress) for _ in range(min(jobs, len(queue)))]
    runs = {}
    lock = threading.Lock()

    done = [threading.Event() for _ in runners]  # set when a worker has returned

    failures = []  # internal errors of the workers: re-raised here, the run exits 2

    def worker(runner, finished):
        # One Runner per thread: a Runner drives one child at a time. Each lane still has
        # its own process; the threads only wait on them.
        try:
            work(runner)
        except BaseException as e:  # handed to the main thread
            failures.append(e)
        finally:
            finished.set()

    def claims_folder(spec):
        path = os.path.join(out, "work", safe_name(spec) + ".claims")
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    claims = {spec: claims_folder(spec) for spec in runnable if lanes[spec] > 1}

    def work(runner):
        while True:
            with lock:
                if not queue:
                    return
                spec, lane = queue.pop(0)
            if lane == 0:
                after = next((t for t in runnable[runnable.index(spec) + 1:] if t in zygotes), None)
                if after is not None:  # the next target's warm parent starts while this one runs
                    zygotes[after].prefetch(runner.zygote_maker(after))
                if not args.quiet:
                    print("dlconform: running %s ..." % spec, flush=True)
            run = runner.run_target(spec, roles=targets[spec]["roles"], versions=targets[spec]["versions"],
                                    paths=[os.path.join(suites, t) for t in args.tests] if args.tests else None,
                                    lane=lane, lanes=lanes[spec], claims=claims.get(spec), shared=zygotes.get(spec))
            with lock:
                lane_runs[spec].append(run)
                if len(lane_runs[spec]) < lanes[spec]:
                    continue
                run = runs[spec] = merge_lanes(lane_runs[spec])
                targets[spec].update(status=run.status, reason=run.reason, attempts=run.attempts,
                                     duration=round(run.duration, 3))
            if not args.quiet:
                counts = run.summary()
                progress.done(spec, "dlconform: %s: %s" % (
                    spec, ", ".join("%d %s" % (counts[v], v) for v in VERDICTS if counts.get(v)) or "no results"))

    threads = [threading.Thread(target=worker, args=(r, d), daemon=True) for r, d in zip(runners, done)]
    # a CI runner cancels a job with SIGTERM: stop as for Ctrl-C (this is the harness's own
    # process; the libraries under test run in the children)
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        with lock:
            queue.clear()
        for r in runners:
            r.kill()
        for d in done:  # not Thread.join: a join that Ctrl-C interrupted may report the thread ended
            d.wait(10)
        for r in runners:
            if r.current is not None and r.current.spec not in runs and r.current not in lane_runs[r.current.spec]:
                lane_runs[r.current.spec].append(r.current)
        for spec in runnable:
            run = runs.get(spec) or (merge_lanes(lane_runs[spec]) if lane_runs[spec] else None)
            if run is not None:
                results.extend(run.records)
                targets[spec].update(status=run.status, reason=run.reason, attempts=run.attempts)
            else:
                targets[spec].update(status="not run", reason="interrupted before it started")
        run_info["incomplete"] = "interrupted: the results are those of the tests that finished"
        code = finish(EXIT_INTERRUPTED)
        _say("interrupted; the report holds what finished (%d results)" % len(results))
        return code
    finally:
        signal.signal(signal.SIGTERM, previous)
        for z in zygotes.values():
            z.close()
        for r in runners:
            r.close()
    if failures:
        raise failures[0]
    for spec in runnable:  # report order is the command line's, whatever finished first
        results.extend(runs[spec].records)
    errors = [r for r in results if r["verdict"] == HARNESS_ERROR]
    for r in errors[:10]:
        _say("harness error (the suite, not %s): %s %s: %s" % (r["target"], r["test"], r["clause"], r["message"]))
    if unloadable:
        _say("error: %s cannot be loaded (said above); the other targets ran" % ", ".join(map(repr, unloadable)))
    code = (EXIT_USAGE if errors or unloadable else EXIT_FAIL if any(r["verdict"] in FAILING for r in results)
            else EXIT_OK)
    return finish(code)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in _PASSTHROUGH_MODULES:
        import importlib

        return importlib.import_module(_PASSTHROUGH_MODULES[argv[0]], __package__).main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return cmd_run(args)
        if args.command == "bench":
            from .bench import cmd_bench

            return cmd_bench(args, _say)
        if args.command == "merge":
            from .matrix import merge

            return merge.main(args)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # never a traceback for the user; keep it for us
        import traceback

        try:
            path = os.path.join(os.path.abspath(getattr(args, "out", DEFAULT_OUT)), "harness-error.txt")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                traceback.print_exc(file=f)
            where = " (traceback in %s)" % path
        except OSError:
            where = ""
        _say("internal error: %s: %s%s" % (type(e).__name__, e, where))
        return EXIT_USAGE
    parser.error("unknown command")
    return EXIT_USAGE
