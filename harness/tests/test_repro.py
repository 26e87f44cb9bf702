"""Reproducers written from a check's own code (dlconform/repro.py) and run as checks
(dlconform.kit.reproduce).

A sample suite module is written into a temporary folder and imported: its check uses a helper,
a constant and an import of its own, so the script must carry each by name. The scripts then
run in fresh interpreters: linked (dlconform on the path) and standalone (an empty folder,
`python3 -I`, nothing but the script).
"""
import importlib
import os
import subprocess
import sys
import textwrap

import pytest

from dlconform import kit
from dlconform import repro as R

SAMPLE = '''
"""A sample check module."""
import json

import pytest

from dlconform import kit
from support import dtypes as dty

#: the shape every case uses
SHAPE = (2, 3)
UNUSED = object()
#: computed from an import as the module loads
UINT8 = dty.DTYPES["uint8"]


class _Producer(kit.RecordingProducer):
    """A class whose base is imported."""


def _values(dtype):
    """A helper the check calls."""
    return dty.safe_values(dtype, SHAPE)


@pytest.mark.skipif(False, reason="a decorator the script drops")
def test_sample(target, check, bug=None):
    f = kit.Forge(shape=SHAPE, dtype=UINT8, fill=_values("uint8"))
    _Producer(f)
    got = kit.read_elements(f.capsule())
    check.equal(got, _values("uint8"), "SAMPLE-01", "the forged elements")
    if bug == "also":
        check.record("SAMPLE-02", "warn", "a warn on another clause")
    if bug in ("one", "also"):
        check.record("SAMPLE-01", "fail", "planted " + json.dumps(bug))
    if bug == "raise":
        raise RuntimeError("planted")
    if bug == "unsupported":
        raise kit.Unsupported("no such feature")


def test_nested(target, check):
    def inner(target, check):
        pass
    return inner
'''


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    folder = tmp_path_factory.mktemp("suite")
    (folder / "sample_checks.py").write_text(SAMPLE)
    sys.path.insert(0, str(folder))
    try:
        yield importlib.import_module("sample_checks")
    finally:
        sys.path.remove(str(folder))
        sys.modules.pop("sample_checks", None)


def _run(text, folder, standalone=False):
    path = os.path.join(folder, "repro.py")
    with open(path, "w") as f:
        f.write(text)
    if standalone:
        cmd, env = [sys.executable, "-I", path], {"PATH": "/usr/bin:/bin"}
    else:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([R.HARNESS_DIR, R.SUITES_DIR,
                                                            os.path.dirname(sys.modules["sample_checks"].__file__)]))
        cmd = [sys.executable, path]
    p = subprocess.run(cmd, env=env, cwd=folder, capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def test_script_carries_the_check_its_helpers_constants_and_imports(sample):
    text = R.script(sample.test_sample, {"bug": "one"}, "ref", focus="SAMPLE-01", levels={"SAMPLE-01": "MUST"})
    assert text.startswith(R.RUN_PREFIX + "PYTHONPATH=")
    for piece in ("def test_sample(target, check, bug=None):", "def _values(dtype):", "SHAPE = (2, 3)",
                  "class _Producer(kit.RecordingProducer):", 'UINT8 = dty.DTYPES["uint8"]',
                  "#: the shape every case uses", "import json", "from dlconform import kit",
                  "from support import dtypes as dty", "from dlconform.targets.ref import RefTarget",
                  "reproduce(test_sample, target, {'bug': 'one'},"):
        assert piece in text, piece
    # what the check does not use stays out: the marker's decorator, pytest, another constant
    for piece in ("@pytest.mark", "import pytest", "UNUSED", "def test_nested"):
        assert piece not in text, piece
    compile(text, "repro.py", "exec")


@pytest.mark.parametrize("bug, focus, rc, line", [
    (None, "SAMPLE-01", 0, "not reproduced"),
    ("one", "SAMPLE-01", 1, 'REPRODUCED SAMPLE-01: planted "one"'),
    ("also", "SAMPLE-01", 1, "ALSO SAMPLE-02: a warn on another clause"),
    ("also", "SAMPLE-02", 1, "REPRODUCED SAMPLE-02: a warn on another clause"),
    ("raise", "SAMPLE-01", 1, "REPRODUCED SAMPLE-01: unexpected exception RuntimeError: planted"),
    ("unsupported", "SAMPLE-01", 0, "UNSUPPORTED: no such feature"),
])
def test_linked_and_standalone_scripts_exit_as_the_check_finds(sample, tmp_path, bug, focus, rc, line):
    text = R.script(sample.test_sample, {"bug": bug}, "pyref", focus=focus)
    for standalone in (False, True):
        code, out = _run(R.standalone(text) if standalone else text, tmp_path, standalone)
        assert (code, line in out) == (rc, True), (standalone, out)


@pytest.mark.parametrize("fixed, rc, line", [
    (False, 1, "REPRODUCED A-01: the fail"),
    (True, 0, "not reproduced: no fail on A-01 (what remains of it is a warn)"),
])
def test_a_fail_is_reproduced_by_a_fail_not_by_a_warn_of_its_clause(tmp_path, fixed, rc, line):
    """A check's cases may find a warn and a fail on one clause (a refusal of a valid capsule of
    one dtype, byte_offset ignored for another); the fail's script is about the fail. Before, it
    stopped at the warn, so the fixed library's script still said REPRODUCED (and recheck called
    the fail reproduced)."""
    text = textwrap.dedent('''
        from dlconform.kit import reproduce
        def check_fn(target, check, fixed):
            check.record("A-01", "warn", "a warn first")
            if not fixed:
                check.record("A-01", "fail", "the fail")
        reproduce(check_fn, None, {"fixed": %r}, focus="A-01", verdict="fail")
    ''' % fixed)
    code, out = _run(text, tmp_path)
    assert code == rc and line in out and "ALSO A-01: a warn first (a warn, not the fail" in out, out


def test_the_script_carries_the_findings_grade(sample):
    for verdict, says in (("fail", ", verdict='fail')"), ("warn", ", verdict='warn')"), ("crash", "feeds='valid')")):
        text = R.script(sample.test_sample, {"bug": "one"}, "ref", focus="SAMPLE-01", verdict=verdict)
        assert says in text, (verdict, text[-300:])


@pytest.mark.parametrize("module", ["dlconform._no_such_native", "support.no_such_helper"])
def test_a_missing_module_of_ours_is_not_run_never_reproduced(tmp_path, module):
    """A check that imports a module of dlconform's that is not there (a native module not
    built, or not beside a standalone script) could not run: NOT RUN, exit 4, which recheck
    calls broken. Before, the linked script printed REPRODUCED with the ImportError as the
    library's unexpected exception, with the library's bug and without it alike."""
    text = textwrap.dedent('''
        import importlib
        from dlconform.kit import reproduce
        def check_fn(target, check):
            importlib.import_module(%r)
        reproduce(check_fn, None, focus="A-01")
    ''' % module)
    code, out = _run(text, tmp_path)
    assert code == kit.check.EXIT_NOT_RUN and "NOT RUN" in out and "REPRODUCED" not in out, out


def test_a_finding_on_another_clause_then_an_exception_is_undetermined(tmp_path):
    text = textwrap.dedent('''
        from dlconform.kit import reproduce
        def check_fn(target, check):
            check.record("B-01", "fail", "first")
            raise ValueError("then this")
        reproduce(check_fn, None, focus="A-01")
    ''')
    code, out = _run(text, tmp_path)
    assert code == kit.check.EXIT_UNDETERMINED and "UNDETERMINED A-01" in out and "ALSO B-01: first" in out


def test_standalone_script_needs_nothing_but_python(sample, tmp_path):
    text = R.script(sample.test_sample, {"bug": "one"}, "pyref", focus="SAMPLE-01")
    assert R.standalone_problem(text, library="pyref") is None
    sa = R.standalone(text)
    assert sa.startswith(R.RUN_PREFIX + sys.executable)
    assert "'dlconform.kit.abi': (" in sa and "'support.dtypes': (" in sa
    assert "'dlconform.runner'" not in sa and "'dlconform.pytest_plugin'" not in sa
    assert _run(sa, tmp_path, standalone=True)[0] == 1


def test_native_modules_and_other_libraries_are_named():
    needs_ref = R.script(sample_function_using_ref, {}, "ref")
    assert "dlconform._ref" in R.standalone_problem(needs_ref)
    assert R.standalone_problem(needs_ref, native_ok="dlconform._ref") is None


def sample_function_using_ref(target, check):
    """A check that needs dlconform's native module at module level of what it imports."""
    from dlconform import _ref
    check.that(_ref is not None, "X-01")


def _handmade(*lines):
    """A script in reproducer form (run line, the imports mark) of `lines`."""
    return "\n".join([R.run_header(), R.IMPORTS_MARK] + list(lines)) + "\n"


def test_a_native_module_imported_in_a_function_that_runs_is_needed():
    """seedrules.judge calls build, whose `from dlconform import _ref` runs for a seed that offers
    a table: the script cannot stand alone (it printed a false REPRODUCED of that ImportError)."""
    text = _handmade("from support import seedrules as sr", "", 'if __name__ == "__main__":',
                     "    sr.judge({}, None)")
    assert R.standalone_problem(text) == "it needs dlconform's native module dlconform._ref"
    assert R.standalone_problem(text, native_ok="dlconform._ref") is None


LAZY = '''
def used():
    return helper()


def helper():
    from dlconform import _ref
    return _ref


def never_called():
    from dlconform import _probe
    return _probe


class Holder:
    def __init__(self):
        from dlconform import _nanobind


class Unused:
    def __init__(self):
        from dlconform import _probe
'''


def test_a_native_import_counts_where_its_function_may_run(tmp_path, monkeypatch):
    """A function whose name nothing that runs reads is never called: its imports are not needed;
    a method's class must be read too (a dunder method needs its class's name only)."""
    (tmp_path / "lazy_natives.py").write_text(LAZY)
    monkeypatch.setattr(R, "_ROOTS", R._ROOTS + ((str(tmp_path), ""),))
    text = _handmade("import lazy_natives", "", 'if __name__ == "__main__":', "    lazy_natives.used()")
    assert R.standalone_problem(text) == "it needs dlconform's native module dlconform._ref"
    text = _handmade("import lazy_natives", "", 'if __name__ == "__main__":', "    lazy_natives.Holder()")
    assert R.standalone_problem(text) == "it needs dlconform's native module dlconform._nanobind"


def _loads(expr, imported="from dlconform.targets.loader import load"):
    return _handmade(imported, "", 'if __name__ == "__main__":', "    " + expr)


def test_the_loader_imports_only_the_adapters_that_a_literal_names(tmp_path, monkeypatch):
    """loader.load imports a built-in target's adapter by the spec it is given, at run time: the
    adapters a script may import so are those of the specs its code names in a text literal (an
    interop case's peer), not every adapter of the loader's table (all of them counted made every
    interop script need nanobind's glue); a spec naming a module of ours does the same."""
    assert R.standalone_problem(_loads("load('numpy')")) is None
    assert R.standalone_problem(_loads("load('pyref@cuda')")) is None
    needs_ref = "it needs dlconform's native module dlconform._ref"
    assert R.standalone_problem(_loads("load('ref:fault=x')")) == needs_ref
    assert R.standalone_problem(_loads("load('ref@cuda')")) == needs_ref
    assert "dlconform._nanobind" in R.standalone_problem(_loads("load('nanobind')"))
    assert "dlconform._nanobind" in R.standalone_problem(
        _loads("load('dlconform.targets.nanobind_target:NanobindTarget')"))
    assert R.standalone_problem(_loads(
        "GenericTarget('dlconform._nanobind')", "from dlconform.targets.generic import GenericTarget")) == (
        "it needs dlconform's native module dlconform._nanobind")
    # a literal of a module the script imports names a spec too (none of the loader's own table)
    (tmp_path / "peers.py").write_text("PEER = 'ref'\n\n\ndef go():\n    from dlconform.targets.loader import load\n"
                                       "    return load(PEER)\n")
    monkeypatch.setattr(R, "_ROOTS", R._ROOTS + ((str(tmp_path), ""),))
    assert R.standalone_problem(_loads("peers.go()", "import peers")) == needs_ref


@pytest.mark.filterwarnings("ignore::pytest.PytestUnknownMarkWarning")  # the plugin registers them in the suites
@pytest.mark.parametrize("peer, needs", [("numpy", None), ("torch", None), ("pyarrow", None),
                                         ("ref", "it needs dlconform's native module dlconform._ref")])
def test_an_interop_script_needs_the_adapter_of_its_peer_alone(peer, needs):
    """test_interop's peer reaches load() as the case's literal: a pyref finding with numpy as its
    producer stands alone, with numpy's adapter embedded and no other."""
    import test_interop

    text = R.script(test_interop.test_interop_round_trip, {"case": (peer, "contiguous", "int32")}, "pyref",
                    focus="LAY-11")
    assert R.standalone_problem(text, library="pyref") == needs
    embedded = R.standalone(text)
    assert ("'%s': (" % R._named(peer)[0][0]) in embedded
    assert "'dlconform.targets.nanobind_target': (" not in embedded


def test_a_standalone_script_without_its_native_module_says_it_did_not_run(tmp_path):
    """Where a native module the script imports is not beside it, the script says NOT RUN and
    exits EXIT_NOT_RUN: never REPRODUCED (an ImportError read as the library's finding)."""
    text = R.script(sample_function_using_ref, {}, "pyref", focus="X-01")
    code, out = _run(R.standalone(text), tmp_path, standalone=True)
    assert code == kit.check.EXIT_NOT_RUN, out
    assert "NOT RUN: repro.py: dlconform's module dlconform._ref is not beside this script" in out
    assert "REPRODUCED" not in out


def test_what_cannot_be_written_out_says_so(sample):
    with pytest.raises(R.NotReproducible, match="nested"):
        R.script(sample.test_nested(None, None), {}, "ref")
    with pytest.raises(R.NotReproducible, match="no literal"):
        R.script(sample.test_sample, {"bug": object()}, "ref")
    with pytest.raises(R.NotReproducible, match="no literal"):
        R.literal(kit.Forge)


@pytest.mark.parametrize("value", [None, True, 3, -2.5, "text", b"\x00\x01", bytes(range(40)), (1,), (1, (2, 3)),
                                   [("slice", 0, 1, None, 2)], {"a": (1, 2), "b": [b"x"]}])
def test_literals_give_the_value_back(value):
    assert eval(R.literal(value)) == value


def test_run_line_carries_the_environment():
    text = R.script(sample_function_using_ref, {}, "ref", env={"PYTHONMALLOC": "debug"})
    assert text.splitlines()[0].startswith(R.RUN_PREFIX + "PYTHONMALLOC=debug PYTHONPATH=")
    assert R.header_env(text) == {"PYTHONMALLOC": "debug"}
    assert R.standalone(text).splitlines()[0] == R.RUN_PREFIX + "PYTHONMALLOC=debug %s repro.py" % sys.executable


def test_run_line_run_by_a_shell_keeps_the_callers_pythonpath(sample, tmp_path):
    """Run by hand, the line puts dlconform's folders first and keeps the caller's PYTHONPATH (a
    library found through it stays found); recheck reads the line without the caller's part."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "userlib_probe.py").write_text("NAME = 'found'\n")
    text = R.run_header() + "\nimport sys, userlib_probe, dlconform\nprint(userlib_probe.NAME)\n"
    (tmp_path / "repro.py").write_text(text)
    line = text.splitlines()[0][len(R.RUN_PREFIX):]
    env = dict(os.environ, PYTHONPATH=str(lib))
    p = subprocess.run(["/bin/sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stdout.strip()) == (0, "found"), p.stderr
    assert R.run_line(text)[0]["PYTHONPATH"] == os.pathsep.join((R.HARNESS_DIR, R.SUITES_DIR))
    env.pop("PYTHONPATH")  # no PYTHONPATH of the caller's: no empty entry (the script's folder) is added
    p = subprocess.run(["/bin/sh", "-c", line.replace("repro.py", "-c 'import sys; print(sys.path[1:3])'")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert p.stdout.strip() == repr([R.HARNESS_DIR, R.SUITES_DIR]), p.stdout + p.stderr


def test_targets_are_built_as_the_loader_builds_them():
    from dlconform.targets.loader import construction

    assert construction("numpy") == (("from dlconform.targets.numpy_target import NumpyTarget",), "NumpyTarget()")
    assert construction("ref:fault=x") == (("from dlconform.targets.ref import RefTarget",), "RefTarget(fault='x')")
    assert construction("mylib") == (("from dlconform.targets.generic import GenericTarget",), "GenericTarget('mylib')")
    assert construction("a/b.py:T") == (("from dlconform.targets.loader import load",), "load('a/b.py:T')")
    assert construction("mylib@cuda") == (("from dlconform.targets.generic_cuda import GenericCudaTarget",),
                                          "GenericCudaTarget('mylib@cuda')")
