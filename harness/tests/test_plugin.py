"""The pytest plugin in a child pytest: outcome mapping, roles, check, repro, filtering."""
import json
import os
import subprocess
import sys

import pytest

from dlconform.runner import child_env
from fakes import FAKE, PRODUCER_ONLY, write_suite


SUITE = '''
import os, pytest
from dlconform.kit.check import Warn, Unsupported

@pytest.mark.clause("M-01")
def test_pass(target, check):
    assert target.make("uint8", (2,), b"ab").data == b"ab"

@pytest.mark.clause("M-02")
def test_assert_must():
    assert 1 == 2

@pytest.mark.clause("S-01")
def test_assert_should():
    assert False, "should breach"

@pytest.mark.clause("M-03")
def test_unsupported():
    raise Unsupported("no such view")

@pytest.mark.clause("M-04")
def test_warn():
    raise Warn("M-04", "ambiguous reading")

@pytest.mark.clause("M-05")
def test_skip():
    pytest.skip("no GPU here")

@pytest.mark.clause("M-06")
def test_unexpected():
    raise KeyError("boom")

@pytest.mark.clause("M-07", "S-02")
def test_explicit_wins(check):
    check.that(False, "M-07", "soft failure")
    check.that(False, "S-02", "soft should")

@pytest.mark.clause("M-16")
def test_adapter_cannot_make(target):
    target.make("complex128", (2,), bytes(32))


@pytest.mark.clause("M-17")
def test_adapter_cannot_view(target):
    target.flip(target.make("uint8", (2,), bytes(2)), 3)


@pytest.mark.clause("M-15")
def test_exception_after_a_recorded_pass(check):
    check.record("M-15", "pass")
    raise ValueError("raised after a pass was recorded")

@pytest.mark.clause("M-08")
def test_equal_bytes(check):
    check.equal(b"abcd", b"abXd", "M-08", "values")

@pytest.mark.clause("M-09")
def test_record(check):
    check.record("M-09", "pass")
    check.record("M-10", "unsupported", "extra clause")

@pytest.mark.clause("M-11")
@pytest.mark.role("consumer")
def test_consumer_only():
    open(os.environ["DLC_SENTINEL"], "w").close()

@pytest.mark.clause("M-12")
@pytest.mark.role("producer")
def test_producer(target):
    assert "producer" in target.roles

@pytest.mark.clause("M-13")
@pytest.mark.role("both")
def test_both():
    pass

@pytest.mark.clause("M-14")
def test_system_error():
    raise SystemError("bad")
'''
LEVELS = {"M-%02d" % i: "MUST" for i in range(1, 18)}
LEVELS.update({"S-01": "SHOULD", "S-02": "MAY"})


def run_child(tmp_path, target=FAKE, extra=(), src=SUITE, env=None):
    suite = write_suite(str(tmp_path / "suite"), {"test_m.py": src}, LEVELS)
    results = tmp_path / "results.jsonl"
    env = dict(child_env(), **(env or {}))
    env["DLC_SENTINEL"] = str(tmp_path / "sentinel")
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", suite, "--rootdir", suite, "-q", "-p", "dlconform.pytest_plugin",
         "-p", "no:cacheprovider",
         "--dlc-target", target, "--dlc-results", str(results)] + list(extra),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=suite, timeout=60,
    )
    events = [json.loads(l) for l in results.read_text().splitlines()] if results.exists() else []
    return proc, events


@pytest.fixture(scope="module")
def fake_events(tmp_path_factory):
    proc, events = run_child(tmp_path_factory.mktemp("plugin"))
    results = {e["clause"]: e for e in events if e["event"] == "result"}
    return proc, events, results


def test_protocol_shape(fake_events):
    _, events, _ = fake_events
    assert events[0] == {"event": "collected", "count": 17}
    assert events[1]["event"] == "begin" and events[1]["test"] == "test_m.py::test_pass"
    assert events[1]["clauses"] == ["M-01"]
    assert events[-1]["event"] == "end"
    begins = [e for e in events if e["event"] == "begin"]
    assert len(begins) == 17
    for e in events:
        if e["event"] == "result":
            for key in ("target", "role", "clause", "level", "group", "verdict", "message", "repro", "test",
                        "duration"):
                assert key in e
            assert e["target"] == FAKE


def test_outcome_mapping(fake_events):
    _, _, r = fake_events
    expect = {"M-01": "pass", "M-02": "fail", "S-01": "warn", "M-03": "unsupported", "M-04": "warn",
              "M-05": "skip", "M-06": "fail", "M-14": "fail"}
    assert {c: r[c]["verdict"] for c in expect} == expect
    assert r["S-01"]["level"] == "SHOULD"
    assert r["M-03"]["message"] == "no such view"
    assert r["M-04"]["message"] == "ambiguous reading"
    assert r["M-05"]["message"] == "no GPU here"
    assert r["M-06"]["message"].startswith("unexpected KeyError: 'boom'")
    assert r["M-14"]["message"].startswith("unexpected SystemError")


def test_a_tensor_the_adapter_cannot_make_is_no_verdict(fake_events):
    """Making a tensor or a view is no DLPack rule: the adapter's make() or view method raising
    (a dtype, rank, shape or step the library lacks) is `unsupported`, naming what could not be
    made, never a fail."""
    _, _, r = fake_events
    assert r["M-16"]["verdict"] == "unsupported"
    assert r["M-16"]["message"].startswith("fake could not make a complex128 tensor of shape (2,)")
    assert "ValueError: fake makes no complex128 tensors" in r["M-16"]["message"]
    assert r["M-17"]["verdict"] == "unsupported"
    assert r["M-17"]["message"].startswith("fake could not make the view flip(3)")


def test_explicit_records_win_and_levels_apply(fake_events):
    _, _, r = fake_events
    assert r["M-07"]["verdict"] == "fail" and r["M-07"]["message"] == "soft failure"
    assert r["S-02"]["verdict"] == "warn"
    # an exception after explicit records is never hidden by a recorded pass
    assert r["M-15"]["verdict"] == "fail"
    assert "unexpected ValueError: raised after a pass was recorded" in r["M-15"]["message"]
    assert r["M-09"]["verdict"] == "pass"
    assert r["M-10"]["verdict"] == "unsupported" and r["M-10"]["test"] == "test_m.py::test_record"


def test_check_equal_message(fake_events):
    _, _, r = fake_events
    assert r["M-08"]["verdict"] == "fail"
    assert "first difference at byte 2" in r["M-08"]["message"]


def test_reproducers_are_the_tests_own_code(fake_events, tmp_path):
    _, _, r = fake_events
    for clause, fn in (("M-07", "test_explicit_wins"), ("M-02", "test_assert_must")):
        text = r[clause]["repro"]
        assert "def %s(" % fn in text and "focus=%r" % clause in text, text
        assert "from dlconform.targets.loader import load" in text and "load(%r)" % FAKE in text
    assert r["M-01"]["repro"] == ""
    # the script of a finding reproduces it, with the suite's folder on the path
    script = tmp_path / "repro.py"
    script.write_text(r["M-07"]["repro"])
    p = subprocess.run([sys.executable, str(script)], env=child_env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 1 and "REPRODUCED M-07: soft failure" in p.stdout, p.stdout + p.stderr


def test_roles_on_a_full_target(fake_events):
    _, _, r = fake_events
    assert r["M-11"]["verdict"] == "pass" and r["M-11"]["role"] == "consumer"
    assert r["M-13"]["verdict"] == "pass"


def test_missing_role_is_unsupported_without_running(tmp_path):
    _, events = run_child(tmp_path, target=PRODUCER_ONLY)
    r = {e["clause"]: e for e in events if e["event"] == "result"}
    assert r["M-11"]["verdict"] == "unsupported"
    assert "consumer" in r["M-11"]["message"]
    assert not (tmp_path / "sentinel").exists()  # the test body never ran
    assert r["M-12"]["verdict"] == "pass"
    assert r["M-13"]["verdict"] == "unsupported"


@pytest.mark.parametrize("glob", ["M-0[1-3]", "m-0[1-3]"])  # clause ids are upper case; a glob is taken in any
def test_clause_glob_and_exclude_file(tmp_path, glob):
    exclude = tmp_path / "exclude.txt"
    exclude.write_text("test_m.py::test_pass\n")
    _, events = run_child(tmp_path, extra=["--dlc-clause", glob, "--dlc-exclude-file", str(exclude)])
    tests = [e["test"] for e in events if e["event"] == "begin"]
    assert tests == ["test_m.py::test_assert_must", "test_m.py::test_unsupported"]


def test_unknown_target_is_usage_error(tmp_path):
    proc, events = run_child(tmp_path, target="no_such_module_xyz")
    assert proc.returncode == 4
    assert b"cannot import module 'no_such_module_xyz'" in proc.stderr + proc.stdout
    assert events == []


@pytest.mark.parametrize("extra, says", [
    (["--dlc-clause", "M-0[1-3],NOPE-*"], "--dlc-clause 'NOPE-*' matches no clause of the catalogue"),
    (["--dlc-results", "/nonexistent/dir/results.jsonl"],
     "cannot write --dlc-results /nonexistent/dir/results.jsonl: No such file or directory"),
    (["--dlc-exclude-file", "/nonexistent/exclude.txt"], "cannot read --dlc-exclude-file /nonexistent/exclude.txt"),
    (["--dlc-lanes", "x"], "--dlc-lanes takes a count, not 'x'"),
])
def test_bad_options_are_usage_errors(tmp_path, extra, says):
    """A bad option is one line and pytest's usage status (4), never a run: a clause glob that
    matches nothing in the catalogue (before: every test deselected, status 5, as if there were
    none), a results file that cannot be written (before: an INTERNALERROR traceback)."""
    proc, events = run_child(tmp_path, extra=extra)
    assert proc.returncode == 4 and says in (proc.stderr + proc.stdout).decode(), proc.stderr + proc.stdout
    assert b"Traceback" not in proc.stderr + proc.stdout and events == []


def test_catalogue_lookup(tmp_path):
    from dlconform import catalogue
    from fakes import write_catalogue

    path = write_catalogue(str(tmp_path), {"CAP-01": "MUST", "CAP-02": "SHOULD", "VER-01": "MAY"})
    cat = catalogue.Catalogue.load(path)
    assert cat.level("CAP-02") == "SHOULD" and cat.level("NEW-99") == "MUST"
    assert cat.group("VER-01") == "VER" and cat.group("NEW-99") == "NEW"
    assert cat.groups() == ["CAP", "VER"]
    assert [c.id for c in cat.clauses] == ["CAP-01", "CAP-02", "VER-01"]
    assert cat.get("CAP-01")["level"] == cat.get("CAP-01").level == "MUST"
    assert cat.matching("CAP-*") == ["CAP-01", "CAP-02"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "other/1", "clauses": []}')
    with pytest.raises(catalogue.CatalogueError):
        catalogue.Catalogue.load(str(bad))


def test_repository_catalogue_is_valid():
    from dlconform import catalogue

    cat = catalogue.load()
    if not len(cat):
        pytest.skip("suites/clauses.json not written yet")
    assert all(c.level in ("MUST", "SHOULD", "MAY", "INFO") for c in cat.clauses)
    assert all(c.binds in ("producer", "consumer", "both") for c in cat.clauses)


def test_plain_pytest_outcomes_follow_the_verdicts(tmp_path):
    """Without the runner, pytest's own outcome and its JUnit XML say what the verdicts say:
    a MUST breach recorded with check.that(False) fails, naming its clause; Unsupported and skip
    are skipped; a warn passes with a pytest warning naming its clause."""
    import xml.etree.ElementTree as ET

    junit = tmp_path / "junit.xml"
    proc, _ = run_child(tmp_path, extra=["-rA", "--junitxml", str(junit)])
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}

    def outcome(name):
        c = cases[name]
        return ("failed" if c.find("failure") is not None or c.find("error") is not None
                else "skipped" if c.find("skipped") is not None else "passed")

    expect = {"test_pass": "passed", "test_assert_must": "failed", "test_assert_should": "passed",
              "test_unsupported": "skipped", "test_warn": "passed", "test_skip": "skipped",
              "test_unexpected": "failed", "test_explicit_wins": "failed", "test_equal_bytes": "failed",
              "test_record": "passed", "test_system_error": "failed"}
    assert {n: outcome(n) for n in expect} == expect
    failure = cases["test_explicit_wins"].find("failure")
    assert "M-07 fail (MUST): soft failure" in (failure.get("message", "") + (failure.text or ""))
    props = {p.get("name"): p.get("value") for p in cases["test_explicit_wins"].iter("property")}
    assert props == {"dlconform:M-07": "fail", "dlconform:S-02": "warn"}
    assert "M-03: no such view" in cases["test_unsupported"].find("skipped").get("message", "")
    out = proc.stdout.decode()
    assert "DlconformWarning: M-04 warn (MUST): ambiguous reading" in out
    assert "DlconformWarning: S-01 warn (SHOULD)" in out
    assert proc.returncode == 1


def test_isolated_plain_pytest_survives_a_crash(tmp_path):
    """DLCONFORM_ISOLATE=1 (--dlconform-isolate): each file runs in the runner's children, so a
    segfault costs its test a crash verdict and the session goes on to report the others."""
    src = '''
import os, signal, pytest

@pytest.mark.clause("M-01")
def test_before(target):
    pass

@pytest.mark.clause("M-02")
def test_dies():
    os.kill(os.getpid(), signal.SIGSEGV)

@pytest.mark.clause("M-03")
def test_after(check):
    check.that(False, "M-03", "a finding after the crash")
'''
    suite = write_suite(str(tmp_path / "suite"), {"test_iso.py": src}, LEVELS)
    junit = tmp_path / "junit.xml"
    env = dict(child_env(), DLCONFORM_ISOLATE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", suite, "--rootdir", suite, "-q", "-p",
                           "dlconform.pytest_plugin", "-p", "no:cacheprovider", "--dlc-target", FAKE,
                           "--junitxml", str(junit)], capture_output=True, text=True, env=env, cwd=suite, timeout=120)
    import xml.etree.ElementTree as ET

    props = {c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
             for c in ET.parse(junit).getroot().iter("testcase")}
    assert props == {"test_before": {"dlconform:M-01": "pass"}, "test_dies": {"dlconform:M-02": "crash"},
                     "test_after": {"dlconform:M-03": "fail"}}, proc.stdout + proc.stderr
    assert "M-02 crash (MUST): killed by SIGSEGV" in proc.stdout
    assert proc.returncode == 1


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["-q", "-p", "no:cacheprovider", "{dir}"]])
def test_the_entry_point_leaves_other_pytest_runs_alone(tmp_path, args):
    """What pip's pytest11 entry point registers in every pytest run of an environment where
    dlconform is installed: `pytest --help` (configured before any path is parsed: before, an
    AttributeError on config.args and status 1 for every project in the environment), and an
    unrelated project's run, which sees none of dlconform's fixtures."""
    (tmp_path / "test_theirs.py").write_text("def test_theirs(request):\n"
                                             "    assert 'target' not in request.fixturenames\n")
    code = ("import sys, pytest\nfrom dlconform.pytest_plugin import entry\n"
            "sys.exit(pytest.main(%r, plugins=[entry]))" % [a.format(dir=tmp_path) for a in args])
    env = dict(child_env(), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")  # the entry point only as `plugins` gives it
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    if args == ["--help"]:
        assert "--dlconform-target" in proc.stdout


WARNS = '''
import pytest

@pytest.mark.clause("M-01")
def test_fine(check):
    check.that(True, "M-01", "fine")

@pytest.mark.clause("S-01")
def test_should(check):
    check.that(False, "S-01", "a SHOULD breach")
'''


@pytest.mark.parametrize("isolate", ["0", "1"])
def test_a_warn_is_in_pytest_s_warnings_summary_isolated_or_not(tmp_path, isolate):
    """--dlconform-isolate (DLCONFORM_ISOLATE=1) reports a warn as a run in this process does:
    a DlconformWarning in pytest's warnings summary, counted in its last line (before: printed
    raw amid the progress dots, no summary, no count)."""
    suite = write_suite(str(tmp_path / "suite"), {"test_w.py": WARNS}, LEVELS)
    env = dict(child_env(), DLCONFORM_ISOLATE=isolate)
    proc = subprocess.run([sys.executable, "-m", "pytest", suite, "--rootdir", suite, "-p", "dlconform.pytest_plugin",
                           "-p", "no:cacheprovider", "--dlc-target", FAKE], capture_output=True, text=True, env=env,
                          cwd=suite, timeout=120)
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    summary = out.split("warnings summary", 1)[-1]
    assert "test_w.py::test_should\n" in summary and "DlconformWarning: S-01 warn (SHOULD): a SHOULD breach" in summary
    assert "DlconformWarning" not in out.split("warnings summary", 1)[0], out
    assert "2 passed, 1 warning in" in out.strip().splitlines()[-1], out


def test_a_single_module_outside_the_rootdir_keeps_its_file_name(tmp_path):
    """`pytest --pyargs dlconform.suites.test_layout` from a project's folder: pytest names a
    module outside the rootdir relative to itself (""), so the node ids were `::test_x` and
    JUnit's classname "". They keep the file's name, as in a run of the whole suites."""
    import xml.etree.ElementTree as ET

    write_suite(str(tmp_path / "pkg" / "dlcsuite"), {"__init__.py": "", "test_w.py": WARNS}, LEVELS)
    (tmp_path / "elsewhere").mkdir()
    junit = tmp_path / "junit.xml"
    env = child_env()
    env["PYTHONPATH"] += os.pathsep + str(tmp_path / "pkg")
    proc = subprocess.run([sys.executable, "-m", "pytest", "--pyargs", "dlcsuite.test_w", "-rA", "-p",
                           "dlconform.pytest_plugin", "-p", "no:cacheprovider", "--dlc-target", FAKE,
                           # --opt=VALUE: a path given as its own word would take part in pytest's
                           # choice of the rootdir
                           "--dlc-catalogue=%s" % (tmp_path / "pkg" / "dlcsuite" / "clauses.json"),
                           "--dlc-results=%s" % (tmp_path / "results.jsonl"),
                           "--junitxml=%s" % junit], capture_output=True, text=True, env=env,
                          cwd=str(tmp_path / "elsewhere"), timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c.get("classname") for c in ET.parse(junit).getroot().iter("testcase")] == ["test_w", "test_w"], proc.stdout
    tests = [json.loads(line).get("test") for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert set(tests) - {None} == {"test_w.py::test_fine", "test_w.py::test_should"}, tests


def test_a_known_file_xfails_what_it_lists(tmp_path):
    """--dlconform-known FILE or DLCONFORM_KNOWN (a file as `dlconform run --known` reads): a
    fail, crash or timeout it lists is xfailed with its reason and does not fail the session;
    one it does not list still fails; a bad file is a usage error. Before, a library's own
    pytest run had no way to set aside what its CI already knows. (The option belongs to the
    entry point, which an installed dlconform registers: the child here has the plugin by -p,
    so the variable says it; test_the_known_option_is_the_entry_points says the option.)"""
    proc, events = run_child(tmp_path / "first")
    findings = [e for e in events if e["event"] == "result" and e["verdict"] in ("fail", "crash", "timeout")]
    assert proc.returncode == 1 and findings
    must = [e for e in findings if e["clause"] == "M-02"][0]
    known = tmp_path / "known.txt"
    known.write_text("# one of them\n%s %s M-02 %s\n" % (must["target"], must["role"], must["test"]))
    proc, _ = run_child(tmp_path / "one", extra=["-rxf"], env={"DLCONFORM_KNOWN": str(known)})
    out = proc.stdout.decode()
    assert proc.returncode == 1 and "XFAIL" in out and "known: M-02 fail" in out, out[-3000:]
    assert "FAILED test_m.py::test_explicit_wins" in out and "FAILED test_m.py::test_assert_must" not in out
    known.write_text("".join("%s %s %s %s\n" % (e["target"], e["role"], e["clause"], e["test"]) for e in findings))
    proc, _ = run_child(tmp_path / "all", env={"DLCONFORM_KNOWN": str(known)})
    assert proc.returncode == 0, proc.stdout.decode()[-3000:]
    known.write_text("not a line\n")
    proc, _ = run_child(tmp_path / "bad", env={"DLCONFORM_KNOWN": str(known)})
    assert proc.returncode == 4 and b"known file" in proc.stderr + proc.stdout


def test_the_known_option_is_the_entry_points(tmp_path):
    """--dlconform-known as an installed dlconform's pytest has it (the pytest11 entry point):
    a bad file is a usage error naming it."""
    (tmp_path / "known.txt").write_text("not a line\n")
    code = ("import sys, pytest\nfrom dlconform.pytest_plugin import entry\n"
            "sys.exit(pytest.main(['-q', '--dlconform-target', 'ref', '--dlconform-known', %r, %r], "
            "plugins=[entry]))" % (str(tmp_path / "known.txt"), str(tmp_path)))
    env = dict(child_env(), PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 4 and "known file" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
