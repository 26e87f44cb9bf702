"""Calibration: every check can fail, proven per check (issue 12, item 6).

One run of the whole suite against ref, pyref and every built-in fault of both (the
`calibration` fixture, shared by the tests of this module) shows:
- ref passes every check: a check that fails on the reference is a wrong check (pyref's
  verdicts are held to the same in test_pyref.py);
- every built-in fault of ref is caught by a check on the clause it breaks;
- every (test, clause) pair that ref or pyref records is caught (fail, warn, crash or
  timeout) under at least one fault: a check never seen failing is not yet a check. The pairs
  no fault can reach here are UNCATCHABLE, each with its reason. A parametrized test is one
  check over several inputs (interop's producer x layout x dtype cases): its pair is caught
  when one of its cases is.

A fault runs in the role of its side only (`ref:fault=NAME,role=SIDE`): a producer fault can
upset a consumer check through the forged producers, which share ref's code, and that check
would then be charged for a producer's breach. The data races of TSAN_FAULTS are invisible
from Python; the TSan stress of ref's cache catches them instead.
"""
import concurrent.futures
import os
import subprocess
import threading

import pytest

from dlconform import _ref, pyref
from test_meta import REPO, run_dlconform

#: the verdicts that say a check saw the fault
CAUGHT = frozenset({"fail", "warn", "crash", "timeout"})

# Faults that are data races and nothing else: no suite check can see them from Python
# (every exchange-API call holds the GIL), so the check that catches them is the TSan stress
# of ref's cache (probes/tests/tsan_cache.c, `make tsan`, part of `make test`): exit 66.
TSAN_FAULTS = {"cache_no_cas", "cache_deleter_no_gil"}

#: (test, clause) -> why no fault of ref or pyref can make it fail here; test is FILE::NAME
_ROUND_TRIP = ("the generic target's round trip: ref and pyref read their results themselves (NOT_FOR_REF) and their "
        "faults run one role, so no fault here reaches it; test_generic_standalone.py sees it fail on viewlib's "
        "planted bugs")
UNCATCHABLE = {
    ("test_interop.py::test_library_round_trip", "FLG-02"): _ROUND_TRIP,
    ("test_interop.py::test_library_round_trip", "LAY-03"): _ROUND_TRIP,
    ("test_interop.py::test_library_round_trip", "LAY-04"): _ROUND_TRIP,
    ("test_interop.py::test_library_round_trip", "LAY-08"): _ROUND_TRIP,
    ("test_interop.py::test_library_round_trip", "LAY-11"): _ROUND_TRIP,
}


def _fault_specs():
    """{target spec: (base, fault)} of every fault the suite can see."""
    specs = {}
    for base, names, side in (("ref", _ref.FAULTS, lambda n: _ref.FAULT_SIDES[n]),
                              ("pyref", pyref.FAULTS, lambda n: pyref.FAULTS[n].side)):
        for name in sorted(names):
            if not (base == "ref" and name in TSAN_FAULTS):
                specs["%s:fault=%s,role=%s" % (base, name, side(name))] = (base, name)
    return specs


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    """(proc, results.json, {spec: (base, fault)}) of the run of ref, pyref and every fault."""
    specs = _fault_specs()
    out = tmp_path_factory.mktemp("calibration")
    # about 10 CPU-minutes: a limit for a machine that others share too
    proc, data = run_dlconform(out, "--jobs", str(max(2, min(4, os.cpu_count() or 2))),
                               *("--target=" + s for s in ["ref", "pyref", *specs]), timeout=3600)
    assert data is not None, proc.stderr[-2000:]
    return proc, data, specs


def _pair(record):
    """(test, clause) of a record, the test without its parameters."""
    return record["test"].split("[")[0], record["clause"]


#: test -> (verdict, why) of the checks that do not apply to ref by design
NOT_FOR_REF = {
    "test_interop.py::test_library_round_trip": (
        "unsupported", "the generic target's round trip (for libraries read only through their own export); ref's "
        "adapter reads its results itself; test_generic_standalone.py sees it fail on viewlib's planted bugs"),
}


def _not_for_ref(record):
    return NOT_FOR_REF.get(record["test"], (None,))[0] == record["verdict"]


def test_ref_passes_every_check(calibration):
    proc, data, _ = calibration
    results = [r for r in data["results"] if r["target"] == "ref"]
    assert len(results) > 100, f"only {len(results)} results for ref"
    # interop records with another library as producer (`peer`) judge that pair, not ref alone:
    # a host producer that cannot export a dtype gives `unsupported` there
    not_pass = [(r["clause"], r["verdict"], r["test"], r["message"]) for r in results
                if r["verdict"] != "pass" and r.get("peer") in (None, "ref") and not _not_for_ref(r)]
    assert not not_pass, "ref must pass everything:\n" + "\n".join(map(str, not_pass))


def test_every_fault_target_ran_without_harness_errors(calibration):
    """Each fault's child ran the suite (its own side at least): a fault target that did not
    load would catch nothing and hide it. No check's own code raised (`error`), whatever the
    fault fed it."""
    proc, data, specs = calibration
    ran = {r["target"] for r in data["results"] if r["verdict"] not in ("unsupported", "skip")}
    missing = sorted(name for spec, (_, name) in specs.items() if spec not in ran)
    assert not missing, f"fault targets that ran no check: {missing}"
    errors = sorted({(r["target"].rpartition("__")[2], r["test"], r["message"][:200]) for r in data["results"]
                     if r["verdict"] == "error"})
    assert not errors, "checks that raised:\n" + "\n".join(map(str, errors))
    assert proc.returncode == 1, proc.stderr[-2000:]  # findings (the faults'), no usage error


_TSAN_BUILD = threading.Lock()


def _tsan_build():
    """(ok, why): builds build/tsan_cache once, where the compiler links -fsanitize=thread."""
    with _TSAN_BUILD:
        probe = subprocess.run(["sh", "-c", "echo 'int main(void){return 0;}' | ${CC:-cc} -fsanitize=thread -x c - "
                                "-o /tmp/dlconform_tsan_probe && rm -f /tmp/dlconform_tsan_probe"], capture_output=True)
        if probe.returncode != 0:
            return False, "no TSan here"
        build = subprocess.run(["make", "--no-print-directory", "build/tsan_cache"], cwd=REPO, capture_output=True,
                               text=True, timeout=600)
        return build.returncode == 0, build.stderr[-400:]


def _tsan_caught(name):
    """(caught by, error) of a TSan-only fault."""
    ok, why = _tsan_build()
    if not ok and why == "no TSan here":
        return ["skip:no TSan on this machine, not checked"], ""
    if not ok:
        return [], "tsan_cache did not build: " + why
    env = dict(os.environ, DLCONFORM_REF_FAULT=name, TSAN_OPTIONS="halt_on_error=0")
    p = subprocess.run([str(REPO / "build" / "tsan_cache")], env=env, capture_output=True, text=True, timeout=600)
    if p.returncode == 66 and "ThreadSanitizer: data race" in p.stderr:
        return ["tsan:data race (tsan_cache exit 66)"], ""
    return [], "tsan_cache exit %d" % p.returncode


def test_every_builtin_fault_is_caught_on_its_clause(calibration):
    _, data, specs = calibration
    by_spec = {}
    for r in data["results"]:
        if r["target"] in specs:
            by_spec.setdefault(r["target"], []).append(r)
    rows = []
    for spec, (base, name) in sorted(specs.items(), key=lambda kv: kv[1]):
        if base != "ref":
            continue  # pyref's faults: test_pyref.py
        clause = _ref.FAULTS[name][0]
        caught = sorted({"%s:%s" % (r["verdict"], r["test"].split("::")[-1]) for r in by_spec.get(spec, [])
                         if r["clause"] == clause and r["verdict"] in CAUGHT})
        rows.append((name, clause, caught, ""))
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        rows += [(name, _ref.FAULTS[name][0], *found)
                 for name, found in zip(sorted(TSAN_FAULTS), pool.map(_tsan_caught, sorted(TSAN_FAULTS)))]
    assert len(rows) >= 12
    width = max(len(n) for n, *_ in rows)
    print("\nfault -> clause -> caught by")
    for name, clause, caught, err in sorted(rows):
        print(f"  {name:<{width}}  {clause:<8} {', '.join(caught) or 'NOT CAUGHT ' + err}")
    missed = [(name, clause, err) for name, clause, caught, err in rows if not caught]
    assert not missed, f"faults no check catches: {missed}"


def test_every_test_and_clause_fails_under_some_fault(calibration):
    """Every (test, clause) pair that ref or pyref records is caught under at least one
    built-in fault, or is in UNCATCHABLE; and every UNCATCHABLE entry still names a recorded
    pair that no fault catches (an entry that is no longer needed is removed)."""
    _, data, specs = calibration
    results = data["results"]
    pairs = {_pair(r) for r in results if r["target"] in ("ref", "pyref")}
    assert len(pairs) > 150, f"only {len(pairs)} (test, clause) pairs"
    caught = {}
    for r in results:
        if r["target"] in specs and r["verdict"] in CAUGHT:
            caught.setdefault(_pair(r), set()).add("%s:%s" % specs[r["target"]])
    uncaught = sorted(p for p in pairs if p not in caught)
    unexplained = [p for p in uncaught if p not in UNCATCHABLE]
    print("\n%d (test, clause) pairs: %d caught by a fault, %d uncatchable here"
          % (len(pairs), len(pairs) - len(uncaught), len(uncaught) - len(unexplained)))
    assert not unexplained, "pairs no fault makes fail (add a fault, or fix a check that cannot fail):\n" + \
        "\n".join("  %s  %s" % p for p in unexplained)
    stale = sorted(set(UNCATCHABLE) - set(uncaught))
    assert not stale, "UNCATCHABLE entries that are caught or no longer recorded (remove them): %s" % stale
