"""The runner against tiny fake suites: crash capture with the signal, resume, timeout, streaming."""
import json
import os
import sys

import pytest

from dlconform.runner import Runner, child_env, safe_name
from fakes import FAKE, write_suite


SUITE = '''
import os, signal, time, pytest

@pytest.mark.clause("T-01")
def test_a_pass(target):
    assert target.name

@pytest.mark.clause("T-02")
def test_b_fail():
    assert 1 == 2, "one is not two"

@pytest.mark.clause("T-03")
def test_c_abort(check):
    os.abort()  # the crashing check

@pytest.mark.clause("T-04")
def test_d_after_abort():
    pass

@pytest.mark.clause("T-05", "T-06")
def test_e_segv():
    os.kill(os.getpid(), signal.SIGSEGV)

@pytest.mark.clause("T-07")
def test_f_sleep():
    time.sleep(60)

@pytest.mark.clause("T-08")
def test_g_last():
    pass
'''
LEVELS = {"T-0%d" % i: "MUST" for i in range(1, 9)}


@pytest.fixture(scope="module")
def fake_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("runner")
    suite = write_suite(str(base / "suite"), {"test_fake.py": SUITE}, LEVELS)
    streamed = []
    runner = Runner(suite, str(base / "out"), python=sys.executable, timeout=1.5, sink=streamed.append)
    run = runner.run_target(FAKE)
    by_clause = {r["clause"]: r for r in run.records}
    return run, by_clause, streamed, base


def test_pass_and_fail_mapped(fake_run):
    run, by, _, _ = fake_run
    assert by["T-01"]["verdict"] == "pass"
    assert by["T-02"]["verdict"] == "fail"
    assert "one is not two" in by["T-02"]["message"]


def test_abort_is_crash_with_signal(fake_run):
    _, by, _, _ = fake_run
    assert by["T-03"]["verdict"] == "crash"
    assert "SIGABRT" in by["T-03"]["message"]
    assert by["T-03"]["test"].endswith("test_c_abort")
    assert "Aborted" in by["T-03"].get("evidence", "")
    # the test's own script, streamed as it began, is the crash's reproducer
    repro = by["T-03"]["repro"]
    assert repro.startswith("# run: PYTHONMALLOC=malloc ")  # repro.CRASH_ENV: glibc's checks catch heap damage
    assert "def test_c_abort(check):" in repro and "os.abort()" in repro
    assert "# rerun the check:" in repro


def test_crash_in_process_hint_reruns_the_test_from_anywhere(fake_run, tmp_path):
    """The crash reproducer's plain-pytest line runs the dead test alone, from any directory,
    and dies as it did (here SIGABRT)."""
    import subprocess

    _, by, _, _ = fake_run
    hint = [l for l in by["T-03"]["repro"].splitlines() if "-m pytest" in l]
    assert len(hint) == 1, by["T-03"]["repro"]
    cmd = hint[0].split(": ", 1)[1]
    proc = subprocess.run(["sh", "-c", cmd], cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 128 + 6 or proc.returncode == -6, (cmd, proc.returncode, proc.stdout[-800:],
                                                                  proc.stderr[-800:])
    assert "test_c_abort" in proc.stdout + proc.stderr


def test_segv_is_crash_for_every_clause_of_the_test(fake_run):
    _, by, _, _ = fake_run
    for clause in ("T-05", "T-06"):
        assert by[clause]["verdict"] == "crash"
        assert by[clause]["message"] == "killed by SIGSEGV"
        assert by[clause]["repro"]


def test_run_resumes_after_crash(fake_run):
    run, by, _, _ = fake_run
    assert by["T-04"]["verdict"] == "pass"   # right after the abort
    assert by["T-08"]["verdict"] == "pass"   # after the segfault and the timeout
    assert run.attempts == 4                 # abort, segv and timeout each restart the child
    assert run.status == "ran"


def test_timeout_verdict(fake_run):
    _, by, _, _ = fake_run
    assert by["T-07"]["verdict"] == "timeout"
    assert "1.5s" in by["T-07"]["message"]
    assert by["T-07"]["duration"] >= 1.5


def test_each_test_reported_exactly_once(fake_run):
    run, _, _, _ = fake_run
    keys = [(r["test"], r["clause"]) for r in run.records]
    assert len(keys) == len(set(keys)) == 8


def test_records_stream_in_completion_order(fake_run):
    run, _, streamed, base = fake_run
    assert [r["clause"] for r in streamed] == [r["clause"] for r in run.records]
    assert [r["clause"] for r in streamed][:3] == ["T-01", "T-02", "T-03"]
    work = base / "out" / "work" / safe_name(FAKE)
    first = [json.loads(l) for l in (work / "attempt-1.jsonl").read_text().splitlines()]
    assert first[0] == {"event": "collected", "count": 7}
    assert first[1]["event"] == "begin" and first[1]["clauses"] == ["T-01"]
    begins = [e for e in first if e["event"] == "begin"]
    assert begins[-1]["test"] == "test_fake.py::test_c_abort"
    assert first[-1] == {**first[-1], "event": "repro", "test": "test_fake.py::test_c_abort"}
    assert not any(e["event"] == "end" for e in first)  # it died
    excluded = (work / "exclude.txt").read_text().split()
    assert "test_fake.py::test_c_abort" in excluded and "test_fake.py::test_f_sleep" in excluded


def test_collection_error_is_the_suites_own_error(tmp_path):
    """A suite module that does not import is dlconform's error, never the library's crash."""
    suite = write_suite(str(tmp_path / "suite"), {"test_broken.py": "import nonexistent_module_xyz\n"}, {})
    run = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=5).run_target(FAKE)
    assert len(run.records) == 1
    rec = run.records[0]
    assert rec["clause"] == "*" and rec["verdict"] == "error"
    assert "nonexistent_module_xyz" in rec["message"] and "not the library's" in rec["message"]


def test_usage_error_in_child_is_crash_with_stderr(tmp_path):
    suite = write_suite(str(tmp_path / "suite"), {"test_ok.py": "def test_x():\n    pass\n"}, {})
    runner = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=5, extra_args=["--no-such-flag"])
    run = runner.run_target(FAKE)
    assert [r["verdict"] for r in run.records] == ["crash"]
    assert run.records[0]["clause"] == "*"
    assert "no-such-flag" in run.records[0]["message"]


PROBE_SUITE = '''
import os, pytest

def the_probe(check):
    print("the probe")

def the_case(check):
    print("the case")

@pytest.mark.clause("T-01", "T-02")
def test_dies_in_a_probe(check):
    check.set_case(the_probe, crash_as={"clauses": ["T-09"], "input": "invalid", "doing": "probing x"})
    os.abort()

@pytest.mark.clause("T-01")
def test_dies_in_its_own_case(check):
    check.set_case(the_probe, crash_as={"clauses": ["T-09"], "doing": "probing x"})
    check.set_case(the_case)  # the probe is over: a death is the test's own again
    os.abort()
'''


def test_a_death_in_a_probe_is_the_probes_clause(tmp_path):
    """Check.set_case(probe, crash_as=...): a death while the probe is the test's case is
    recorded under the probe's clauses and input kind, saying what was being done; the next
    set_case() gives deaths back to the test's own clauses."""
    suite = write_suite(str(tmp_path / "suite"), {"test_probe.py": PROBE_SUITE}, {"T-01": "MUST", "T-02": "MUST",
                                                                                "T-09": "MUST"})
    run = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=20).run_target(FAKE)
    got = sorted((r["test"].split("::")[-1], r["clause"], r["verdict"], r.get("input")) for r in run.records)
    assert got == [("test_dies_in_a_probe", "T-09", "crash", "invalid"),
                   ("test_dies_in_its_own_case", "T-01", "crash", None)], got
    probe = [r for r in run.records if r["clause"] == "T-09"][0]
    assert probe["message"].endswith("while probing x") and "def the_probe(check):" in probe["repro"]
    own = [r for r in run.records if r["clause"] == "T-01"][0]
    assert "while" not in own["message"] and "def the_case(check):" in own["repro"]


LEFTOVER = '''
import os, threading, time

def die_later(delay):
    """A library's deferred death: a thread of its own aborts the process later."""
    threading.Thread(target=lambda: (time.sleep(delay), os.abort()), daemon=True).start()
'''
LEFTOVER_SUITE = '''
import sys, time, pytest
sys.path.insert(0, %r)
import leftover

@pytest.mark.clause("T-01")
def test_a_leaves_a_death_behind():
    leftover.die_later(0.5)

@pytest.mark.clause("T-02")
def test_b_innocent():
    time.sleep(1.5)

@pytest.mark.clause("T-03")
def test_c_dies_in_the_library_every_time():
    leftover.die_later(0)
    time.sleep(1.5)

@pytest.mark.clause("T-04")
def test_d_last():
    pass
'''


def test_a_death_no_check_frame_explains_is_confirmed_alone(tmp_path):
    """A death in a thread that ran no code of the suites is rerun alone: a test that then
    passes keeps its own verdict, and the death is a session record naming it as an earlier
    test's leftovers; a test that dies again alone is the crash, saying so."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "leftover.py").write_text(LEFTOVER)
    suite = write_suite(str(tmp_path / "suite"), {"test_left.py": LEFTOVER_SUITE % str(lib)},
                        {"T-0%d" % i: "MUST" for i in range(1, 5)})
    run = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=20).run_target(FAKE)
    by = {}
    for r in run.records:
        by.setdefault(r["test"].split("::")[-1], []).append((r["clause"], r["verdict"]))
    assert by["test_a_leaves_a_death_behind"] == [("T-01", "pass")]
    assert by["test_b_innocent"] == [("T-02", "pass")], by
    assert by["test_b_innocent>"] == [("*", "crash")], by  # the session record "<before ...::test_b_innocent>"
    assert by["test_c_dies_in_the_library_every_time"] == [("T-03", "crash")], by
    assert by["test_d_last"] == [("T-04", "pass")]
    msgs = {r["test"].split("::")[-1]: r["message"] for r in run.records}
    assert "leftovers of an earlier test" in msgs["test_b_innocent>"]
    assert msgs["test_c_dies_in_the_library_every_time"].endswith("(again when the test ran alone)")


def test_frames_of_the_dying_thread():
    from dlconform.runner import frames_of_dying_thread

    err = ("noise\nFatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n"
           '  File "/lib/x.py", line 3 in f\n  File "/usr/lib/threading.py", line 9 in run\n\n'
           'Current thread 0x2 (most recent call first):\n  File "/s/test_a.py", line 1 in t\n')
    assert frames_of_dying_thread(err) == ["/lib/x.py", "/usr/lib/threading.py"]
    assert frames_of_dying_thread("no dump") == []


@pytest.mark.parametrize("frames, confirm", [
    (["/x/suites/support/attempts.py", "/x/suites/test_a.py"], False),  # a check calling the library
    (["/usr/lib/python3/dist-packages/torch/utils/dlpack.py", "/x/suites/test_a.py"], False),
    (["/usr/lib/python3/dist-packages/_pytest/python.py", "/x/suites/test_a.py"], True),  # a GC in pytest
    (["/usr/lib/python3/dist-packages/hypothesis/core.py", "/x/suites/support/strategies.py"], True),
    (["/lib/leftover.py", "/usr/lib/python3.11/threading.py"], True),  # a thread of the library alone
])
def test_which_deaths_are_confirmed_alone(tmp_path, frames, confirm):
    err = tmp_path / "err"
    err.write_text("Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call first):\n"
                   + "".join('  File "%s", line 1 in f\n' % f for f in frames) + "\n")
    runner = Runner("/x/suites", str(tmp_path / "out"), python=sys.executable)
    assert runner._not_the_checks_death(str(err)) is confirm


def test_crash_after_session_end_is_reported(tmp_path):
    src = '''
import atexit, os, signal, pytest

@pytest.mark.clause("T-01")
def test_register():
    atexit.register(lambda: os.kill(os.getpid(), signal.SIGSEGV))
'''
    suite = write_suite(str(tmp_path / "suite"), {"test_exit.py": src}, {"T-01": "MUST"})
    run = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=5).run_target(FAKE)
    verdicts = {(r["clause"], r["verdict"]) for r in run.records}
    assert ("T-01", "pass") in verdicts
    assert ("*", "crash") in verdicts
    crash = [r for r in run.records if r["verdict"] == "crash"][0]
    assert "SIGSEGV" in crash["message"] and crash["test"] == "<interpreter exit>"


def test_target_wall_limit_stops_the_run(tmp_path):
    src = '''
import time, pytest

@pytest.mark.clause("T-01")
def test_slow():
    time.sleep(30)

@pytest.mark.clause("T-02")
def test_never():
    pass
'''
    suite = write_suite(str(tmp_path / "suite"), {"test_slow.py": src}, {"T-01": "MUST", "T-02": "MUST"})
    run = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=20, target_timeout=1.5).run_target(FAKE)
    assert [(r["clause"], r["verdict"]) for r in run.records] == [("T-01", "timeout")]
    assert "per-target limit" in run.reason


def test_child_env_prepends_harness_and_keeps_pythonpath():
    env = child_env({"PYTHONPATH": "/some/where", "HOME": "/x"})
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[0].endswith("harness") and parts[1] == "/some/where"
    assert env["HOME"] == "/x"


def test_hang_during_collection_is_a_timeout(tmp_path):
    suite = write_suite(str(tmp_path / "suite"), {"test_hang.py": "import time\ntime.sleep(60)\n"}, {})
    runner = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=5, collect_timeout=1.5)
    run = runner.run_target(FAKE)
    assert [(r["clause"], r["verdict"], r["test"]) for r in run.records] == [("*", "timeout", "<collection>")]
    assert run.attempts == 1 and run.status == "crashed"


def _lanes(suite, out, n=2):
    """The fake suite run as `n` lanes of one target at the same time, as `dlconform run`
    does with --jobs n: one Runner a thread, a shared claims folder and zygote."""
    import threading

    from dlconform.runner import SharedZygote, merge_lanes

    claims = os.path.join(out, "claims")
    os.makedirs(claims)
    shared = SharedZygote(n)
    runs = []

    def lane(k):
        runner = Runner(suite, out, python=sys.executable, timeout=1.5)
        runs.append(runner.run_target(FAKE, lane=k, lanes=n, claims=claims, shared=shared))

    threads = [threading.Thread(target=lane, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return merge_lanes(runs), runs, claims


def test_lanes_share_the_tests_and_give_the_verdicts_of_one_run(fake_run, tmp_path):
    single, _, _, _ = fake_run
    merged, lanes, claims = _lanes(write_suite(str(tmp_path / "suite"), {"test_fake.py": SUITE}, LEVELS),
                                   str(tmp_path / "out"))
    verdicts = sorted((r["test"], r["clause"], r["verdict"]) for r in merged.records)
    assert verdicts == sorted((r["test"], r["clause"], r["verdict"]) for r in single.records)
    assert len(verdicts) == 8  # each clause of each test once: no test ran in both lanes
    assert sorted(lane.lane for lane in lanes) == [0, 1]
    assert merged.attempts == sum(lane.attempts for lane in lanes) >= single.attempts
    assert len([f for f in os.listdir(claims) if not f.startswith("lane-")]) == 7  # one claim a test


def test_a_lane_takes_back_its_claims_that_never_began(tmp_path):
    """A child that died after claiming a test and before beginning it leaves the claim to
    its lane's next child; another lane's claim keeps the test out."""
    import hashlib
    import subprocess

    suite = write_suite(str(tmp_path / "suite"), {"test_t.py": TRIVIAL_THREE}, {"T-01": "MUST"})
    claims = tmp_path / "claims"
    claims.mkdir()
    for name, lane in (("test_t.py::test_mine", "0"), ("test_t.py::test_theirs", "1")):
        (claims / hashlib.sha1(name.encode()).hexdigest()).write_text(lane)
    results = tmp_path / "r.jsonl"
    cmd = Runner(suite, str(tmp_path / "out")).command(FAKE, str(results), None, claims=str(claims), lane=0)
    p = subprocess.run(cmd, cwd=suite, env=child_env(), capture_output=True, text=True)
    begun = [json.loads(l)["test"] for l in results.read_text().splitlines() if '"begin"' in l]
    assert begun == ["test_t.py::test_mine", "test_t.py::test_free"], p.stdout + p.stderr


def test_each_lane_starts_its_own_stretch_of_the_tests(tmp_path):
    """Lane K of N begins K/N of the way down the tests and wraps around, so that lanes work on
    different files until they meet (a file's imports paid by one lane)."""
    import subprocess

    suite = write_suite(str(tmp_path / "suite"), {"test_t.py": TRIVIAL_THREE}, {"T-01": "MUST"})
    order = {}
    for lane in (0, 1, 2):
        claims = tmp_path / ("claims%d" % lane)
        claims.mkdir()
        results = tmp_path / ("r%d.jsonl" % lane)
        cmd = Runner(suite, str(tmp_path / "out")).command(FAKE, str(results), None, claims=str(claims), lane=lane,
                                                           lanes=3)
        p = subprocess.run(cmd, cwd=suite, env=child_env(), capture_output=True, text=True)
        order[lane] = [json.loads(l)["test"].split("::")[1] for l in results.read_text().splitlines()
                       if '"begin"' in l]
        assert len(order[lane]) == 3, p.stdout + p.stderr
    assert order == {0: ["test_mine", "test_theirs", "test_free"], 1: ["test_theirs", "test_free", "test_mine"],
                     2: ["test_free", "test_mine", "test_theirs"]}


def test_a_lane_group_runs_together_in_the_lane_that_claims_it(tmp_path):
    """Tests marked lane_group(NAME) are claimed as one: the lane that reaches the first of them
    runs them all then (a peer library's import paid once); another lane skips them all."""
    import hashlib
    import subprocess

    suite = write_suite(str(tmp_path / "suite"), {"test_g.py": GROUPED}, {"T-01": "MUST"})
    order = {}
    for case, taken in (("free", None), ("taken", "1")):
        claims = tmp_path / ("claims-" + case)
        claims.mkdir()
        if taken:
            (claims / hashlib.sha1(b"group:peer").hexdigest()).write_text(taken)
        results = tmp_path / ("r-%s.jsonl" % case)
        cmd = Runner(suite, str(tmp_path / "out")).command(FAKE, str(results), None, claims=str(claims), lane=0,
                                                           lanes=2)
        p = subprocess.run(cmd, cwd=suite, env=child_env(), capture_output=True, text=True)
        order[case] = [json.loads(l)["test"].split("::")[1] for l in results.read_text().splitlines()
                       if '"begin"' in l]
        assert order[case], p.stdout + p.stderr
    assert order == {"free": ["test_a", "test_b_peer", "test_d_peer", "test_c", "test_e"],
                     "taken": ["test_a", "test_c", "test_e"]}


def _trivial_suite(*names, groups=None):
    """The source of a test file of trivial tests (clause T-01), those named in `groups` marked
    lane_group(its value)."""
    lines = ["import pytest", ""]
    for name in names:
        if name in (groups or {}):
            lines.append("@pytest.mark.lane_group(%r)" % groups[name])
        lines += ['@pytest.mark.clause("T-01")', "def %s():" % name, "    pass", ""]
    return "\n".join(lines)


GROUPED = _trivial_suite("test_a", "test_b_peer", "test_c", "test_d_peer", "test_e",
                         groups={"test_b_peer": "peer", "test_d_peer": "peer"})
TRIVIAL_THREE = _trivial_suite("test_mine", "test_theirs", "test_free")


TWO_FILES = {
    "test_one.py": '''
import pytest

@pytest.mark.clause("T-01")
def test_a():
    pass
''',
    "test_two.py": '''
import os, pytest

@pytest.mark.clause("T-02")
def test_b():
    pass

@pytest.mark.clause("T-02")
def test_c_dies():
    os.abort()

@pytest.mark.clause("T-03")
def test_d():
    pass
''',
}


def test_children_collect_only_the_files_left_to_run(tmp_path):
    """From the zygote's map of the suites: a clause run's children collect only the files with
    that clause, and a child after a death only the files with tests not yet begun; the
    verdicts are those of a run that collects everything."""
    suite = write_suite(str(tmp_path / "suite"), TWO_FILES, {"T-01": "MUST", "T-02": "MUST", "T-03": "MUST"})
    seen = {}
    for name, clause, fork in (("clause", "T-02,T-03", "1"), ("all", None, "1"), ("fresh", None, "0")):
        runner = Runner(suite, str(tmp_path / name), python=sys.executable, timeout=20, clause=clause,
                        env=dict(child_env(), DLCONFORM_FORK=fork))
        asked = []
        command = runner.command
        runner.command = lambda *a, **kw: asked.append(a[3] if len(a) > 3 else kw.get("paths")) or command(*a, **kw)
        run = runner.run_target(FAKE)
        seen[name] = (asked, sorted((r["test"], r["clause"], r["verdict"]) for r in run.records))
    two = os.path.join(suite, "test_two.py")
    # the zygote's collection (everything), the first child, the child after test_c_dies
    assert seen["clause"][0] == [None, [two], [two]]
    assert seen["all"][0] == [None, None, [two]]  # a whole run's first child collects everything
    assert seen["fresh"][0] == [None, None]  # no zygote, no map: every child collects everything
    assert seen["all"][1] == seen["fresh"][1]
    assert seen["clause"][1] == [r for r in seen["all"][1] if r[1] != "T-01"]


def test_a_resumed_lane_starts_where_it_was_and_leaves_the_other_lanes_tests(tmp_path):
    import hashlib
    import types

    items = [{"id": "test_%s.py::t%d" % (f, k), "file": "/s/test_%s.py" % f, "clauses": ["T-0%d" % k],
              "claim": "test_%s.py::t%d" % (f, k)} for f in "abc" for k in (1, 2)]
    claims = tmp_path / "claims"
    claims.mkdir()
    for item, lane in ((items[0], "0"), (items[1], "0"), (items[2], "1")):
        (claims / hashlib.sha1(item["claim"].encode()).hexdigest()).write_text(lane)
    run = types.SimpleNamespace(claims=str(claims), lane=1, lanes=2)
    runner = Runner(str(tmp_path), str(tmp_path / "out"))
    # lane 1 died in test_b.py::t1 (begun); test_a.py's tests are lane 0's
    assert runner._files_left(items, {"test_b.py::t1": None}, run, resumed=True) == ["/s/test_b.py", "/s/test_c.py"]
    assert runner._files_left(items, dict.fromkeys(i["id"] for i in items[2:4]), run, resumed=True) == \
        ["/s/test_c.py"]
    run.claims = None
    runner.clause = "T-02"
    assert runner._files_left(items, {}, run, resumed=False) == ["/s/test_a.py", "/s/test_b.py", "/s/test_c.py"]
    runner.clause = None
    assert runner._files_left(items, {}, run, resumed=False) is None


def test_a_child_collects_the_checks_garbage_and_exits_without_walking_the_heap(tmp_path):
    """At the session's end a child collects every cycle its checks left (their finalisers run
    before the exit, as the exit's collection would run them) and freezes what is alive, so
    that the interpreter's exit does not walk, and copy from the warm parent, the whole heap
    again (0.1 s of each child of ref, 0.3 s of torch's)."""
    out = tmp_path / "seen.txt"
    src = '''
import atexit, gc, os, pytest

class Cycle:
    def __del__(self):
        with open(%r, "a") as f:
            f.write("finalised\\n")

@pytest.mark.clause("T-01")
def test_leaves_a_cycle():
    c = Cycle()
    c.me = c
    atexit.register(lambda: open(%r, "a").write("frozen at exit: %%d\\n" %% gc.get_freeze_count()))
''' % (str(out), str(out))
    suite = write_suite(str(tmp_path / "suite"), {"test_gc.py": src}, {"T-01": "MUST"})
    run = Runner(suite, str(tmp_path / "out"), python=sys.executable, timeout=20).run_target(FAKE)
    assert [r["verdict"] for r in run.records] == ["pass"]
    lines = out.read_text().splitlines()
    assert lines[0] == "finalised" and lines[1].startswith("frozen at exit: "), lines
    assert int(lines[1].split(": ")[1]) > 1000
