"""Libraries written as a new user would write them (issue 20 item 9), each with planted bugs,
one at a time: the clean variant gets no fail, crash or error, and each planted bug is found on
its own clause and role, and on nothing else (the other role least of all).

- outlib (harness/tests/libs/outlib.py): producer only, ctypes memory of its own and a
  make(shape, dtype) constructor. Having no from_dlpack, the generic target cannot load it: it
  runs through its adapter (outlib_adapter.py), as harness/README.md says. Every check runs
  (the run is short: the consumer checks are unsupported).
- npbox (harness/tests/libs/npbox.py): numpy arrays as storage, with a __dlpack__ and a
  from_dlpack of its own in ctypes; through the generic target (`--target npbox`), its results
  read through __array_interface__. The layout and field checks run: the planted bugs are
  layout bugs, and these files hold the checks of both roles.
- viewlib (harness/tests/libs/viewlib.py): views the producer's memory, copies only when asked,
  and can be read only through its own __dlpack__. Its planted bugs are in its re-export, so
  they show in the generic target's round trip, which blames neither role ("any").
- tinyarr (harness/tests/libs/tinyarr.py): pure ctypes, 1-D and 2-D float32 and int32 only, so
  it refuses the 0-d tensors and the other dtypes some consumer cases use: its clean variant
  gets no warn either (a refusal of what it lacks reaches no clause: kit.Check.not_reached),
  and its consumer's double delete is OWN-03's alone (before: a crash of the producer's OWN-04
  and of the interop round trips).
"""
import concurrent.futures
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LIBS = REPO / "harness" / "tests" / "libs"
BAD = ("fail", "crash", "error", "timeout")

#: library -> (target spec, bug variable, run options, {bug: (clause, role) it breaks, or a list of them})
LIBRARIES = {
    "outlib": ("%s:OutlibTarget" % (LIBS / "outlib_adapter.py"), "OUTLIB_BUG", [],
               {"byte_strides": ("LAY-05", "producer"), "drop_readonly": ("FLG-02", "producer"),
                "no_destructor": ("CAP-05", "producer")}),
    "npbox": ("npbox", "NPBOX_BUG", ["--tests", "test_layout.py", "--tests", "test_fields.py"],
              {"ignore_offset": ("LAY-03", "consumer"), "ignore_strides": ("LAY-11", "consumer"),
               "null_strides": ("LAY-06", "producer")}),
    "viewlib": ("viewlib", "VIEWLIB_BUG", [],
                {"drop_offset": ("LAY-03", "any"), "drop_readonly": ("FLG-02", "any"),
                 # a crash on every import with a negative stride: test_refusals feeds one whose span
                 # overflows too (LAY-10). Its producer tensors come through its from_dlpack: those
                 # with negative strides cannot be made, which is no producer check's crash
                 "abort_negative_strides": [("LAY-10", "consumer"), ("LAY-11", "consumer")]}),
    "tinyarr": ("tinyarr", "TINYARR_BUG", [],
                {"byte_strides": ("LAY-05", "producer"), "double_delete": ("OWN-03", "consumer"),
                 "ignore_offset": ("LAY-03", "consumer"), "readonly_noflag": ("FLG-02", "producer"),
                 "none_versioned": ("VER-02", "producer")}),
}
#: libraries whose clean variant gets no warn either: every warn would be a false one
NO_WARN = ("tinyarr",)
CASES = [(lib, bug) for lib, (_, _, _, bugs) in LIBRARIES.items() for bug in [""] + sorted(bugs)]


def _run(tmp_path, lib, bug):
    spec, variable, options, _ = LIBRARIES[lib]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "harness"), str(LIBS)]), OMP_NUM_THREADS="1")
    env[variable] = bug
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", spec, "--out", str(out),
                        "-q", *options], env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stdout[-3000:]
    results = json.loads((out / "results.json").read_text())["results"]
    assert results and all(r["target"] == spec for r in results), p.stdout[-3000:]
    return p.returncode, results


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """{(lib, bug): future of _run}: the selected cases' runs, two at a time. A run leaves a
    core idle much of its time (its probes, its warm parents' imports, its reports: one core's
    work), so two together take little longer than one alone."""
    selected = [(item.callspec.params["lib"], item.callspec.params["bug"]) for item in request.session.items
                if item.module is request.module and hasattr(item, "callspec")]
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=2)
    futures = {case: pool.submit(_run, tmp_path_factory.mktemp("%s-%s" % (case[0], case[1] or "clean")), *case)
               for case in selected}
    yield futures
    pool.shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize("lib, bug", CASES, ids=["%s-%s" % (lib, bug or "clean") for lib, bug in CASES])
def test_new_user_library(runs, lib, bug):
    rc, results = runs[(lib, bug)].result()
    bad = sorted({(r["clause"], r["role"]) for r in results if r["verdict"] in BAD})
    detail = [(r["verdict"], r["clause"], r["role"], r["test"], r["message"][:200]) for r in results
              if r["verdict"] in BAD]
    assert any(r["verdict"] == "pass" for r in results)
    if not bug:
        assert rc == 0 and not bad, detail
        if lib in NO_WARN:
            assert not [r for r in results if r["verdict"] == "warn"], [
                (r["clause"], r["role"], r["test"], r["message"][:200]) for r in results if r["verdict"] == "warn"]
        return
    expected = LIBRARIES[lib][3][bug]
    expected = expected if isinstance(expected, list) else [expected]
    # found on its own clause and role, and nowhere else: not on other clauses its own role's
    # checks read values through, not on the other role
    assert rc == 1 and bad == expected, detail
