"""Runs the suites against one target in a child process, with crash and timeout capture.

The child is `PYTHON -m pytest SUITES -p dlconform.pytest_plugin ...` in its own process group.
It appends the results protocol (harness/README.md) to a file which the runner tails. When the
child dies before its `end` line, the test that had begun gets `crash` (with the signal) and
the child is restarted with every begun test deselected; a test running longer than the
per-test limit gets `timeout` the same way.

Each child is forked from a warm parent that imported pytest and the library once
(dlconform/zygote.py), so a restart costs a fork, not an interpreter and an import; where the
warm parent cannot start (or DLCONFORM_FORK=0), each child is a fresh interpreter.
"""
import fnmatch
import hashlib
import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from . import HARNESS_DIR
from . import catalogue as _catalogue
from . import repro as _repro
from .records import SESSION, Record
from .targets.loader import describe_status, library_module


def child_env(base=None):
    """The caller's environment with harness/ prepended to PYTHONPATH, its entries made absolute,
    and the caller's folder appended: `python -m dlconform` has that folder on sys.path, so a
    library beside the caller (mylib.py in the project a maintainer runs from) imports in the
    children as in the parent, although their working folder is the suites' parent."""
    env = dict(os.environ if base is None else base)
    parts = [HARNESS_DIR]
    for p in env.get("PYTHONPATH", "").split(os.pathsep) + [os.getcwd()]:
        if p and os.path.abspath(p) not in parts:
            parts.append(os.path.abspath(p))
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


def safe_name(spec):
    return re.sub(r"[^A-Za-z0-9_.=-]+", "_", spec).strip("_") or "target"


def _read_end(path, size):
    """The last `size` bytes of a file as text; empty when it cannot be read."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _tail(path, lines=30, limit=4000):
    text = "\n".join(_read_end(path, 64 * 1024).rstrip().splitlines()[-lines:])
    return text[-limit:]


_MARKERS = ("Fatal Python error", "Timeout (", "Traceback (most recent call last)")


def _evidence(err_path, out_path, lines=25):
    """The most useful part of a dead child's output: faulthandler's dump (innermost frames
    first) when there is one, else the tail of stderr, else of stdout."""
    text = _read_end(err_path, 256 * 1024)
    for marker in _MARKERS:
        i = text.rfind(marker)
        if i >= 0:
            return "\n".join(text[i:].splitlines()[:lines])[:4000]
    return _tail(err_path, lines) or _tail(out_path, lines)


#: tests whose death is confirmed by running them alone, per target at most
MAX_CONFIRMATIONS = 20
#: the test machinery's files: a death with one of them innermost happened outside any call of
#: a check into the library
_MACHINERY = re.compile(r"/(_pytest|pluggy|hypothesis)/")


def frames_of_dying_thread(err_text):
    """The files of the frames faulthandler printed for the thread that died (the block after
    the last 'Fatal Python error'), innermost first; [] without such a dump."""
    i = err_text.rfind("Fatal Python error")
    if i < 0:
        return []
    out = []
    for line in err_text[i:].splitlines()[1:]:
        m = re.match(r'\s+File "([^"]+)", line \d+', line)
        if m:
            out.append(m.group(1))
        elif out and not line.strip():
            break  # the end of the dying thread's block
    return out


def kill_group(proc):
    """SIGKILL to the process group of `proc` (started with start_new_session=True), then reap
    it. Nothing the child started outlives it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


class _Forked:
    """A child forked by the zygote, with the part of subprocess.Popen the runner uses (pid,
    poll, returncode, kill, wait). Its process group is its pid (it called setsid)."""

    def __init__(self, zygote, pid):
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def _take(self, timeout):
        """Waits at most `timeout` s for the zygote's report of this child's end."""
        try:
            code = self.zygote.exit_code(self.pid, timeout)
        except OSError:  # the zygote is gone (killed from outside): so is what it would report
            self.kill()
            self.returncode = -signal.SIGKILL
            return
        if code is not None:
            self.returncode = code

    def poll(self):
        if self.returncode is None:
            self._take(0)
        return self.returncode

    def kill(self):
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass

    def wait(self, timeout=None):
        end = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired("forked child %d" % self.pid, timeout)
            self._take(left)
        return self.returncode


class _Zygote:
    """The runner's side of dlconform/zygote.py: one per target run, shared by its lanes (the
    Runners of one target, each in its thread: every read of the zygote's lines holds `lock`,
    and an EXIT line waits in `exits` for the lane whose child it names)."""

    #: longest a reader holds the lock while waiting for a line
    SLICE = 0.02

    def __init__(self, python, module, env, cwd, err_path, collect=None, ready_timeout=120.0, map_path=None,
                 probe=None, on_probe=None):
        """collect: the arguments of a pytest session that imports the suites in the zygote.
        ready_timeout: how long its imports may take; past it (a test file that hangs as it
        is imported, say) the zygote is killed and the children are fresh interpreters, whose
        collection the runner times (collect_timeout). map_path: where that session writes
        every test it collected (`items`: [{"id", "file", "clauses", "claim"}], None when it
        wrote none), from which the runner picks the files a child need collect. probe: a
        target spec whose probe a child runs once the library is imported, its (returncode,
        stdout, stderr) handed to on_probe as soon as it ends."""
        self.buf = b""
        self.items = None
        self.lock = threading.Lock()
        self.exits = {}  # pid -> returncode, reported and not yet taken
        if collect is not None and map_path:
            collect = list(collect) + ["--dlc-collect-map", map_path]
        args = ["--collect", json.dumps(list(collect))] if collect is not None else []
        args += ["--probe", probe] if probe else []
        with open(err_path, "ab") as err:
            self.proc = subprocess.Popen([python, "-m", "dlconform.zygote", *args, *([module] if module else [])],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=env,
                                         cwd=cwd, start_new_session=True)
        end = time.monotonic() + ready_timeout
        try:
            ready = self.line(ready_timeout)
            if probe and ready is not None and ready.startswith("PROBE "):
                try:
                    got = json.loads(ready[len("PROBE "):])
                    on_probe((int(got["rc"]), str(got["out"]), str(got["err"])))
                except (ValueError, KeyError, TypeError):
                    pass
                ready = self.line(max(0.0, end - time.monotonic()))
        except OSError:
            ready = None
        if ready != "READY":
            kill_group(self.proc)
            self.close()
            raise OSError("the warm parent did not start")
        try:
            with open(map_path or "", encoding="utf-8") as f:
                items = json.load(f)
            self.items = [i for i in items if isinstance(i, dict) and {"id", "file", "clauses", "claim"} <= set(i)]
        except (OSError, ValueError, TypeError):
            pass

    def line(self, timeout):
        """The next line the zygote wrote, waiting at most `timeout` s (None: no limit); None
        when none came. EOF (the zygote died) raises OSError. Callers hold `lock` (but
        __init__)."""
        end = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = None if end is None else max(0.0, end - time.monotonic())
            ready, _, _ = select.select([self.proc.stdout], [], [], left)
            if not ready:
                return None
            data = os.read(self.proc.stdout.fileno(), 4096)
            if not data:
                raise OSError("the warm parent ended")
            self.buf += data
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def _keep_exit(self, line):
        """Files an EXIT line for its lane; anything else is a broken protocol."""
        word, pid, code = (line.split() + ["", "", ""])[:3]
        if word != "EXIT":
            raise OSError("the warm parent said %r" % line)
        self.exits[int(pid)] = int(code)

    def exit_code(self, pid, timeout):
        """The return code of child `pid` once the zygote reported its end; None when it did
        not within `timeout` s."""
        end = time.monotonic() + (timeout or 0.0)
        while True:
            with self.lock:
                if pid in self.exits:
                    return self.exits.pop(pid)
                line = self.line(min(self.SLICE, max(0.0, end - time.monotonic())))
                if line is not None:
                    self._keep_exit(line)
                    continue
            if time.monotonic() >= end:
                return None

    def start(self, args, out_path, err_path):
        """A _Forked child running pytest with `args`, its output appended to the two files."""
        with self.lock:
            self.proc.stdin.write((json.dumps({"args": list(args), "out": out_path, "err": err_path}) + "\n").encode())
            self.proc.stdin.flush()
            end = time.monotonic() + 60.0
            while True:
                line = self.line(max(0.0, end - time.monotonic()))
                if line is None or not line.startswith(("PID ", "EXIT ")):
                    raise OSError("the warm parent did not fork (%r)" % line)
                if line.startswith("PID "):
                    return _Forked(self, int(line.split()[1]))
                self._keep_exit(line)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)


class SharedZygote:
    """The zygote of a target whose lanes run at the same time: started by prefetch (while the
    target before it runs, so that its imports do not leave a core idle, or at the start, to
    run the target's probe: `probe`) or by the first lane to ask; closed by the last lane to
    finish. None where it did not start (then each lane starts its children as fresh
    interpreters)."""

    def __init__(self, lanes):
        self.lock = threading.Lock()
        self.users = lanes
        self.zygote = None
        self.thread = None
        self.probed = threading.Event()
        self.probe_result = None

    def prefetch(self, make):
        """Starts the zygote in the background with make() (a Runner's _zygote)."""
        with self.lock:
            if self.thread is None:
                self.thread = threading.Thread(target=self._make, args=(make,), daemon=True)
                self.thread.start()

    def _make(self, make):
        try:
            self.zygote = make()
        finally:
            self.probed.set()  # whatever the zygote did, nobody waits for its probe any longer

    def took_probe(self, result):
        """on_probe of the zygote's start (Runner.zygote_maker(spec, probe=...))."""
        self.probe_result = result
        self.probed.set()

    def probe(self, timeout):
        """(returncode, stdout, stderr) of the target's probe run in the zygote, waiting at most
        `timeout` s; None when the zygote ran none (it died importing the library, say); False
        when it took longer."""
        if not self.probed.wait(timeout):
            return False
        return self.probe_result

    def get(self, make):
        self.prefetch(make)
        self.thread.join()
        return self.zygote

    def close(self):
        """Ends the zygote whatever its lanes did (a run interrupted before they all ran)."""
        if self.thread is not None:
            self.thread.join()
        with self.lock:
            self._end()

    def release(self):
        """A lane is done with the zygote; the last one ends it."""
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self._end()

    def _end(self):
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None


class TargetRun:
    """What happened to one target: status ran/skipped/crashed, its records, notes."""

    def __init__(self, spec):
        self.spec = spec
        self.status = "ran"
        self.reason = ""
        self.roles = []
        self.versions = {}
        self.records = []
        self.attempts = 0
        self.notes = []
        self.duration = 0.0
        self.total = None  # tests the first child collected
        self.begun = 0  # tests begun in all its children
        self.lane = 0  # which of the target's lanes (merge_lanes), 0 when it has one
        self.claims = None  # the claims folder its lanes share (Runner.run_target)
        self.lanes = 1  # how many lanes share it
        self.tested = 0
        self.interrupted = False

    @property
    def name(self):
        """The name of its work folder and logs: the spec's, and the lane's past the first."""
        return safe_name(self.spec) + (".lane%d" % self.lane if self.lane else "")

    def summary(self):
        out = {}
        for r in self.records:
            out[r["verdict"]] = out.get(r["verdict"], 0) + 1
        return out


@dataclass
class _Test:
    """The test the child has begun: from its `begin` line until the next one."""
    test: str
    clauses: list
    role: str
    t0: float  # when it began; once finished, when its last result came
    input: str = "valid"  # what the test feeds the library (its `feeds` marker)
    done: set = field(default_factory=set)  # clauses with a result
    finished: bool = False  # every clause has its result
    repro: str = ""  # the snippet it streamed, for a crash
    # what the test was doing when it streamed that snippet, where it is not the test's own case
    # (Check.repro(..., crash_as=...)): a death from then on is recorded under these clauses,
    # with this input kind, and the message says what was being done
    crash_as: Optional[dict] = None

    def expected(self):
        return set(self.clauses or [SESSION])


@dataclass
class _Attempt:
    """One child process: what it said and how it stopped."""
    current: Optional[_Test] = None
    ended: Optional[dict] = None  # its `end` line
    ended_t: float = 0.0
    begun: int = 0
    results: int = 0
    killed: Optional[str] = None  # why the runner killed it: a key of STOPS
    rc: Optional[int] = None


@dataclass(frozen=True)
class Stop:
    """What a way of stopping records, and whether the child is started again after it.
    scope `test`: one record per clause of the running test that has no result yet;
    scope `session`: one record (clause `*`) named `test`. Messages are format strings over
    the runner's limits, the child's status and the running test."""
    verdict: str
    scope: str
    message: str
    restart: bool
    test: str = ""
    note: str = ""  # appended to the target's notes


STOPS = {
    # killed by the runner
    "timeout": Stop("timeout", "test", "no result after {timeout:g}s (per-test limit); process group killed", True),
    "between": Stop("timeout", "session", "no next test within {timeout:g}s after this one finished; process group "
                    "killed", True, test="{test} (after it finished)"),
    "collect": Stop("timeout", "session", "no test began within {collect_timeout:g}s of starting the child "
                    "(collection hung?); process group killed", False, test="<collection>"),
    "exit": Stop("timeout", "session", "the child did not exit within {timeout:g}s after the session ended; "
                 "process group killed", False, test="<interpreter exit>"),
    "wall": Stop("timeout", "test", "per-target limit of {target_timeout:g}s reached during this test", False,
                 note="per-target limit of {target_timeout:g}s reached; the remaining tests did not run"),
    # the session ended, then
    "unused": Stop("crash", "session", "pytest stopped with exit status {exitstatus} before running any test: "
                   "{last}", False, test="<session>"),
    "died_at_exit": Stop("crash", "session", "{status} after the session ended (a deleter or finalizer at "
                         "shutdown?)", False, test="<interpreter exit>"),
    # the child died
    "died_after_test": Stop("crash", "session", "{status} after the test finished (a deferred deleter or "
                            "finalizer?)", True, test="{test} (after it finished)"),
    "died_in_test": Stop("crash", "test", "{status}", True),
    "died_at_start": Stop("crash", "session", "{what} ({status}): {last}", False, test="<session>"),
    "died_between": Stop("crash", "session", "{status} between tests", False, test="<between tests>"),
}


def stop_reasons(att):
    """The keys of STOPS that describe how the attempt ended (none for a clean end)."""
    if att.killed:
        return [att.killed]
    if att.ended is not None:
        out = []
        if att.ended.get("exitstatus") in (2, 3, 4) and att.results == 0 and att.begun == 0:
            out.append("unused")
        if att.rc is not None and att.rc < 0:
            out.append("died_at_exit")
        return out
    if att.current is not None:
        return ["died_after_test" if att.current.done >= att.current.expected() else "died_in_test"]
    return ["died_at_start" if att.begun == 0 else "died_between"]


class Runner:
    def __init__(self, suites, out_dir, python=None, clause=None, timeout=30.0, target_timeout=3600.0,
                 env=None, max_restarts=100, sink=None, catalogue=None, poll=0.05, extra_args=(),
                 progress=None, collect_timeout=None, keep_warm=False):
        """progress: called as progress(spec, begun, total, lane) when a test begins (total:
        the number the first child collected, None before it said). keep_warm: a target's
        warm parent stays for the next target that imports the same library (the faults of
        ref or pyref, run one after another), until close()."""
        self.suites = os.path.abspath(suites)
        self.out_dir = os.path.abspath(out_dir)
        self.python = python or sys.executable
        self.clause = clause
        self.timeout = float(timeout)
        self.target_timeout = float(target_timeout)
        self.env = child_env(env)
        self.max_restarts = int(max_restarts)
        self.sink = sink
        if catalogue is None:
            path = os.path.join(self.suites, "clauses.json") if os.path.isdir(self.suites) else None
            try:
                catalogue = _catalogue.Catalogue.load(path)
            except _catalogue.CatalogueError:
                catalogue = _catalogue.Catalogue()
        self.catalogue = catalogue
        self.poll = poll
        self.extra_args = list(extra_args)
        self.progress = progress
        #: limit for startup + collection (no `begin` yet)
        self.collect_timeout = float(collect_timeout) if collect_timeout else max(300.0, 10 * self.timeout)
        self._proc = None
        self.interrupted = False  # kill() was called: no verdict for what the kill cut short
        self.current = None  # the TargetRun in progress
        self.keep_warm = keep_warm
        self._kept = None  # (key, zygote) kept warm: see _warm

    # ---- records
    def _emit(self, run, rec):
        """Adds a complete record (a Record, or one the child made) to the run, as it is."""
        run.records.append(rec)
        if self.sink is not None:
            self.sink(rec)
        return rec

    def _session_record(self, run, test, verdict, message, evidence=""):
        return self._emit(run, Record.session(run.spec, test, verdict, message, evidence=evidence,
                                              repro=_repro.run_command(run.spec, self.clause or SESSION)))

    def _lost_repro(self, run, clause, current, verdict):
        """The test's own snippet when it streamed one before dying, then how to rerun it. A
        crash's snippet runs on the C allocator (repro.CRASH_ENV)."""
        rerun = _repro.run_command(run.spec, clause, current.test) + "\n" + self._in_process_command(run, current)
        if not current.repro:
            return rerun
        text = _repro.with_env(current.repro, _repro.CRASH_ENV) if verdict == "crash" else current.repro
        return text + "# rerun the check:\n" + "".join("# " + line + "\n" for line in rerun.splitlines())

    def _in_process_command(self, run, current):
        """The dead test alone under plain pytest, in this process (to run under a debugger: the
        crash ends pytest). Absolute paths, so it works from any directory, installed or not."""
        return ("# in-process, e.g. under gdb (the crash ends pytest): PYTHONPATH=%s %s -m pytest %s "
                "-p dlconform.pytest_plugin --rootdir %s --dlc-target %s" % (
                    shlex.quote(HARNESS_DIR), shlex.quote(self.python),
                    shlex.quote(os.path.join(self.suites, current.test)), shlex.quote(self.suites),
                    shlex.quote(run.spec)))

    def _lost_test(self, run, current, verdict, message, evidence=""):
        """crash/timeout records for the clauses of a begun test that has no result."""
        elapsed = time.monotonic() - current.t0
        clauses, input_kind = current.clauses or [SESSION], current.input
        if current.crash_as:
            clauses = [str(c) for c in current.crash_as.get("clauses") or []] or clauses
            input_kind = str(current.crash_as.get("input") or input_kind)
            if current.crash_as.get("doing"):
                message = "%s while %s" % (message, current.crash_as["doing"])
        for clause in clauses:
            if clause in current.done:
                continue
            self._emit(run, Record(
                target=run.spec, clause=clause, role=current.role, verdict=verdict, message=message,
                test=current.test, duration=elapsed, evidence=evidence,
                repro=self._lost_repro(run, clause, current, verdict),
                input=input_kind if input_kind != "valid" else None, catalogue=self.catalogue))

    def _record_stop(self, run, att, reason, evidence):
        """Records what the way of stopping `reason` (a key of STOPS) says; True to restart."""
        stop = STOPS[reason]
        cur = att.current
        values = {"timeout": self.timeout, "collect_timeout": self.collect_timeout,
                  "target_timeout": self.target_timeout, "status": describe_status(att.rc),
                  "exitstatus": (att.ended or {}).get("exitstatus"), "last": _last_lines(evidence),
                  "what": "pytest usage error" if att.rc == 4 else "the child died before running any test",
                  "test": cur.test if cur is not None else ""}
        message = stop.message.format(**values)
        if stop.scope == "test":
            if cur is not None:
                self._lost_test(run, cur, stop.verdict, message, evidence)
        else:
            self._session_record(run, stop.test.format(**values), stop.verdict, message, evidence)
        if stop.note:
            run.notes.append(stop.note.format(**values))
        return stop.restart

    # ---- child
    def command(self, spec, results_path, exclude_path, paths=None, claims=None, lane=0, lanes=1, in_order=False):
        """The child's command line; without `spec` (and `results_path`), the collecting
        session of the zygote, which reads no target and writes no results."""
        # The library under test must see its process as any Python process: pytest's warnings,
        # unraisable- and thread-exception plugins and its output capture would change the
        # warnings filters, sys.unraisablehook, threading.excepthook and sys.stdout around
        # every test (test_meta.py: test_the_suite_leaves_the_process_alone). Its faulthandler
        # stays: crash evidence needs it, and it chains to any handler a library installs.
        cmd = [self.python, "-m", "pytest", *(paths or [self.suites]), "-p", "dlconform.pytest_plugin", "-q",
               "-p", "no:warnings", "-p", "no:unraisableexception", "-p", "no:threadexception", "--capture=no",
               "-p", "no:cacheprovider", "--continue-on-collection-errors", "--rootdir", self.suites,
               "-o", "faulthandler_timeout=%d" % max(1, int(self.timeout * 0.9))]
        if spec is not None:
            cmd += ["--dlc-target", spec, "--dlc-results", results_path]
        if self.clause:
            cmd += ["--dlc-clause", self.clause]
        if exclude_path:
            cmd += ["--dlc-exclude-file", exclude_path]
        catalogue = os.path.join(self.suites, "clauses.json")
        if os.path.isfile(catalogue):
            cmd += ["--dlc-catalogue", catalogue]
        if claims:
            cmd += ["--dlc-claims", claims, "--dlc-lane", str(lane), "--dlc-lanes", str(lanes)]
            if in_order:
                cmd += ["--dlc-in-order"]
        return cmd + self.extra_args

    def run_target(self, spec, roles=(), versions=None, paths=None, skip=(), lane=0, claims=None, shared=None,
                   lanes=1):
        """Runs every test against `spec`, one child after another: a child that dies or is
        killed is replaced by one that skips every test already begun. `paths`: test files or
        node ids to run instead of the whole suites folder; `skip`: node ids not to run.
        `claims`: a folder shared with the target's other lanes (runs of the same target by
        other Runners at the same time, `lane` 1, 2...): each test runs in the lane that
        claims it first (pytest_plugin: claimed_items); merge_lanes makes one run of them.
        `lanes`: how many there are; `shared`: the lanes' SharedZygote."""
        run = TargetRun(spec)
        self.current = run
        run.roles = list(roles)
        run.versions = dict(versions or {})
        run.lane, run.lanes, run.claims = lane, lanes, claims
        work = os.path.join(self.out_dir, "work", run.name)
        logs = os.path.join(self.out_dir, "logs")
        os.makedirs(work, exist_ok=True)
        os.makedirs(logs, exist_ok=True)
        exclude_path = os.path.join(work, "exclude.txt")
        begun = dict.fromkeys(skip)  # tests not to run again: skipped, then begun, in order
        start = time.monotonic()
        deadline = start + self.target_timeout
        if shared is not None:
            zygote = shared.get(self.zygote_maker(spec))
        elif self.keep_warm:
            zygote = self._warm(spec, logs, run.name)
        else:
            zygote = self._zygote(spec, logs, run.name)
        try:
            self._attempts(run, spec, work, logs, exclude_path, begun, deadline, paths, zygote)
        finally:
            if shared is not None:
                shared.release()
            elif zygote is not None and not self.keep_warm:
                zygote.close()
        run.duration = time.monotonic() - start
        if self.interrupted:
            run.interrupted = True
            run.status, run.reason = "interrupted", "interrupted: only the tests that finished have results"
            return run
        session_bad = [r for r in run.records if r["clause"] == SESSION and r["verdict"] in ("crash", "timeout")]
        if run.tested == 0 and session_bad:
            run.status = "crashed"
            run.reason = "; ".join([session_bad[0]["message"].splitlines()[0][:300]] + run.notes)
        elif run.notes:
            run.reason = "; ".join(run.notes)
        return run

    def zygote_maker(self, spec, on_probe=None):
        """A function that starts the zygote of `spec`'s lanes (SharedZygote); with on_probe,
        the zygote also runs the target's probe (SharedZygote.took_probe)."""
        logs = os.path.join(self.out_dir, "logs")
        os.makedirs(logs, exist_ok=True)
        return lambda: self._zygote(spec, logs, safe_name(spec), on_probe=on_probe)

    def _warm(self, spec, logs, name):
        """The kept zygote when it imported the library of `spec` and still runs, else a new
        one, kept in place of the old. A zygote never loads a target (the child does, after
        the fork), so the targets of one library can share it."""
        key = library_module(spec)
        if self._kept is not None:
            kept_key, zygote = self._kept
            if kept_key == key and zygote.proc.poll() is None:
                return zygote
            self.close()
        zygote = self._zygote(spec, logs, name)
        if zygote is not None:
            self._kept = (key, zygote)
        return zygote

    def close(self):
        """Ends the zygote kept warm (keep_warm)."""
        if self._kept is not None:
            self._kept[1].close()
            self._kept = None

    def _zygote(self, spec, logs, name, on_probe=None):
        """The warm parent of this target's children, or None (DLCONFORM_FORK=0, no fork, or it
        did not start: then each child is a fresh interpreter)."""
        if self.env.get("DLCONFORM_FORK") == "0" or not hasattr(os, "fork"):
            return None
        try:
            # the suites are collected once there, as the children will (no target, no results)
            collect = self.command(None, None, None)[3:]  # cmd: PYTHON -m pytest ARGS
            return _Zygote(self.python, library_module(spec), self.env, os.path.dirname(self.suites),
                           os.path.join(logs, "%s.zygote.err" % name), collect=collect,
                           ready_timeout=self.collect_timeout,
                           map_path=os.path.join(logs, "%s.zygote.map.json" % name),
                           probe=spec if on_probe else None, on_probe=on_probe)
        except OSError:
            return None

    def _attempts(self, run, spec, work, logs, exclude_path, begun, deadline, paths, zygote):
        """The children of one target run, one after another, until the suite ran through."""
        run.tested = 0
        confirming, confirmations = None, 0  # (the test that died, its message, evidence) being rerun alone
        while not self.interrupted:
            run.attempts += 1
            n = run.attempts
            results_path = os.path.join(work, "attempt-%d.jsonl" % n)
            open(results_path, "w").close()
            with open(exclude_path, "w", encoding="utf-8") as f:
                f.write("".join(t + "\n" for t in begun))
            out_path = os.path.join(logs, "%s.%d.out" % (run.name, n))
            err_path = os.path.join(logs, "%s.%d.err" % (run.name, n))
            att = _Attempt()
            files = paths
            if files is None and not confirming and zygote is not None and zygote.items:
                files = self._files_left(zygote.items, begun, run, resumed=n > 1)
            cmd = self.command(spec, results_path, exclude_path if begun else None,
                               [os.path.join(self.suites, confirming[0].test)] if confirming else files,
                               run.claims, run.lane, run.lanes, in_order=files is not paths)
            try:
                proc = None
                if zygote is not None:
                    try:
                        open(out_path, "wb").close()
                        open(err_path, "wb").close()
                        proc = zygote.start(cmd[3:], out_path, err_path)  # cmd: PYTHON -m pytest ARGS
                    except OSError:  # a fresh interpreter from now on; run_target closes the zygote
                        zygote = None
                if proc is None:
                    with open(out_path, "wb") as out_f, open(err_path, "wb") as err_f:
                        proc = subprocess.Popen(cmd, stdout=out_f, stderr=err_f, stdin=subprocess.DEVNULL, env=self.env,
                                                cwd=os.path.dirname(self.suites), start_new_session=True)
            except OSError as e:
                self._session_record(run, "<start>", "crash", "cannot start %s: %s" % (self.python, e))
                run.status = "crashed"
                break
            self._proc = proc
            try:
                self._watch(run, proc, results_path, att, begun, deadline)
            finally:
                if proc.poll() is None:
                    kill_group(proc)
                self._proc = None
            att.rc = proc.returncode
            run.tested += att.begun
            if self.interrupted:  # the child died of our kill, not of the library: no verdict
                break
            evidence = _evidence(err_path, out_path)
            restart = False
            reasons = stop_reasons(att)
            if confirming is not None:
                restart = True  # back to the rest of the suite after the test ran alone
                died, message, first_evidence = confirming
                confirming = None
                again = "died_in_test" in reasons and att.current is not None and att.current.test == died.test
                if again:
                    reasons = [r for r in reasons if r != "died_in_test"]
                    self._lost_test(run, att.current, "crash", "%s (again when the test ran alone)" % message,
                                    first_evidence)
                elif att.begun:
                    self._session_record(run, "<before %s>" % died.test, "crash", (
                        "%s during %s, which ran alone without dying: leftovers of an earlier test died then (a "
                        "deferred deleter or finalizer, or memory an earlier check corrupted); not a verdict of "
                        "this check" % (message, died.test)), first_evidence)
            elif ("died_in_test" in reasons and confirmations < MAX_CONFIRMATIONS and att.current is not None
                  and self._not_the_checks_death(err_path)):
                # the dying thread ran no code of the suites: the death may be an earlier test's
                # leftovers; the test runs alone to tell (its records come from that run)
                confirmations += 1
                confirming = (att.current, describe_status(att.rc), evidence)
                begun.pop(att.current.test, None)
                reasons = [r for r in reasons if r != "died_in_test"]
                restart = True
            for reason in reasons:
                restart = self._record_stop(run, att, reason, evidence) or restart
            if not restart:
                break
            if time.monotonic() >= deadline:
                run.notes.append("per-target limit of %gs reached; the remaining tests did not run"
                                 % self.target_timeout)
                break
            if run.attempts > self.max_restarts:
                run.notes.append("stopped after %d restarts; the remaining tests did not run" % self.max_restarts)
                break

    def _files_left(self, items, begun, run, resumed):
        """The test files a child of this run need collect (None: all of them), from the
        zygote's map of the suites: those with a test that is not begun, matches --clause and
        is not another lane's. Collecting a file costs its items (about 0.1 s for all the
        suites' files, paid again by each child after a death, and by each of the hundreds of
        clause runs of the faults' calibration). A resumed lane starts with the file of its
        last begun test, where it was working, and wraps around."""
        globs = [g.strip().upper() for g in (self.clause or "").split(",") if g.strip()]
        theirs = set()
        if run.claims and resumed:
            try:
                names = set(os.listdir(run.claims))
            except OSError:
                return None
            for item in items:
                name = hashlib.sha1(item["claim"].encode()).hexdigest()
                if name in names and item["id"] not in begun:
                    try:
                        with open(os.path.join(run.claims, name), encoding="utf-8") as f:
                            if f.read() != str(run.lane):
                                theirs.add(item["id"])
                    except OSError:
                        pass
        files = []
        for item in items:
            if item["id"] in begun or item["id"] in theirs:
                continue
            if globs and not any(fnmatch.fnmatchcase(c, g) for c in item["clauses"] for g in globs):
                continue
            if item["file"] not in files:
                files.append(item["file"])
        if not files or (not resumed and not globs):
            return None
        if run.lanes > 1:
            file_of = {i["id"]: i["file"] for i in items}
            last = next((file_of[t] for t in reversed(list(begun)) if t in file_of), None)
            order = list(dict.fromkeys(file_of.values()))
            if last in order:
                at = order.index(last)
                files = sorted(files, key=lambda f: (order.index(f) - at) % len(order))
        return files

    def _not_the_checks_death(self, err_path):
        """True when faulthandler shows a dying thread that was not calling the library for a
        check: none of its frames is in the suites, or its innermost frame is the test machinery
        (pytest, pluggy, hypothesis: code that never calls a library, where a garbage collection
        runs the finalizers of earlier tests' objects)."""
        frames = frames_of_dying_thread(_read_end(err_path, 256 * 1024))
        if not frames:
            return False
        root = os.path.realpath(self.suites) + os.sep
        if not any(os.path.realpath(f).startswith(root) for f in frames):
            return True
        return bool(_MACHINERY.search(frames[0].replace(os.sep, "/")))

    def _watch(self, run, proc, path, att, begun, deadline):
        """Follows the child's results file until it exits or a limit makes the runner kill it
        (att.killed says which)."""
        pos = 0
        pending = b""
        started = time.monotonic()

        def drain():
            nonlocal pos, pending
            try:
                with open(path, "rb") as f:
                    f.seek(pos)
                    data = f.read()
            except OSError:
                return
            if not data:
                return
            pos += len(data)
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    self._event(run, line, att, begun)

        def stop():
            kill_group(proc)
            drain()

        while True:
            drain()
            if proc.poll() is not None:
                drain()
                return
            now = time.monotonic()
            if att.ended is not None:
                if now - att.ended_t > self.timeout:
                    kill_group(proc)
                    att.killed = "exit"
                    return
            elif att.current is None and now - started > self.collect_timeout:
                stop()
                if att.current is None and att.ended is None:
                    att.killed = "collect"
                return
            elif att.current is not None and now - att.current.t0 > self.timeout:
                stop()
                if att.ended is None and att.current is not None:
                    att.killed = "between" if att.current.finished else "timeout"
                return
            if now > deadline:
                stop()
                att.killed = "wall"
                return
            try:  # the next look at the results, or the child's end, whichever comes first
                proc.wait(timeout=self.poll)
            except subprocess.TimeoutExpired:
                pass

    def _event(self, run, line, att, begun):
        try:
            ev = json.loads(line.decode("utf-8", errors="replace"))
        except ValueError:
            return
        if not isinstance(ev, dict):
            return
        kind = ev.get("event")
        if kind == "begin":
            test = str(ev.get("test", ""))
            att.begun += 1
            begun.setdefault(test, None)
            att.current = _Test(test, list(ev.get("clauses") or []), ev.get("role"), time.monotonic(),
                                input=str(ev.get("input") or "valid"))
            run.begun += 1
            if self.progress:
                self.progress(run.spec, run.begun, run.total, run.lane)
        elif kind == "collected":
            if run.total is None and isinstance(ev.get("count"), int):
                run.total = ev["count"]
        elif kind == "result":
            att.results += 1
            self._emit(run, {k: v for k, v in ev.items() if k != "event"})
            cur = att.current
            if cur is not None and ev.get("test") == cur.test:
                cur.done.add(ev.get("clause"))
                if cur.done >= cur.expected():
                    cur.finished = True
                    cur.t0 = time.monotonic()  # now timing the gap to the next test
        elif kind == "repro":
            cur = att.current
            if cur is not None and ev.get("test") == cur.test and isinstance(ev.get("repro"), str):
                cur.repro = ev["repro"]
                crash_as = ev.get("crash_as")
                cur.crash_as = crash_as if isinstance(crash_as, dict) else None
        elif kind == "end":
            att.ended = ev
            att.ended_t = time.monotonic()

    def kill(self):
        """Stops the run (Ctrl-C, SIGTERM): kills the running child's process group and records
        nothing for the test it cut short; run_target returns what finished."""
        self.interrupted = True
        proc = self._proc
        if proc is not None and proc.poll() is None:
            kill_group(proc)


def merge_lanes(lanes):
    """One TargetRun from the runs of a target's lanes (Runner.run_target with `claims`), each
    test having run in exactly one of them: records in lane order, then by test file (the
    lanes ran the files side by side); a session record that several lanes made alike (each
    child's interpreter exit) once."""
    lanes = sorted(lanes, key=lambda r: r.lane)
    if len(lanes) == 1:
        return lanes[0]
    run = TargetRun(lanes[0].spec)
    run.roles, run.versions = lanes[0].roles, lanes[0].versions
    seen = set()
    for lane in lanes:
        for rec in lane.records:
            if rec.get("clause") == SESSION:
                key = (rec.get("test"), rec.get("verdict"), rec.get("message"))
                if key in seen:
                    continue
                seen.add(key)
            run.records.append(rec)
        run.notes += [n for n in lane.notes if n not in run.notes]
    run.records.sort(key=_test_file)
    run.attempts = sum(r.attempts for r in lanes)
    run.tested = sum(r.tested for r in lanes)
    run.begun = sum(r.begun for r in lanes)
    run.total = max((r.total for r in lanes if r.total is not None), default=None)
    run.duration = max(r.duration for r in lanes)
    run.interrupted = any(r.interrupted for r in lanes)
    if run.interrupted:
        run.status, run.reason = "interrupted", "interrupted: only the tests that finished have results"
    elif all(r.status == "crashed" for r in lanes):
        run.status, run.reason = "crashed", lanes[0].reason
    else:
        run.reason = "; ".join(run.notes)
    return run


def _test_file(record):
    """A record's test file; "~" (last) for a session record such as <interpreter exit>."""
    test = str(record.get("test", ""))
    return test.split("::")[0] if "::" in test else "~"


def _last_lines(text, n=3):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return " | ".join(lines[-n:])[-600:] if lines else "(no output)"
