"""`dlconform recheck`: every finding's reproducer run again, outside the suite, judged by what
it did: the classification on scripts that do each thing a reproducer can do, then on real
findings of ref's faults (reproduced; with the fault off, not reproduced), standalone, and a
crash whose script runs on the C allocator so that it dies where the suite saw it die."""
import json
import os
import subprocess
import sys

import pytest

import fault_repros as fr
from dlconform import recheck, repro
from fakes import have_ref

needs_ref = pytest.mark.skipif(not have_ref(), reason="needs the built C extensions (make build)")


def _script(body, env=""):
    return "# run: %s%s repro.py\nimport os, signal, sys, time\n%s\n" % (env, sys.executable, body)


def _record(test, verdict, repro_text, clause="LAY-05", target="lib"):
    return {"target": target, "clause": clause, "test": test, "verdict": verdict, "role": "producer",
            "message": "", "repro": repro_text}


def _results(tmp_path, records):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": "dlconform-results/1", "results": records}))
    return path


def _recheck(*args):
    return subprocess.run([sys.executable, "-m", "dlconform", "recheck", *map(str, args)], env=fr._env(),
                          capture_output=True, text=True, timeout=600)


SHOWN = [  # (verdict of the finding, what its script does, what recheck says)
    ("fail", 'print("REPRODUCED LAY-05: strides in bytes"); sys.exit(1)', "reproduced"),
    ("warn", 'print("REPRODUCED LAY-05: a departure"); sys.exit(1)', "reproduced"),
    ("crash", "os.kill(os.getpid(), signal.SIGSEGV)", "reproduced"),
    ("timeout", "time.sleep(60)", "reproduced"),
    ("fail", "os.kill(os.getpid(), signal.SIGABRT)", "reproduced as died"),
    ("crash", 'print("REPRODUCED LAY-05: a finding, no death"); sys.exit(1)', "reproduced as finding"),
    ("fail", 'print("not reproduced: the check of every clause passes")', "not reproduced"),
    # neither says the finding is gone (before: "not reproduced", and exit 1 as if fixed)
    ("fail", 'print("UNSUPPORTED: no read-only tensors")', "unsupported"),
    ("fail", 'print("UNDETERMINED LAY-05"); sys.exit(3)', "undetermined"),
    ("fail", 'raise ImportError("no module named lib")', "broken"),
    ("fail", "sys.exit(1)", "broken"),  # exit 1 without the line: a traceback, not the finding
    # an import of dlconform's own that failed is never the library's finding; the library's is
    ("warn", 'print("REPRODUCED OWN-03: unexpected exception ImportError: cannot import name \'_ref\' from '
             '\'dlconform\' (<embedded dlconform>)"); sys.exit(1)', "broken"),
    ("fail", 'print("REPRODUCED LAY-05: unexpected exception ModuleNotFoundError: No module named \'support.x\'"); '
             'sys.exit(1)', "broken"),
    ("fail", 'print("REPRODUCED LAY-05: unexpected exception ModuleNotFoundError: No module named \'lib.sub\'"); '
             'sys.exit(1)', "reproduced"),
    ("fail", 'print("NOT RUN: repro.py: dlconform\'s module dlconform._ref is not beside this script"); sys.exit(4)',
     "broken"),
]


def test_each_outcome_of_a_reproducer_is_told_apart(tmp_path):
    records = [_record("test_x.py::test_%d" % i, verdict, _script(body)) for i, (verdict, body, _) in enumerate(SHOWN)]
    records.append(_record("test_x.py::test_env", "fail", _script(
        'print("REPRODUCED LAY-05: %s" % os.environ["LIB_MODE"]); sys.exit(1)', env="LIB_MODE=broken ")))
    records.append(_record("test_x.py::test_pass", "pass", _script("sys.exit(1)")))  # not a finding: not run
    p = _recheck("--results", _results(tmp_path, records), "--timeout", 2, "--out", tmp_path / "out")
    doc = json.loads((tmp_path / "out" / "recheck.json").read_text())
    got = {f["test"]: f for f in doc["findings"]}
    assert len(got) == len(SHOWN) + 1, p.stdout
    for i, (verdict, body, expected) in enumerate(SHOWN):
        assert got["test_x.py::test_%d" % i]["recheck"] == expected, (body, got["test_x.py::test_%d" % i])
    assert got["test_x.py::test_env"]["detail"] == "REPRODUCED LAY-05: broken"  # the run line's assignment
    assert "exit 1: ImportError: no module named lib" in got["test_x.py::test_9"]["detail"]
    assert p.returncode == 2, p.stdout + p.stderr  # a broken reproducer is dlconform's error
    assert "%d findings: 8 reproduced, 1 not reproduced, 5 broken, 1 unsupported, 1 undetermined" % (
        len(SHOWN) + 1) in p.stdout
    assert "it could not import dlconform._ref (dlconform's problem" in got["test_x.py::test_11"]["detail"]
    assert got["test_x.py::test_14"]["detail"].startswith("NOT RUN: repro.py: ")
    md = (tmp_path / "out" / "recheck.md").read_text()
    assert "| reproduced as died | lib | LAY-05 | test_x.py::test_4 | fail | died: killed by SIGABRT" in md
    assert (tmp_path / "out" / "runs").is_dir()


def test_exit_status_says_whether_all_reproduced(tmp_path):
    ok = _record("t::a", "fail", _script('print("REPRODUCED LAY-05: x"); sys.exit(1)'))
    fixed = _record("t::b", "fail", _script("pass"))
    p = _recheck("--results", _results(tmp_path, [ok]))
    assert p.returncode == 0 and "1 findings: 1 reproduced" in p.stdout
    p = _recheck("--results", _results(tmp_path, [ok, fixed]))
    assert p.returncode == 1 and "1 not reproduced" in p.stdout
    p = _recheck("--results", _results(tmp_path, [ok, fixed]), "--clause", "CAP-*")
    assert p.returncode == 0 and "no findings of the selection" in p.stdout


@pytest.mark.parametrize("args, says", [
    (["--results", "/nonexistent/results.json"], "cannot read findings from /nonexistent/results.json"),
    (["--target", "nolib"], "has no target 'nolib' (its targets: lib)"),
    (["--timeout", "0"], "--timeout and --jobs must be positive"),
    (["--jobs", "x"], "invalid int value"),
    (["--results", "BAD"], "a record has no 'target' (not a results.json of dlconform run?)"),
    (["--clause", "NOPE-*"], "--clause 'NOPE-*' matches no clause of the catalogue"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, args, says):
    path = _results(tmp_path, [_record("t::a", "fail", _script("pass"))])
    if "BAD" in args:  # a JSON file whose records are not dlconform's
        (tmp_path / "bad").mkdir()
        args = ["--results", _results(tmp_path / "bad", [{"verdict": "fail"}])]
    p = _recheck(*(["--results", path] if "--results" not in args else []), *args)
    assert p.returncode == 2 and says in p.stderr and "Traceback" not in p.stderr, p.stderr


@needs_ref
def test_findings_of_a_fault_reproduce_and_stop_once_it_is_fixed(tmp_path):
    run = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "ref:fault=readonly_unflagged",
                        "--clause", "FLG-02", "--out", run], env=fr._env(), capture_output=True, text=True,
                       timeout=300, cwd=str(fr.REPO))
    results = run / "results.json"
    hint = [line for line in p.stdout.splitlines() if "recheck" in line]  # the run says how to recheck
    assert len(hint) == 1 and hint[0].startswith("dlconform: each finding's reproducer, run again: "), p.stdout
    again = subprocess.run(["sh", "-c", hint[0].split(": ", 2)[2] + " -q"], cwd=str(fr.REPO), capture_output=True,
                           text=True, timeout=300, env={k: v for k, v in fr._env().items() if k != "PYTHONPATH"})
    assert again.returncode == 0 and "0 not reproduced, 0 broken" in again.stdout, again.stdout + again.stderr
    p = _recheck("--results", results, "--out", tmp_path / "again")
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "again" / "recheck.json").read_text())
    assert doc["findings"] and all(f["recheck"] == "reproduced" for f in doc["findings"])
    assert all(f["detail"].startswith("REPRODUCED FLG-02: ") for f in doc["findings"])
    p = _recheck("--results", results, "--standalone")  # the bug reports' scripts, dlconform not importable
    assert p.returncode == 0 and "0 not reproduced, 0 broken" in p.stdout, p.stdout
    fixed = json.loads(results.read_text())
    for r in fixed["results"]:  # the library fixed: the same scripts against ref without the fault
        r["repro"] = r.get("repro", "").replace("fault='readonly_unflagged'", "fault=None")
    p = _recheck("--results", _results(tmp_path, fixed["results"]))
    assert p.returncode == 1 and "%d not reproduced" % len(doc["findings"]) in p.stdout, p.stdout


def _numpy_into_ref(target, check):
    """A numpy array imported by the target and let go (test_a_crash_reproducer_dies_...)."""
    import gc

    import numpy

    y = target.from_dlpack(numpy.arange(6, dtype=numpy.float32))
    check.that(y is not None, "LAY-11", "the import")
    del y
    gc.collect()


@needs_ref
def test_a_crash_reproducer_dies_where_the_suite_saw_it_die(tmp_path):
    """ref's consumer calling numpy's deleter twice frees numpy's managed struct twice: in a
    suite the process dies at a later allocation (test_runner.py: the runner gives a crash's
    script repro.CRASH_ENV). A check's script that imports numpy's array into ref so (the
    interop check did, before it left double-deleting consumers alone) may run through on
    Python's allocator; on the C allocator it dies at the double free."""
    pytest.importorskip("numpy")
    text = repro.script(_numpy_into_ref, {}, "ref:fault=consumer_double_delete", focus="LAY-11",
                        levels={"SEM-01": "MUST", "LAY-11": "MUST"})
    records = [_record("test_interop.py::test_interop_round_trip[numpy-contiguous-float32]", "crash", text),
               _record("test_interop.py::test_interop_round_trip[numpy-contiguous-float32]", "crash",
                       repro.with_env(text, repro.CRASH_ENV), clause="SEM-01")]
    p = _recheck("--results", _results(tmp_path, records), "--out", tmp_path / "again")
    got = {f["clause"]: f for f in json.loads((tmp_path / "again" / "recheck.json").read_text())["findings"]}
    # on Python's allocator whether the damage shows depends on the allocations that follow (the
    # interop check's script ran through); on the C allocator the double free dies where it is
    assert got["SEM-01"]["recheck"] == "reproduced" and got["SEM-01"]["seen"] == "died", got
    assert "double free" in got["SEM-01"]["detail"] or "SIGSEGV" in got["SEM-01"]["detail"], got
    assert p.returncode == (0 if got["LAY-05"]["recheck"] == "reproduced" else 1), p.stdout


def test_with_env_adds_to_the_run_line_only_what_it_lacks():
    text = "# run: A=1 PYTHONPATH=x python3 repro.py\nprint(1)\n"
    assert repro.with_env(text, {"A": "2", "B": "two words"}) == \
        "# run: B='two words' A=1 PYTHONPATH=x python3 repro.py\nprint(1)\n"
    assert repro.header_env(repro.with_env(text, repro.CRASH_ENV)) == {"A": "1", "PYTHONMALLOC": "malloc"}
    assert repro.with_env("python3 -m dlconform run", {"A": "1"}) == "python3 -m dlconform run"


def test_outcome_counts_and_status():
    class F:
        verdict = "fail"
    outs = [recheck.Outcome(F, "finding", "", 0), recheck.Outcome(F, "passed", "", 0)]
    assert recheck.counts(outs) == {"reproduced": 1, "not reproduced": 1} and recheck.exit_status(outs) == 1


def test_the_library_is_found_where_the_run_found_it(tmp_path):
    """A user's library on their PYTHONPATH, or in the folder they ran from: the run line sets
    PYTHONPATH to dlconform's folders, and recheck adds its own PYTHONPATH and folder after
    them, as the run's children had them (standalone scripts too)."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "userlib.py").write_text("BUG = 'flags 0x0'\n")
    body = 'import userlib; print("REPRODUCED LAY-05: " + userlib.BUG); sys.exit(1)'
    path = _results(tmp_path, [_record("t::a", "fail", _script(body, env="PYTHONPATH=/nonexistent "))])
    env = dict(fr._env(), PYTHONPATH=fr._env()["PYTHONPATH"] + os.pathsep + str(lib))
    p = subprocess.run([sys.executable, "-m", "dlconform", "recheck", "--results", str(path)], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "REPRODUCED LAY-05: flags 0x0" in p.stdout, p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "dlconform", "recheck", "--results", str(path)], env=fr._env(),
                       cwd=str(lib), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "1 reproduced" in p.stdout, p.stdout + p.stderr


def test_make_recheck_reruns_the_findings_of_out(tmp_path):
    """`make recheck OUT=DIR`: the findings of DIR/results.json, their outcomes into DIR/recheck."""
    ok = _record("t::a", "fail", _script('print("REPRODUCED LAY-05: x"); sys.exit(1)'))
    _results(tmp_path, [ok])
    env = dict(fr._env(), PYTHON=sys.executable)
    p = subprocess.run(["make", "--no-print-directory", "-C", str(fr.REPO), "recheck", "OUT=%s" % tmp_path, "JOBS=1"],
                       env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and "1 findings: 1 reproduced" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / "recheck" / "recheck.md").exists()


def _checklike(*lines):
    """A script in a check's reproducer form (the imports mark), whose main block runs `lines`."""
    return "\n".join([repro.run_header(), repro.IMPORTS_MARK] + list(lines[:-1])
                     + ['', 'if __name__ == "__main__":', "    " + lines[-1]]) + "\n"


def test_standalone_recheck_of_a_check_with_no_standalone_form_is_unsupported(tmp_path):
    """--standalone: a check that needs a native module of dlconform's (or a module other than the
    library) has no standalone form by design: `unsupported` with standalone_problem's reason, not
    `broken` (exit 2, dlconform's own error); a standalone script that says NOT RUN is broken."""
    records = [
        _record("t::native", "fail", _checklike("from dlconform import _probe", "print(_probe)"), target="pyref"),
        _record("t::third", "fail", _checklike("import pytest", "print(pytest)"), target="pyref"),
        _record("t::not_run", "fail", _checklike("import sys", 'print("NOT RUN: repro.py: x"); sys.exit(4)'),
                target="pyref"),
        _record("t::found", "fail", _checklike("import sys", 'print("REPRODUCED LAY-05: x"); sys.exit(1)'),
                target="pyref"),
    ]
    p = _recheck("--results", _results(tmp_path, records), "--standalone", "--out", tmp_path / "out")
    got = {f["test"]: f for f in json.loads((tmp_path / "out" / "recheck.json").read_text())["findings"]}
    assert got["t::native"]["seen"] == "unsupported", got["t::native"]
    assert got["t::native"]["detail"] == "no standalone script: it needs dlconform's native module dlconform._probe"
    assert (got["t::third"]["seen"], got["t::third"]["detail"]) == ("unsupported", "no standalone script: it imports "
                                                                                   "pytest")
    assert got["t::not_run"]["seen"] == "broken" and got["t::not_run"]["detail"].startswith("NOT RUN: ")
    assert got["t::found"]["recheck"] == "reproduced", got["t::found"]
    assert p.returncode == 2 and "4 findings: 1 reproduced, 0 not reproduced, 1 broken, 2 unsupported" in p.stdout, \
        p.stdout
    del records[2]
    p = _recheck("--results", _results(tmp_path, records), "--standalone")
    # unsupported says nothing of a fix: exit 0 (before: 1, "no longer reproduce", as if the bug were gone)
    assert p.returncode == 0 and "3 findings: 1 reproduced, 0 not reproduced, 0 broken, 2 unsupported" in p.stdout, \
        p.stdout


@needs_ref
def test_fuzz_findings_are_rechecked_through_their_python_reproducers(tmp_path):
    """fuzz-ci merges its findings into results.json with their Python reproducers
    (dlconform.fuzz.repro), which end as a check's script does: an oracle breach reproduces the
    target's crash (its abort); a sanitizer crash the script cannot show is the sanitizer
    build's to replay (fuzz/tests/test_fuzz_py.py), and unsupported without one; a
    finding whose clause no longer shows is undetermined when another breach does, and passes
    when only breaches the known file lists do; the validator's replay command is unsupported.
    ref's consumer_no_rename breaks CAP-03 and OWN-03 on an import, nothing on a used capsule's
    refusal. Their bug reports say why they do not stand alone."""
    from dlconform.fuzz import replay, repro as fuzz_repro

    seeds = fr.REPO / "fuzz" / "corpus" / "seeds"
    bad, clean = (seeds / "legacy-uint8-negstride-offset").read_bytes(), (seeds / "legacy-used-capsule").read_bytes()
    known = tmp_path / "known.txt"
    known.write_text("CAP-03\nOWN-03: deleter ran N times once the result was dropped\n")

    def fuzz(key, clause, text):
        return _record("fuzz:ref:" + key, "crash", text, clause=clause, target="ref")

    records = [
        fuzz("oracle", "CAP-03", fuzz_repro.script(bad, "ref", "CAP-03: left its capsule named dltensor", "a")),
        fuzz("asan", "LAY-11", fuzz_repro.script(clean, "ref", "LAY-11: heap-buffer-overflow on an input", "b",
                                                 sanitizer="heap-buffer-overflow")),
        fuzz("other", "LAY-03", fuzz_repro.script(bad, "ref", "LAY-03: result starts at data+N", "c")),
        fuzz("known", "LAY-03", fuzz_repro.script(bad, "ref", "LAY-03: result starts at data+N", "d", str(known))),
        fuzz("validator", "LAY-09", "build/fuzz/dump_record X; make fuzz-replay TARGET=validator FILE=X"),
    ]
    results = _results(tmp_path, records)
    p = subprocess.run([sys.executable, "-m", "dlconform", "recheck", "--results", str(results), "--out",
                        str(tmp_path / "out")], env=fr._env(DLCONFORM_REF_FAULT="consumer_no_rename"),
                       capture_output=True, text=True, timeout=300)
    got = {f["test"].split(":")[2]: (f["recheck"], f["seen"], f["detail"])
           for f in json.loads((tmp_path / "out" / "recheck.json").read_text())["findings"]}
    gone = 2 if replay.binary_of("ref") else 1  # the known one passes; the ASan one where it is replayed
    assert p.returncode == 1 and "1 reproduced, %d not reproduced, 0 broken" % gone in p.stdout, p.stdout + p.stderr
    assert got["oracle"][:2] == ("reproduced", "finding") and got["oracle"][2].startswith("REPRODUCED CAP-03: "), got
    if replay.binary_of("ref"):  # the sanitizer build replays it: it runs through
        assert got["asan"][1] == "passed" and "ran the input through" in got["asan"][2], got
    else:
        assert got["asan"][1] == "unsupported" and "make fuzz-replay FILE=b" in got["asan"][2], got
    assert got["other"][1] == "undetermined" and "another breach does: CAP-03" in got["other"][2], got
    assert got["known"][1] == "passed" and got["known"][2].startswith("done: no new breach; 4 known"), got
    assert got["validator"][1] == "unsupported", got
    p = subprocess.run([sys.executable, "-m", "dlconform", "recheck", "--results", str(results), "--standalone",
                        "--out", str(tmp_path / "alone")], env=fr._env(), capture_output=True, text=True, timeout=300)
    alone = json.loads((tmp_path / "alone" / "recheck.json").read_text())["findings"]
    assert p.returncode == 0 and {f["seen"] for f in alone} == {"unsupported"}, p.stdout + p.stderr
    out = tmp_path / "bugs"
    p = subprocess.run([sys.executable, "-m", "dlconform", "report", str(out), "--results", str(results),
                        "--all-findings", "-q"], env=fr._env(), capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    text = "".join(f.read_text() for f in sorted(out.iterdir()))
    assert text.count("No standalone reproducer: it runs dlconform's fuzz oracles") == 4, text[:3000]


@pytest.mark.parametrize("command", ["recheck", "report"])
@pytest.mark.parametrize("content, says", [
    (b'{"results": [', "not JSON (Expecting value"),
    (b"\xd0\xcf\x11\xe0 binary", "not JSON ('utf-8' codec can't decode"),
    (b"[]", "list indices must be integers"),
    (b'{"results": [{"target": 1}]}', "a record has no 'verdict'"),
])
def test_a_results_file_that_is_not_one_is_one_line_for_recheck_and_report(tmp_path, command, content, says):
    """dlconform recheck and dlconform report read results.json alike (bugreport.read_findings):
    a file that is not one, however it is not, is one line and exit 2 (before, report died with
    a KeyError or TypeError traceback, and both with a JSONDecodeError one)."""
    path = tmp_path / "results.json"
    path.write_bytes(content)
    args = ["--results", str(path)] + (["--out", str(tmp_path / "o")] if command == "recheck" else
                                       [str(tmp_path / "o"), "--all-findings"])
    p = subprocess.run([sys.executable, "-m", "dlconform", command] + args, env=fr._env(), capture_output=True,
                       text=True, timeout=60)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and says in lines[0], p.stderr
    assert lines[0].startswith("dlconform %s: cannot read findings from %s: " % (command, path)), lines
