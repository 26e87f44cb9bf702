"""The pytest plugin that runs inside each target's child process.

Load with `-p dlconform.pytest_plugin`. Options: --dlc-target SPEC, --dlc-results FILE,
--dlc-clause GLOB (repeatable, comma-separated), --dlc-exclude-file FILE, --dlc-catalogue FILE.
It writes the results protocol of harness/README.md to --dlc-results: a `begin` line before
each test, one `result` line per clause after it, `end` when the session finishes; each line
is flushed as it is written so that nothing is lost when the process dies.
"""
import ast
import fnmatch
import functools
import gc
import hashlib
import json
import os
import re
import sys
import time

import pytest

from . import PACKAGE_DIR, SUITES_DIR
from . import catalogue as _catalogue
from . import known as _known
from . import repro as _repro
from .device_files import DEVICE_TESTS
from .kit.check import FAILING, FEEDS, HARNESS_ERROR, Check, Unsupported, Warn, breach, truncate, worst
from .records import SESSION, Record

UNMARKED = "UNMARKED"
#: the word for a device type in records' `device` (as the suites' `device` marker names it)
DEVICE_KINDS = {2: "cuda"}


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
    group.addoption("--dlc-claims", default=None,
                    help="folder shared by the lanes of a target's run: a test runs in the lane that claims it")
    group.addoption("--dlc-lane", default="0", help="this child's lane (with --dlc-claims)")
    group.addoption("--dlc-lanes", default="1", help="how many lanes share the claims folder")
    group.addoption("--dlc-in-order", action="store_true", default=False,
                    help="the lane works through the test files in the order given (a resumed lane) instead of "
                         "starting K/N of the way down")
    group.addoption("--dlc-collect-map", default=None,
                    help="write every collected test (node id, file, clauses, claim) to this JSON file")


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
        group.addoption("--dlconform-known", default=None, metavar="FILE",
                        help="a known-failures file (as `dlconform run --known`; also DLCONFORM_KNOWN): a fail, "
                             "crash or timeout it lists is reported as xfailed, and does not fail the session")
        group.addoption("--dlconform-isolate", action="store_true", default=False,
                        help="run each test file in child processes, as `dlconform run` does, so that a "
                             "crash costs one check instead of the session (also DLCONFORM_ISOLATE=1)")

    @pytest.hookimpl(tryfirst=True)
    def pytest_configure(self, config):
        # `pytest --help` configures before the command line's paths are parsed: no config.args
        paths = getattr(config, "args", None) or ()
        asked = requested_target(config) or any("dlconform.suites" in str(a) for a in paths)
        if asked and not config.pluginmanager.has_plugin(__name__):
            config.pluginmanager.import_plugin(__name__)


#: the pytest11 entry point (pyproject.toml)
entry = _EntryPoint()


def pytest_configure(config):
    config.addinivalue_line("markers", "clause(*ids): the catalogue clauses a test checks")
    config.addinivalue_line("markers", "role(name): producer, consumer or both: what the target must be")
    config.addinivalue_line("markers", "feeds(kind): what the check feeds the library: valid (the default), "
                                       "invalid (malformed metadata) or argument (an invalid argument)")
    config.addinivalue_line("markers", "device(kind): the device the check's tensors are on (cuda: the target's "
                                       "stream device); without it, the host's CPU")
    config.addinivalue_line("markers", "lane_group(name): tests that share a cost paid once per process (a peer "
                                       "library's import) and so run in one lane of the runner")
    state = _State(config)
    config._dlc_state = state
    config.pluginmanager.register(state, "dlconform-state")


def pytest_unconfigure(config):
    state = getattr(config, "_dlc_state", None)
    if state is not None:
        state.close()


def pytest_pycollect_makemodule(module_path, parent):
    """A test file named alone and outside the rootdir (`pytest --pyargs dlconform.suites.test_layout`
    from a project's folder) would get pytest's node id "" (relative to itself): its tests
    `::test_x`, its JUnit classname "". It keeps its file name, as in a run of the whole suites."""
    if module_path.name == "__init__.py":
        return None
    module = pytest.Module.from_parent(parent, path=module_path)
    return pytest.Module.from_parent(parent, path=module_path, nodeid=module_path.name) if not module.nodeid else None


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
def item_clauses(item):
    ids = []
    for mark in reversed(list(item.iter_markers("clause"))):  # outermost (module/class) first
        for arg in mark.args:
            for cid in (arg if isinstance(arg, (list, tuple)) else [arg]):
                if cid not in ids:
                    ids.append(str(cid))
    return ids


def claim_key(item):
    """What a lane claims to run the item (pytest_plugin: claimed_items): its lane_group
    ("group:NAME"), else its node id."""
    mark = item.get_closest_marker("lane_group")
    return "group:%s" % mark.args[0] if mark is not None and mark.args else item.nodeid


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


class _ItemState:
    def __init__(self, check, clauses, role):
        self.check = check
        self.clauses = clauses
        self.role = role
        self.forced = None  # (verdict, message): decided without running the test
        self.phases = {}  # when -> (report, excinfo)
        self.results = None  # (phases seen, result events): results() makes them once
        self.start = time.perf_counter()


def _location(excinfo):
    try:
        entry = excinfo.traceback[-1]
        return "%s:%d" % (os.path.basename(str(entry.path)), entry.lineno + 1)
    except Exception:
        return "?"


_BINDING = re.compile(r"^([\w.]+)\(\) (missing \d+ required|got an unexpected keyword|takes \d+ positional|takes no "
                      r"|got multiple values)")


#: the target adapter's methods that read what the library made (its oracle): an exception an
#: operation there raises is dlconform's side, like one in the suites (harness_error)
ORACLE_METHODS = ("expected", "describe", "native_layout")
_ORACLE_CODES = set()


#: the adapter's methods that ask the library for a tensor or a view of one (_made_or_unsupported)
MAKERS = ("make", "transpose", "slice", "flip", "readonly")


def _made_or_unsupported(target, name):
    """target.`name` (one of MAKERS), where a tensor or view the library cannot make (an
    exception of the adapter's method: a dtype its device lacks, a rank it caps, an empty shape
    or a step it refuses) is Unsupported naming it: making one is no DLPack rule, so it is never
    a verdict on the library."""
    method = getattr(target, name)

    @functools.wraps(method)
    def guarded(*args, **kwargs):
        try:
            return method(*args, **kwargs)
        except Unsupported:
            raise
        except Exception as e:  # noqa: BLE001
            what = ("a %s tensor of shape %r" % (args[0], tuple(args[1])) if name == "make" and len(args) > 1
                    else "the view %s(%s)" % (name, ", ".join(map(repr, args[1:]))))
            raise Unsupported("%s could not make %s, so the check has nothing to judge (%s: %s)" % (
                target.name, what, type(e).__name__, _exc_message(e))) from e
    return guarded


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


@functools.lru_cache(maxsize=64)
def _nodes_by_span(path):
    """{(lineno, end_lineno, col, end_col): AST node} of a source file. Where nodes share a span
    (a statement that is one call), the innermost one: ast.walk visits parents first."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    out = {}
    for node in ast.walk(tree):
        if hasattr(node, "end_col_offset") and node.end_col_offset is not None:
            out[(node.lineno, node.end_lineno, node.col_offset, node.end_col_offset)] = node
    return out


def raising_node(tb):
    """The AST node of the expression or statement that raised in the traceback entry `tb`
    (from the code object's source positions), or None when it cannot be found."""
    code = tb.tb_frame.f_code
    try:
        positions = list(code.co_positions())[tb.tb_lasti // 2]
        return _nodes_by_span(code.co_filename).get(tuple(positions))
    except Exception:  # no positions, no file: unknown
        return None


def harness_error(excinfo, roots):
    """True when an exception the test did not expect is the suite's own fault rather than the
    library's, judged by where it was raised:
    - in a file of the library (its innermost frame is not ours): the library's;
    - by a `raise` of ours: a deliberate verdict, not an error;
    - by a call in our code (into the library, whose C functions have no frame): the library's,
      unless it is a TypeError saying that one of our own functions was called wrongly;
    - by any other operation of our code (a lookup, an index, arithmetic, a name): ours."""
    tb = excinfo.tb
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None or not (_ours(tb.tb_frame.f_code.co_filename, roots) or tb.tb_frame.f_code in _ORACLE_CODES):
        return False
    e = excinfo.value
    node = raising_node(tb)
    if isinstance(node, ast.Assert) and not isinstance(e, AssertionError):
        # pytest rewrites an assert, giving every operation in it the statement's span: an
        # exception other than the assertion's own came from its expression, a call there or not
        node = node if any(isinstance(n, ast.Call) for n in ast.walk(node.test)) else node.test
        if isinstance(node, ast.Assert):
            node = next(n for n in ast.walk(node.test) if isinstance(n, ast.Call))
    if node is None or isinstance(node, (ast.Raise, ast.Assert)):
        return False
    if isinstance(node, ast.Call):
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
    becomes a test property (dlconform:CLAUSE). A finding a known file lists (`known`, marked
    by _State.mark_known) does not fail the test: with no other, it is xfailed (xfail_reason)."""
    for r in records:
        item.user_properties.append(("dlconform:" + r["clause"], r["verdict"]))
    bad = [r for r in records if (r["verdict"] in FAILING and not r.get("known")) or r["verdict"] == HARNESS_ERROR]
    if not bad and xfail_reason(records):
        return "skipped", None
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


def xfail_reason(records):
    """What a test's known findings say, as pytest's xfail reason; "" when it has none."""
    return "; ".join("known: %s %s (%s)" % (r["clause"], r["verdict"], r["message"][:200])
                     for r in records if r.get("known"))


def isolate_items(session, state):
    """Runs the session's items file by file through the runner (one child per file, restarted
    after a crash), then reports each item from its records."""
    import contextlib
    import tempfile

    from _pytest.reports import TestReport
    from _pytest.warnings import catch_warnings_for_item

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
                recs = records.get(nodeid) or [
                    Record(target=state.spec, clause=SESSION, verdict=HARNESS_ERROR, test=nodeid,
                           message="the isolated run gave no result for this test", catalogue=state.catalogue)]
                # a warn becomes a DlconformWarning of the test's, in pytest's warnings summary
                # and count, as pytest's own protocol catches it in a run in this process
                with (catch_warnings_for_item(item.config, item.ihook, "runtest", item)
                      if item.config.pluginmanager.has_plugin("warnings") else contextlib.nullcontext()):
                    outcome, longrepr = outcome_for_pytest(item, state.mark_known(recs))
                duration = sum(r["duration"] for r in recs[:1])
                for when in ("setup", "call", "teardown"):
                    rep = TestReport(item.nodeid, item.location, {}, outcome if when == "call" else "passed",
                                     longrepr if when == "call" else None, when, [],
                                     duration if when == "call" else 0.0, list(item.user_properties))
                    if when == "call" and outcome == "skipped" and longrepr is None:
                        rep.wasxfail = xfail_reason(recs)
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
        self._versions = None  # the target's, once mark_known asks
        known_path = _option(config, "--dlconform-known") or os.environ.get("DLCONFORM_KNOWN") or None
        try:
            self.known = _known.parse(known_path) if known_path else []
        except _known.KnownFileError as e:
            raise pytest.UsageError("dlconform: %s" % e)
        self._target = None
        self._target_error = None
        self._frozen = False  # _freeze_heap ran
        path = config.getoption("--dlc-results")
        try:
            self._out = open(path, "a", encoding="utf-8") if path else None
        except OSError as e:
            raise pytest.UsageError("dlconform: cannot write --dlc-results %s: %s" % (path, e.strerror or e))
        # clause ids are upper case (CAP-01): a glob is taken in any case
        self.globs = [g.strip().upper() for arg in config.getoption("--dlc-clause") for g in arg.split(",")
                      if g.strip()]
        self.exclude = set()
        ex = config.getoption("--dlc-exclude-file")
        if ex:
            try:
                with open(ex, encoding="utf-8") as f:
                    self.exclude = {line.rstrip("\n") for line in f if line.strip()}
            except OSError as e:
                raise pytest.UsageError("dlconform: cannot read --dlc-exclude-file %s: %s" % (ex, e))
        self.catalogue = self._load_catalogue(config)
        unmatched = self.catalogue.unmatched(self.globs)
        if unmatched:  # as `dlconform run --clause` says it: a typo must not pass as "no tests"
            raise pytest.UsageError("dlconform: --dlc-clause %s matches no clause of the catalogue (ids look like "
                                    "CAP-01; suites/clauses.md lists them)" % ", ".join(repr(g) for g in unmatched))
        self.claims = config.getoption("--dlc-claims")
        self.lane = str(config.getoption("--dlc-lane"))
        try:
            self.lanes = max(1, int(config.getoption("--dlc-lanes")))
        except ValueError:
            raise pytest.UsageError("dlconform: --dlc-lanes takes a count, not %r" % config.getoption("--dlc-lanes"))
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
            # the adapter's oracle (how it reads values and layouts) is dlconform's side: a bug
            # there is an error. Not the rest of its file, which may be the library itself.
            for name in ORACLE_METHODS:
                code = getattr(getattr(type(self._target), name, None), "__code__", None)
                if code is not None:
                    _ORACLE_CODES.add(code)
            for name in MAKERS:
                setattr(self._target, name, _made_or_unsupported(self._target, name))
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
            check = Check(self.level, item_feeds(item), on_case=functools.partial(self._stream_case, item))
            st = _ItemState(check, item_clauses(item) or [UNMARKED], item_role(item))
            item._dlc = st
        return st

    def case_of(self, item, st, clause=None):
        """(function, arguments, environment) that reproduce the test's finding on `clause`: the
        case set when that finding was first recorded, else the case the test set last, else the
        test function with its parameters."""
        case = st.check.found.get(clause, st.check.case) if clause is not None else st.check.case
        if case is not None:
            return case
        params = getattr(getattr(item, "callspec", None), "params", {})
        return item.function, dict(params), {}

    def levels(self, st, clauses):
        return {c: self.level(c) for c in clauses if c not in (UNMARKED, SESSION)}

    def script(self, item, st, case, focus=None, verdict=None):
        """The reproducer of `case` ((function, arguments)), about `focus` and its `verdict`; a
        rerun command where the case cannot be written out."""
        fn, args, env = case
        runtime = os.environ.get("DLCONFORM_CUDART")  # kit.cuda.ENV: the CUDA runtime this run used
        if runtime:
            env = dict(env or {}, DLCONFORM_CUDART=runtime)
        try:
            return _repro.script(fn, args, self.spec, focus=focus, levels=self.levels(st, st.clauses),
                                 feeds=st.check.feeds, where=item.nodeid, env=env, verdict=verdict)
        except _repro.NotReproducible as e:
            return _repro.run_command(self.spec, focus or "*", item.nodeid) + "\n# (no script: %s)" % e

    def _stream_case(self, item, case, crash_as=None):
        """Streams the reproducer of what the test runs from now on, so that a test that dies has
        one (the runner records it with the crash)."""
        st = self.item_state(item)
        ev = {"event": "repro", "test": item.nodeid, "repro": self.script(item, st, case or self.case_of(item, st))}
        if crash_as:
            ev["crash_as"] = crash_as
        self.write(ev)

    # ---- hooks
    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, session, config, items):
        where = config.getoption("--dlc-collect-map")
        if where:  # every test, before any is deselected: the runner's map of the suites
            with open(where, "w", encoding="utf-8") as f:
                json.dump([{"id": item.nodeid, "file": str(item.path), "clauses": item_clauses(item),
                            "claim": claim_key(item)} for item in items], f)
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
            # the suites import dlconform and their support, never the library (loaded before
            # collection): a module that does not collect is the suite's own error
            self.write(self._record(report.nodeid or "<collection>", "*", None, HARNESS_ERROR,
                                    "collection error in %s (the suite's, not the library's): %s"
                                    % (report.nodeid or "suites", tail), "", 0.0))

    #: objects outside the frozen heap that make _freeze_heap freeze again between checks
    REFREEZE_OBJECTS = 20000

    def _freeze_heap(self):
        """Between checks of a child: the garbage is collected and what is alive is frozen
        (gc.freeze), so the checks' full collections (hundreds of gc.collect() calls that make
        deleters run) walk only what the running check made, not pytest, hypothesis, the library
        and the peers a check imported (interop). Before the first check the target is made (the
        library imported); later, only when the heap outside the frozen part grew past
        REFREEZE_OBJECTS. What is alive between checks is held by modules and caches; at the
        session's end it is all collected once (pytest_sessionfinish)."""
        if not self._frozen:
            self._frozen = True
            try:
                self.get_target()
            except Exception:  # the first check reports why the target cannot be made
                pass
        elif len(gc.get_objects()) < self.REFREEZE_OBJECTS:
            return
        gc.collect()
        gc.freeze()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        if self._out is not None:
            self._freeze_heap()
        st = self.item_state(item)
        st.start = time.perf_counter()
        self.write({"event": "begin", "test": item.nodeid, "clauses": st.clauses, "role": st.role or "any",
                    "input": st.check.feeds,
                    "time": time.time()})
        if self._out is not None:
            self._stream_case(item, None)
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
        why = self._host_check_elsewhere(item, st.role)
        if why:
            st.forced = ("skip", why)
            pytest.skip(why)

    @staticmethod
    def _variant_device(target):
        """(device type, id) of a device variant's tensors (target.device); None on the CPU."""
        device = tuple(getattr(target, "device", None) or (1, 0))
        return None if device[0] == 1 else device

    def _host_check_elsewhere(self, item, role):
        """Why a check of host tensors (no `device` marker) does not run on a device variant,
        or None where it runs: the producer checks of the device run's host files
        (device_files.DEVICE_TESTS) run on the variant's device tensors where its adapter makes them
        (target.device_tensors); the consumer checks feed host capsules, and the producer checks
        of the other host files host memory of their own (the exchange table's forged tensors):
        the library's CPU run judges them."""
        target = self.get_target()
        if self._variant_device(target) is None or item.get_closest_marker("device") is not None:
            return None
        if role != "producer":
            return ("%s: a %s check feeds host memory; the library's own CPU target judges it, not its device "
                    "variant" % (self.spec, role or "role-free"))
        if not getattr(target, "device_tensors", False):
            return "%s: its adapter makes no device tensors for the host checks; its device checks judge it" \
                % self.spec
        name = os.path.basename(str(item.fspath))
        if name not in DEVICE_TESTS.get({2: "cuda"}.get(self._variant_device(target)[0]), ()):
            return ("%s: %s's producer checks feed host memory of their own beside the library's tensors; the "
                    "library's own CPU target judges them (a device run's files: device_files.DEVICE_TESTS)"
                    % (self.spec, name))
        return None

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
        records = self.mark_known(self.results(item, st))
        rep.outcome, rep.longrepr = outcome_for_pytest(item, records, rep)
        if rep.outcome == "skipped" and rep.longrepr is None:
            rep.wasxfail = xfail_reason(records)

    def mark_known(self, records):
        """The records, their findings that the known file given (--dlconform-known) lists marked
        `known` (known.apply, as `dlconform run --known` marks them), at the target's versions
        (read once)."""
        if not self.known or not records:
            return records
        if self._versions is None:
            try:
                self._versions = self.get_target().versions()
            except Exception:  # noqa: BLE001 - a target whose versions cannot be read: lines without versions hold
                self._versions = {}
        _known.apply(self.known, records, {self.spec: {"versions": self._versions}})
        return records

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        """--dlconform-isolate: each test file runs in the isolating runner's children (a
        crash costs one check, as in `dlconform run`); their verdicts become this session's
        test outcomes. --dlc-claims: the runner's lanes share the tests (claimed_items)."""
        if session.config.option.collectonly:
            return None
        if self.claims and self._out is not None:
            if session.testsfailed and not session.config.option.continue_on_collection_errors:
                return None  # pytest's own loop says why it stops
            for item in self.claimed_items(session.items):
                # nextitem None: everything is torn down after each test, since the next test
                # this lane runs is not known before it is claimed (the suites' only fixture
                # above function scope is `target`, which the state keeps)
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=None)
                if session.shouldfail:
                    raise session.Failed(session.shouldfail)
                if session.shouldstop:
                    raise session.Interrupted(session.shouldstop)
            return True
        if not self.isolate or self._out is not None:
            return None
        isolate_items(session, self)
        return True

    def claimed_items(self, items):
        """The items this lane runs: each is claimed just before it runs by creating a file
        named after it in the claims folder, which fails where another lane did first. A claim
        of this lane that is still in `items` is this lane's again: the child that made it died
        before the test began (a begun test is in the exclude file).

        Lane K of N starts K/N of the way down the list and wraps around: each lane works
        through a stretch of files of its own until the lanes meet and share the rest (a lane
        resumed after a death, --dlc-in-order, takes the files in the order the runner gives
        them: from the one it was working in). Tests
        marked lane_group(NAME) are claimed as one, under NAME, and run together when the
        first of them is reached: what they share (importing a peer library, 1.5 s for torch)
        is paid by one lane."""
        if self.lanes > 1 and self.lane.isdigit() and not self.config.getoption("--dlc-in-order"):
            start = len(items) * (int(self.lane) % self.lanes) // self.lanes
            items = items[start:] + items[:start]
        groups = {}
        for item in items:
            groups.setdefault(claim_key(item), []).append(item)
        mark = os.path.join(self.claims, "lane-%s.%d" % (self.lane, os.getpid()))
        with open(mark, "w", encoding="utf-8") as f:
            f.write(self.lane)
        done = set()
        try:
            for item in items:
                if item.nodeid in done:
                    continue
                key = claim_key(item)
                path = os.path.join(self.claims, hashlib.sha1(key.encode()).hexdigest())
                try:
                    os.link(mark, path)  # atomic, and the claim holds its lane from the start
                except FileExistsError:
                    try:
                        with open(path, encoding="utf-8") as f:
                            mine = f.read() == self.lane
                    except OSError:
                        mine = False
                    if not mine:
                        continue
                for each in groups[key]:
                    done.add(each.nodeid)
                    yield each
        finally:
            os.unlink(mark)

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
        if self._frozen:
            # After the end (what dies here dies "at the interpreter's exit"): every cycle the
            # checks left is collected with the whole heap unfrozen, and what is still alive is
            # frozen again, so that the interpreter's exit frees what module teardown releases
            # without walking (and, in a forked child, copying) the warm parent's heap twice
            # more: 0.1 s of a child of ref, 0.3 s of one of torch. A cycle that only module
            # teardown makes unreachable is then never finalised, which CPython does not promise
            # for objects alive at exit either.
            gc.unfreeze()
            gc.collect()
            gc.freeze()

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
                return "assert", truncate("%s (at %s%s)" % (text, _location(excinfo), where)), None
            if harness_error(excinfo, self.roots):
                return HARNESS_ERROR, truncate("harness error: the suite's own code raised %s%s: %s (at %s); "
                                                "this says nothing about the library" % (
                                                    type(e).__name__, where, _exc_message(e), _location(excinfo))), None
            return "unexpected", truncate("unexpected %s%s: %s (at %s)" % (
                type(e).__name__, where, _exc_message(e), _location(excinfo))), None
        return "pass", "", None

    def _record(self, nodeid, clause, role, verdict, message, repro, duration, **optional):
        """The result event of one record: the record is made here, once, and every later stage
        (the runner, the reports) passes it on as it is."""
        rec = Record(target=self.spec, role=role, clause=clause, verdict=verdict, message=message, repro=repro,
                     test=nodeid, duration=round(duration, 6), catalogue=self.catalogue, **optional)
        return dict(event="result", **rec)

    def _device(self, item):
        """The device the test's tensors are on, for its records: its `device` marker's kind
        with the target's device id ("cuda:0"), or a device variant's device for the checks
        it runs on its device tensors (target.device_tensors); None, the host's CPU, else."""
        mark = item.get_closest_marker("device")
        device = self._variant_device(self._target)
        if device is None:
            return None
        if mark is not None:
            return "%s:%d" % (mark.args[0], device[1])
        # a producer check of host tensors run on a device variant's device tensors
        kind = DEVICE_KINDS.get(device[0])
        producer = getattr(getattr(item, "_dlc", None), "role", None) == "producer"
        return "%s:%d" % (kind, device[1]) if kind and producer and getattr(self._target, "device_tensors", False) \
            else None

    def results(self, item, st):
        """The test's result events, made once its phases are known (pytest's report of the call
        and the protocol's end both ask)."""
        if st.results is None or st.results[0] != len(st.phases):
            st.results = (len(st.phases), self._results(item, st))
        return st.results[1]

    def _results(self, item, st):
        duration = sum(rep.duration for rep, _ in st.phases.values()) if st.phases else time.perf_counter() - st.start
        explicit = {}
        for clause, verdict, message in st.check.records:
            explicit.setdefault(clause, []).append((verdict, message))
        for clause, why in st.check.unreached.items():  # no case reached it: unsupported, with the reasons
            if clause not in explicit:
                explicit[clause] = [("unsupported", "; ".join(dict.fromkeys(why)))]
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
                repro = (self.script(item, st, self.case_of(item, st, clause), focus=clause, verdict=verdict)
                         if clause != UNMARKED
                         else _repro.run_command(self.spec, "*", item.nodeid))
            out.append(self._record(item.nodeid, clause, st.role, verdict, truncate(msg), repro, duration,
                                    peer=st.check.peer, input=st.check.feeds if st.check.feeds != "valid" else None,
                                    device=self._device(item)))
        return out
