"""The pytest plugin that runs inside each target's child process.

Load with `-p dlconform.pytest_plugin`. Options: --dlc-target SPEC, --dlc-results FILE,
--dlc-clause GLOB (repeatable, comma-separated), --dlc-exclude-file FILE, --dlc-catalogue FILE.
It writes the results protocol of harness/README.md to --dlc-results: a `begin` line before
each test, one `result` line per clause after it, `end` when the session finishes; each line
is flushed as it is written so that nothing is lost when the process dies.
"""
import dis
import fnmatch
import json
import os
import re
import sys
import time

import pytest

from . import PACKAGE_DIR, SUITES_DIR
from . import catalogue as _catalogue
from . import repro as _repro
from . import snippet as _snippet
from .records import SESSION, Record
from .verdicts import FAILING, HARNESS_ERROR, CheckFailure, Unsupported, Warn, breach, check_verdict, worst

UNMARKED = "UNMARKED"


class DlconformWarning(pytest.PytestWarning):
    """A clause of the test broke a SHOULD, or the spec is ambiguous (a `warn` verdict)."""
_MAX_MESSAGE = 2000


# ---------------------------------------------------------------------------- options
def pytest_addoption(parser):
    group = parser.getgroup("dlconform")
    group.addoption("--dlc-target", default=None, help="target spec (default: ref)")
    group.addoption("--dlc-results", default=None, help="append JSON-lines results to this file")
    group.addoption("--dlc-clause", action="append", default=[],
                    help="run only tests with a clause id matching this glob (repeatable, comma-separated)")
    group.addoption("--dlc-exclude-file", default=None, help="file of pytest node ids to deselect, one a line")
    group.addoption("--dlc-catalogue", default=None, help="clauses.json (default: next to the suites)")


def _option(config, name):
    """An option's value; None when no loaded plugin added it (--dlconform-* belong to the
    entry point, which is absent when dlconform is not installed)."""
    try:
        return config.getoption(name)
    except ValueError:
        return None


def requested_target(config):
    """The target named by --dlc-target (the runner), --dlconform-target or DLCONFORM_TARGET
    (a library's own pytest run), in that order; None when none is."""
    return (_option(config, "--dlc-target") or _option(config, "--dlconform-target")
            or os.environ.get("DLCONFORM_TARGET") or None)


class _EntryPoint:
    """What the `pytest11` entry point registers in every pytest run of an environment where
    dlconform is installed. It only adds options; it loads the plugin (this module) when a run
    asks for dlconform: --dlconform-target, DLCONFORM_TARGET, or collecting dlconform.suites.
    Any other pytest run sees no fixture, marker or hook of ours."""

    def pytest_addoption(self, parser):
        group = parser.getgroup("dlconform")
        group.addoption("--dlconform-target", default=None, metavar="SPEC",
                        help="run the dlconform suites against this target (also DLCONFORM_TARGET): ref, "
                             "numpy, torch, a module with from_dlpack, module:attr or path/file.py:attr")
        group.addoption("--dlconform-isolate", action="store_true", default=False,
                        help="run each test file in child processes, as `dlconform run` does, so that a "
                             "crash costs one check instead of the session (also DLCONFORM_ISOLATE=1)")

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        asked = requested_target(config) or any("dlconform.suites" in str(a) for a in config.args or ())
        if asked and not config.pluginmanager.has_plugin(__name__):
            config.pluginmanager.import_plugin(__name__)


#: the pytest11 entry point (pyproject.toml)
entry = _EntryPoint()


def pytest_configure(config):
    config.addinivalue_line("markers", "clause(*ids): the catalogue clauses a test checks")
    config.addinivalue_line("markers", "role(name): producer, consumer or both: what the target must be")
    config.addinivalue_line("markers", "feeds(kind): what the check feeds the library: valid (the default), "
                                       "invalid (malformed metadata) or argument (an invalid argument)")
    state = _State(config)
    config._dlc_state = state
    config.pluginmanager.register(state, "dlconform-state")


def pytest_unconfigure(config):
    state = getattr(config, "_dlc_state", None)
    if state is not None:
        state.close()


# ---------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="session")
def target(request):
    """The adapter of --dlc-target (harness/dlconform/targets/base.py)."""
    return request.config._dlc_state.get_target()


@pytest.fixture
def check(request):
    """Records verdicts for the test's clauses (suites/README.md)."""
    st = getattr(request.node, "_dlc", None)
    if st is None:  # not run through our protocol hook (should not happen)
        state = request.config._dlc_state
        st = state.item_state(request.node)
    return st.check


# ---------------------------------------------------------------------------- helpers
def _short(value, limit=200):
    if isinstance(value, (bytes, bytearray, memoryview)):
        value = bytes(value)
        text = value.hex() if len(value) <= limit // 2 else value[: limit // 2].hex() + "...(%d bytes)" % len(value)
        return "bytes " + text
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _first_difference(a, b):
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n if len(a) != len(b) else None


def _truncate(text, limit=_MAX_MESSAGE):
    text = str(text)
    return text if len(text) <= limit else text[:limit] + " ...[truncated]"


def item_clauses(item):
    ids = []
    for mark in reversed(list(item.iter_markers("clause"))):  # outermost (module/class) first
        for arg in mark.args:
            for cid in (arg if isinstance(arg, (list, tuple)) else [arg]):
                if cid not in ids:
                    ids.append(str(cid))
    return ids


#: what a check may feed the library (suites/README.md, "Grading"), and the reading that makes
#: accepting invalid input or an invalid argument a warn rather than a breach
FEEDS = ("valid", "invalid", "argument")
_UNSPECIFIED = ("the array API leaves behaviour on %s unspecified and dlpack.h obliges no consumer to "
                "validate it: accepting it is a warn, a clean refusal passes, dying is a robustness crash "
                "(suites/README.md, Grading)")
_WHAT = {"invalid": "invalid input (malformed metadata)", "argument": "an invalid argument"}


def item_feeds(item):
    """What the test feeds the library: the `feeds` marker's kind, valid without one."""
    mark = item.get_closest_marker("feeds")
    kind = str(mark.args[0]) if mark is not None and mark.args else "valid"
    if kind not in FEEDS:
        raise pytest.UsageError("dlconform: %s: feeds(%r) is none of %s" % (item.nodeid, kind, ", ".join(FEEDS)))
    return kind


def item_role(item):
    mark = item.get_closest_marker("role")
    if mark is None or not mark.args:
        return None
    return str(mark.args[0])


class Check:
    """The `check` fixture: explicit verdicts for a test's clauses."""

    def __init__(self, level_of, on_repro=None):
        self._level_of = level_of
        self._on_repro = on_repro  # streams the snippet, so a crash still has its reproducer
        self.records = []  # (clause, verdict, message)
        self.repro_text = None
        self.peer = None  # the other library of an interop check (reports/README.md: `peer`)
        self.feeds = "valid"  # what the test feeds the library (its `feeds` marker)

    def set_peer(self, name):
        """Names the other library of this test (the producer when the target consumes):
        every record of the test then carries `peer`."""
        self.peer = None if name is None else str(name)

    def level(self, clause):
        return self._level_of(clause)

    def record(self, clause, verdict, message=""):
        check_verdict(verdict)
        self.records.append((str(clause), verdict, _truncate(message)))

    def that(self, cond, clause, message=""):
        """Records pass, or fail (MUST) / warn (SHOULD, MAY, INFO); returns bool(cond)."""
        ok = bool(cond)
        self.record(clause, "pass" if ok else breach(self._level_of(clause)), message if not ok else "")
        return ok

    def require(self, cond, clause, message=""):
        """Like that(), but stops the test when the check fails."""
        if not self.that(cond, clause, message):
            raise CheckFailure("%s: %s" % (clause, message))
        return True

    def equal(self, actual, expected, clause, message=""):
        try:
            ok = bool(actual == expected)
        except Exception:
            ok = False
        if ok:
            return self.that(True, clause)
        detail = "got %s, expected %s" % (_short(actual), _short(expected))
        if isinstance(actual, (bytes, bytearray)) and isinstance(expected, (bytes, bytearray)):
            i = _first_difference(actual, expected)
            detail += " (first difference at byte %s; lengths %d and %d)" % (i, len(actual), len(expected))
        return self.that(False, clause, "%s: %s" % (message, detail) if message else detail)

    def accepted(self, clause, message):
        """The library accepted what the check fed it, where it should have refused: a breach
        of the clause on valid input (fail for MUST, warn otherwise); on invalid input or an
        invalid argument a warn that cites the reading (the behaviour is unspecified)."""
        if self.feeds == "valid":
            self.record(clause, breach(self._level_of(clause)), message)
        else:
            self.record(clause, "warn", "%s; it is %s: %s" % (message, _WHAT[self.feeds],
                                                              _UNSPECIFIED % _WHAT[self.feeds]))

    def warn(self, clause, message=""):
        self.record(clause, "warn", message)

    @staticmethod
    def unclean(refusal):
        """Why a refusal is not clean, or None when it is. `refusal` is the exception that
        refused, or an object holding it as `.exc`. Never clean: a SystemError, and an exception
        whose message is CPython's for a C function that failed without setting an exception
        or returned a result with one set."""
        exc = refusal if isinstance(refusal, BaseException) or refusal is None else refusal.exc
        return _snippet.unclean(exc)  # the rule a reproducer asserts (expect_clean)

    def refusal(self, clause, refusal, what, verdict=None):
        """The clean-refusal rule (unclean()): records pass, or "WHAT raised WHY" as `verdict`
        (default: the clause's breach, as that() records it); returns True when clean."""
        why = self.unclean(refusal)
        if why is None or verdict is None:
            return self.that(why is None, clause, "%s raised %s" % (what, why))
        self.record(clause, verdict, "%s raised %s" % (what, why))
        return False

    def repro(self, lines, crash_as=None):
        """Sets the reproducer snippet for every non-pass result of this test. `crash_as`
        ({"clauses": [...], "input": kind, "doing": "probing ..."}) is for a snippet of a step
        that is not the test's own case (a probe of what the consumer takes): a death during it
        is recorded under those clauses, not the test's. The next repro() call ends it."""
        if lines is None:
            self.repro_text = None
        elif isinstance(lines, str) and "\n" in lines:
            self.repro_text = lines if lines.endswith("\n") else lines + "\n"
        else:
            self.repro_text = _repro.snippet([], lines)
        if self._on_repro is not None and self.repro_text:
            self._on_repro(self.repro_text, crash_as)


class _ItemState:
    def __init__(self, check, clauses, role):
        self.check = check
        self.clauses = clauses
        self.role = role
        self.forced = None  # (verdict, message): decided without running the test
        self.phases = {}  # when -> (report, excinfo)
        self.start = time.perf_counter()


def _location(excinfo):
    try:
        entry = excinfo.traceback[-1]
        return "%s:%d" % (os.path.basename(str(entry.path)), entry.lineno + 1)
    except Exception:
        return "?"


_CALLS = ("CALL", "CALL_KW", "CALL_FUNCTION_EX", "PRECALL", "CALL_FUNCTION", "CALL_METHOD", "CALL_FUNCTION_KW")
_RAISES = ("RAISE_VARARGS", "RERAISE")
_BINDING = re.compile(r"^([\w.]+)\(\) (missing \d+ required|got an unexpected keyword|takes \d+ positional|takes no "
                      r"|got multiple values)")


def _ours(path, roots):
    """True for a file under one of `roots` (the suites being run, the dlconform package),
    except pyref's (a library under test that lives in the package)."""
    path = os.path.abspath(str(path))
    if path.startswith(os.path.join(PACKAGE_DIR, "pyref") + os.sep):
        return False
    return any(path.startswith(root + os.sep) for root in roots)


def _ours_by_name(qualname, roots):
    """True when a function of that qualified name is defined in one of our modules."""
    for mod in list(sys.modules.values()):
        if not _ours(getattr(mod, "__file__", None) or "/", roots):
            continue
        obj = mod
        for part in qualname.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        code = getattr(obj, "__code__", None)
        if code is not None and _ours(code.co_filename, roots):
            return True
    return False


def harness_error(excinfo, roots):
    """True when an exception the test did not expect is the suite's own fault rather than the
    library's: an operation of the suites' or the harness's code raised it (a lookup, an index,
    arithmetic: not a call into the library, not a `raise`), or one of our functions was called
    with the wrong arguments. Exceptions a library raises inside a call pass through a call
    instruction and stay the library's."""
    tb = excinfo.tb
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or not _ours(tb.tb_frame.f_code.co_filename, roots):
        return False
    e = excinfo.value
    try:
        op = next((i.opname for i in dis.get_instructions(tb.tb_frame.f_code) if i.offset == tb.tb_lasti), "")
    except Exception:  # noqa: BLE001 - an unreadable frame is not evidence
        return False
    if op in _RAISES:
        return False
    if op in _CALLS:
        m = _BINDING.match(str(e)) if isinstance(e, TypeError) else None
        return bool(m) and _ours_by_name(m.group(1), roots)
    return True


def _exc_message(e):
    text = str(e)
    return text.splitlines()[0] if text else ""


def outcome_for_pytest(item, records, rep=None):
    """(outcome, longrepr) of a test whose verdicts are `records`, for pytest and its JUnit
    XML: any fail, crash, timeout or error fails it with 'CLAUSE verdict (LEVEL): message'; a
    test whose clauses are all unsupported or skip is skipped with the reasons; otherwise it
    passes, and each warn becomes a DlconformWarning naming its clause. Every clause's verdict
    becomes a test property (dlconform:CLAUSE)."""
    for r in records:
        item.user_properties.append(("dlconform:" + r["clause"], r["verdict"]))
    bad = [r for r in records if r["verdict"] in FAILING or r["verdict"] == HARNESS_ERROR]
    if bad:
        lines = ["%s %s (%s): %s" % (r["clause"], r["verdict"], r["level"], r["message"]) for r in bad]
        if rep is not None and rep.failed and rep.longrepr is not None:
            lines += ["", str(rep.longrepr)]
        return "failed", "\n".join(lines)
    if records and all(r["verdict"] in ("unsupported", "skip") for r in records):
        reasons = "; ".join(dict.fromkeys("%s: %s" % (r["clause"], r["message"]) for r in records))
        path, lineno, _ = item.location
        return "skipped", (path, (lineno or 0) + 1, "Skipped: " + reasons)
    for r in records:
        if r["verdict"] == "warn":
            item.warn(DlconformWarning("%s warn (%s): %s" % (r["clause"], r["level"], r["message"])))
    return "passed", None


def isolate_items(session, state):
    """Runs the session's items file by file through the runner (one child per file, restarted
    after a crash), then reports each item from its records."""
    import tempfile

    from _pytest.reports import TestReport

    from .runner import Runner

    by_file = {}
    for item in session.items:
        by_file.setdefault(str(item.path), []).append(item)
    with tempfile.TemporaryDirectory(prefix="dlconform-isolate-") as out:
        for path, items in by_file.items():
            folder = os.path.dirname(path)
            runner = Runner(folder, out, catalogue=state.catalogue)
            wanted = {os.path.basename(path) + "::" + it.name: it for it in items}
            records = {}
            for rec in runner.run_target(state.spec, paths=[path]).records:
                records.setdefault(rec["test"], []).append(rec)
            for nodeid, item in wanted.items():
                item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
                recs = records.get(nodeid) or [Record(target=state.spec, clause=SESSION, verdict=HARNESS_ERROR, test=nodeid,
                                                      message="the isolated run gave no result for this test",
                                                      catalogue=state.catalogue)]
                outcome, longrepr = outcome_for_pytest(item, recs)
                duration = sum(r["duration"] for r in recs[:1])
                for when in ("setup", "call", "teardown"):
                    rep = TestReport(item.nodeid, item.location, {}, outcome if when == "call" else "passed",
                                     longrepr if when == "call" else None, when, [], duration if when == "call" else 0.0,
                                     list(item.user_properties))
                    item.ihook.pytest_runtest_logreport(report=rep)
                item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
            if session.shouldfail or session.shouldstop:
                break


class _State:
    def __init__(self, config):
        self.config = config
        #: the code that is ours (the package, the suites, the folders of the collected test
        #: files): an exception it raises itself is a harness error
        self.roots = (SUITES_DIR, PACKAGE_DIR)
        given = requested_target(config)
        self.spec = given or "ref"
        self.explicit_target = given is not None
        self.isolate = _option(config, "--dlconform-isolate") or os.environ.get("DLCONFORM_ISOLATE") == "1"
        self._target = None
        self._target_error = None
        path = config.getoption("--dlc-results")
        self._out = open(path, "a", encoding="utf-8") if path else None
        self.globs = [g.strip() for arg in config.getoption("--dlc-clause") for g in arg.split(",") if g.strip()]
        self.exclude = set()
        ex = config.getoption("--dlc-exclude-file")
        if ex:
            try:
                with open(ex, encoding="utf-8") as f:
                    self.exclude = {line.rstrip("\n") for line in f if line.strip()}
            except OSError as e:
                raise pytest.UsageError("dlconform: cannot read --dlc-exclude-file %s: %s" % (ex, e))
        self.catalogue = self._load_catalogue(config)
        if self.explicit_target:
            self.get_target()  # fail early, as a usage error, when the target cannot load

    def _load_catalogue(self, config):
        path = config.getoption("--dlc-catalogue")
        if not path:
            for arg in config.args or []:
                base = arg.split("::")[0]
                d = base if os.path.isdir(base) else os.path.dirname(base)
                if os.path.isfile(os.path.join(d, "clauses.json")):
                    path = os.path.join(d, "clauses.json")
                    break
        try:
            return _catalogue.Catalogue.load(path)
        except _catalogue.CatalogueError as e:
            raise pytest.UsageError("dlconform: %s" % e)

    def get_target(self):
        if self._target is None:
            from .targets.base import TargetError
            from .targets.loader import load

            try:
                self._target = load(self.spec)
            except TargetError as e:
                raise pytest.UsageError("dlconform: target %r: %s" % (self.spec, e))
        return self._target

    # ---- output
    def write(self, event):
        if self._out is None:
            return
        self._out.write(json.dumps(event, default=str) + "\n")
        self._out.flush()

    def close(self):
        if self._out is not None:
            self._out.close()
            self._out = None

    def level(self, clause):
        return self.catalogue.level(clause)

    def item_state(self, item):
        st = getattr(item, "_dlc", None)
        if st is None:
            streamed = {}

            def on_repro(text, crash_as=None, nodeid=item.nodeid):
                if streamed.get("text") != text or streamed.get("crash_as") != crash_as:
                    streamed["text"], streamed["crash_as"] = text, crash_as
                    ev = {"event": "repro", "test": nodeid, "repro": text}
                    if crash_as:
                        ev["crash_as"] = crash_as
                    self.write(ev)

            st = _ItemState(Check(self.level, on_repro), item_clauses(item) or [UNMARKED], item_role(item))
            st.check.feeds = item_feeds(item)
            item._dlc = st
        return st

    # ---- hooks
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        keep, drop = [], []
        for item in items:
            if item.nodeid in self.exclude:
                drop.append(item)
                continue
            if self.globs:
                clauses = item_clauses(item)
                if not any(fnmatch.fnmatchcase(c, g) for c in clauses for g in self.globs):
                    drop.append(item)
                    continue
            keep.append(item)
        if drop:
            config.hook.pytest_deselected(items=drop)
            items[:] = keep
        self.roots = tuple(dict.fromkeys(self.roots + tuple(str(item.path.parent) for item in keep)))

    def pytest_collection_finish(self, session):
        self.write({"event": "collected", "count": len(session.items)})

    def pytest_collectreport(self, report):
        if report.failed:
            text = str(report.longrepr) if report.longrepr is not None else "collection failed"
            tail = "\n".join(text.strip().splitlines()[-15:])
            self.write(self._record(report.nodeid or "<collection>", "*", None, "crash",
                                    "collection error in %s: %s" % (report.nodeid or "suites", tail), "", 0.0))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        st = self.item_state(item)
        st.start = time.perf_counter()
        self.write({"event": "begin", "test": item.nodeid, "clauses": st.clauses, "role": st.role or "any",
                    "input": st.check.feeds,
                    "time": time.time()})
        yield
        try:
            for rec in self.results(item, st):
                self.write(rec)
        except Exception as e:  # the plugin must never lose a test silently
            for clause in st.clauses:
                self.write(self._record(item.nodeid, clause, st.role, "fail",
                                        "unexpected %s in the dlconform plugin: %s" % (type(e).__name__, e),
                                        "", time.perf_counter() - st.start))

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item):
        st = self.item_state(item)
        if st.role:
            target = self.get_target()
            if not target.has_role(st.role):
                st.forced = ("unsupported", "target %s is not a %s (roles: %s)"
                             % (self.spec, st.role, ", ".join(sorted(target.roles)) or "none"))
                pytest.skip(st.forced[1])

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        st = getattr(item, "_dlc", None)
        if st is None:
            return
        rep = outcome.get_result()
        st.phases[call.when] = (rep, call.excinfo)
        if call.when == "call" or (call.when == "setup" and not rep.passed):
            self._tell_pytest(item, st, rep)

    def _tell_pytest(self, item, st, rep):
        """Makes pytest's own outcome of the test say what its verdicts say (outcome_for_pytest),
        so that plain pytest and its JUnit XML tell the truth."""
        rep.outcome, rep.longrepr = outcome_for_pytest(item, self.results(item, st), rep)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """--dlconform-isolate: each test file runs in the isolating runner's children (a
        crash costs one check, as in `dlconform run`); their verdicts become this session's
        test outcomes."""
        if not self.isolate or self._out is not None or session.config.option.collectonly:
            return None
        isolate_items(session, self)
        return True

    @pytest.hookimpl(hookwrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem):
        """pytest names the running test in os.environ (PYTEST_CURRENT_TEST): the library under
        test must not see that, so the check's own call runs without it."""
        current = os.environ.pop("PYTEST_CURRENT_TEST", None)
        try:
            yield
        finally:
            if current is not None:
                os.environ["PYTEST_CURRENT_TEST"] = current

    def pytest_sessionfinish(self, session, exitstatus):
        self.write({"event": "end", "exitstatus": int(exitstatus), "collected": getattr(session, "testscollected", 0),
                    "time": time.time()})

    # ---- verdicts
    def _outcome(self, st):
        """(kind, message, warn_clause) from the test's phases; kind in pass/skip/unsupported/
        warn/assert/unexpected."""
        for when in ("setup", "call", "teardown"):
            rep_exc = st.phases.get(when)
            if rep_exc is None:
                continue
            rep, excinfo = rep_exc
            if excinfo is None:
                continue
            e = excinfo.value
            where = "" if when == "call" else " in %s" % when
            if isinstance(e, Unsupported):
                return "unsupported", str(e) or "not supported by the target", None
            if isinstance(e, Warn):
                return "warn", e.message or str(e), e.clause
            if isinstance(e, pytest.skip.Exception):
                if getattr(rep, "wasxfail", None) is not None:
                    return "skip", "xfail: %s" % rep.wasxfail, None
                return "skip", getattr(e, "msg", None) or str(e), None
            if hasattr(pytest, "xfail") and isinstance(e, pytest.xfail.Exception):
                return "skip", "xfail: %s" % _exc_message(e), None
            if isinstance(e, AssertionError):
                text = str(e).strip() or "assertion failed"
                return "assert", _truncate("%s (at %s%s)" % (text, _location(excinfo), where)), None
            if harness_error(excinfo, self.roots):
                return HARNESS_ERROR, _truncate("harness error: the suite's own code raised %s%s: %s (at %s); "
                                                "this says nothing about the library" % (
                                                    type(e).__name__, where, _exc_message(e), _location(excinfo))), None
            return "unexpected", _truncate("unexpected %s%s: %s (at %s)" % (
                type(e).__name__, where, _exc_message(e), _location(excinfo))), None
        return "pass", "", None

    def _record(self, nodeid, clause, role, verdict, message, repro, duration):
        rec = Record(target=self.spec, role=role, clause=clause, verdict=verdict, message=message, repro=repro,
                     test=nodeid, duration=round(duration, 6), catalogue=self.catalogue)
        return dict(event="result", **rec)

    def results(self, item, st):
        duration = sum(rep.duration for rep, _ in st.phases.values()) if st.phases else time.perf_counter() - st.start
        explicit = {}
        for clause, verdict, message in st.check.records:
            explicit.setdefault(clause, []).append((verdict, message))
        clauses = list(st.clauses) + [c for c in explicit if c not in st.clauses]
        if st.forced:
            kind, message, warn_clause = st.forced[0], st.forced[1], None
        else:
            kind, message, warn_clause = self._outcome(st)
        out = []
        for clause in clauses:
            if clause in explicit and not st.forced:
                recs = list(explicit[clause])
                # An exception after explicit records is a verdict too: earlier passes never hide it.
                if kind == "assert":
                    recs.append((breach(self.level(clause)), message))
                elif kind in ("unexpected", HARNESS_ERROR):
                    recs.append(("fail" if kind == "unexpected" else kind, message))
                verdict = worst(v for v, _ in recs)
                msgs = [m for v, m in recs if v == verdict and m] or [m for v, m in recs if v != "pass" and m]
                msg = "; ".join(dict.fromkeys(msgs))
            elif kind == "assert":
                verdict, msg = breach(self.level(clause)), message
            elif kind == "unexpected":
                verdict, msg = "fail", message
            elif kind == HARNESS_ERROR:
                verdict, msg = kind, message
            elif kind == "warn":
                verdict = "warn"
                msg = message if warn_clause in (None, clause) else "%s (raised for %s)" % (message, warn_clause)
            else:
                verdict, msg = kind, message
            repro = ""
            if verdict != "pass":
                repro = st.check.repro_text or _repro.run_command(self.spec, clause if clause != UNMARKED else "*",
                                                                  item.nodeid)
            rec = self._record(item.nodeid, clause, st.role, verdict, _truncate(msg), repro, duration)
            if st.check.peer is not None:
                rec["peer"] = st.check.peer
            if st.check.feeds != "valid":
                rec["input"] = st.check.feeds
            out.append(rec)
        return out
