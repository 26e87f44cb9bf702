"""Calibration: every check can fail, proven per check (issue 12, item 6).

The runs of ref, pyref and every built-in fault of both (the `calibration` fixture, shared by
the tests of this module) show:
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

Which runs (issue 22): ref and pyref run the whole suite; each fault runs the tests of its own
clause (the runs the reproducers' tests share, conftest.py: fault_runs) and the cases of its
line in calibration_map.json: cases where the last whole run saw it catch a (test, clause)
pair that no fault catches on the tests of its own clause. So the map is kept true by
the same assertions: a fault no longer caught where the map says, a new pair, a new fault or
a fault gone fails here, with "make calibrate" as the fix. `make calibrate`
(DLCONFORM_CALIBRATE=full) runs every fault on the whole suite instead, holds the same
assertions, and writes the map anew.
"""
import concurrent.futures
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest

import fault_repros
from dlconform import _ref, pyref
from test_meta import REPO

#: the committed map: fault spec -> the tests (FILE::NAME) it runs in make test
MAP = Path(__file__).with_name("calibration_map.json")
FULL = os.environ.get("DLCONFORM_CALIBRATE") == "full"

#: the verdicts that say a check saw the fault
CAUGHT = frozenset({"fail", "warn", "crash", "timeout"})

# Faults that are data races and nothing else: no suite check can see them from Python
# (every exchange-API call holds the GIL), so the check that catches them is the TSan stress
# of ref's cache (probes/tests/tsan_cache.c, `make tsan`, part of `make test`): exit 66.
TSAN_FAULTS = {"cache_no_cas", "cache_deleter_no_gil"}

# Faults whose effect beyond their own clause depends on how the allocator reuses freed memory
# (a dangling pointer): what they catch there on one machine they may miss on another, so the
# map never relies on them for another clause's pair (plan_from). CI once saw
# consumer_used_name_temporary miss the OWN-03 pair of test_consumer_refuses_negative_ndim.
UNSTEADY_FAULTS = {"consumer_used_name_temporary"}

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
#: the device check of ownership: the faults that break it are consumer faults of the CPU, which
#: the calibration runs on the CPU; test_cuda_checks.py runs them on pyref@cuda, where it fails
_CUDA_OWNERSHIP = ("caught on pyref@cuda by test_cuda_checks.py::test_consumer_faults_are_caught_on_cuda_capsules "
                   "(consumer_no_rename, consumer_double_delete, consumer_no_delete); here those faults run on the CPU")
UNCATCHABLE.update({("test_cuda_stream.py::test_cuda_consumer_owns_the_import_once", clause): _CUDA_OWNERSHIP
                    for clause in ("CAP-03", "OWN-03")})
UNCATCHABLE[("test_cuda_keywords.py::test_cuda_consumer_retries_without_new_keywords", "OWN-03")] = _CUDA_OWNERSHIP
#: the device twins of CAP-04 and ERR-02: pyref's CPU consumer faults of the code its CUDA import shares
UNCATCHABLE.update({("test_cuda_refusals.py::" + test, clause): (
    "caught on pyref@cuda by test_cuda_checks.py::test_consumer_faults_are_caught_on_cuda_capsules (%s); here that "
    "fault runs on the CPU" % fault) for test, clause, fault in (
        ("test_cuda_consumer_refuses_used_capsule", "CAP-04", "consumer_accepts_used"),
        ("test_cuda_producer_exception_propagates", "ERR-02", "consumer_wraps_producer_errors"))})
#: the class of a copy=False refusal where the consumer copies every import: ref and pyref view
_COPIES_ALWAYS = ("reached only by a consumer that copies every import (ref and pyref view): caught on the planted "
                  "bugs of such consumers, bytecopy's wrong_exc (test_copying_consumer.py) and cudalib's "
                  "copy_false_runtimeerror (test_generic_cuda.py)")
UNCATCHABLE.update({("test_copy.py::test_consumer_copy_keyword", "CPY-07"): _COPIES_ALWAYS,
                    ("test_cuda_keywords.py::test_cuda_consumer_copy_keyword", "CPY-07"): _COPIES_ALWAYS})


#: the simulated CUDA runtime (make build): the CUDA faults run on LIBRARY@cuda over it
SIM = fault_repros.SIM


def _fault_specs():
    """{target spec: (base, fault)} of every fault the suite can see: the CUDA faults of ref
    and pyref (fault_repros.cuda_fault) as ref@cuda and pyref@cuda on the simulated CUDA
    runtime, where it is built."""
    specs = {}
    for base, names in (("ref", _ref.FAULTS), ("pyref", pyref.FAULTS)):
        for name in sorted(names):
            if (base == "ref" and name in TSAN_FAULTS) or (fault_repros.cuda_fault(name) and not SIM.exists()):
                continue
            spec = fault_repros.base_of(base, name)
            specs["%s:fault=%s,role=%s" % (spec, name, _side(base, name))] = (base, name)
    return specs


def _side(base, name):
    """The role a fault of ref or pyref breaks."""
    return _ref.FAULT_SIDES[name] if base == "ref" else pyref.FAULTS[name].side


OTHER_SIDE = {"producer": "consumer", "consumer": "producer"}


def _own_clause(base, name):
    return _ref.FAULTS[name][0] if base == "ref" else pyref.FAULTS[name].clause


def _load_map():
    """{spec: [test, ...]} of calibration_map.json ({} when it is missing or unreadable)."""
    try:
        return json.loads(MAP.read_text())["faults"]
    except (OSError, ValueError, KeyError):
        return {}


def _run_all(out, plan):
    """{"results": records} of runs of every spec of `plan` ({spec: tests, or None for the
    whole suite}), a few children at a time (fault_repros.run_specs)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO / "harness"),
                                                                   os.environ.get("PYTHONPATH")])))
    env.pop("DLCONFORM_CUDART", None)  # the CPU targets' runs stay as they are without a runtime
    # a limit for a machine that others share too
    items = [(spec, None, tests and tuple(tests)) for spec, tests in plan.items()]
    runs = fault_repros.run_specs(out, items, jobs=max(2, min(4, os.cpu_count() or 2)), env=env)
    return {"results": [r for item in items for r in runs[item].records]}


@pytest.fixture(scope="module")
def calibration(tmp_path_factory, request):
    """(results, {spec: (base, fault)}, map) of the runs of ref, pyref and every fault. Under
    make calibrate every fault runs on the whole suite (about 10 CPU-minutes). In make test a
    fault's records are those of its run on the tests of its own clause (fault_runs, which the
    reproducers' tests share) and of the cases its line of the map adds; a fault the map does
    not name runs on the whole suite."""
    specs = _fault_specs()
    out = tmp_path_factory.mktemp("calibration")
    plan = {"ref": None, "pyref": None}
    if FULL:
        plan.update({spec: None for spec in specs})
        return _run_all(out, plan), specs, {}
    mapped = _load_map()
    plan.update({spec: mapped[spec] for spec in specs if mapped.get(spec)})
    plan.update({spec: None for spec in specs if spec not in mapped})
    data = _run_all(out, plan)
    # the clause runs offer both roles (the reproducers' tests read them as a user's run would):
    # the records of the other side's checks are left out here
    spec_of = {fault: spec for spec, fault in specs.items()}
    for fault, records in request.getfixturevalue("fault_runs").items():
        spec = spec_of.get(fault)
        if spec in mapped:
            other = OTHER_SIDE[_side(*fault)]
            data["results"] += [dict(r, target=spec) for r in records if r["role"] != other]
    return data, specs, mapped


def _pair(record):
    """(test, clause) of a record, the test without its parameters."""
    return record["test"].split("[")[0], record["clause"]


def _costs(results, specs):
    """{spec: {case: seconds}}: what running one case (FILE::NAME[PARAMS]) of a whole run costs
    under each fault, from its records' durations; a case that crashed or timed out adds a
    second, the restart of its child (which imports a peer library such as torch again)."""
    costs = {}
    for r in results:
        if r["target"] in specs:
            by = costs.setdefault(r["target"], {})
            extra = 1.0 if r["verdict"] in ("crash", "timeout") else 0.0
            by[r["test"]] = max(by.get(r["test"], 0.0), (r.get("duration") or 0.0) + extra)
    return costs


def plan_from(results, specs, marked=None):
    """{spec: [case, ...]}: the cases (FILE::NAME, or FILE::NAME[PARAMS] of a parametrized
    test) each fault runs in make test besides the tests of its own clause (fault_runs), chosen
    from `results` (a whole run) so that every (test, clause) pair of ref and pyref caught there
    stays caught: a pair that a fault catches on a test of its own clause needs nothing, and
    each other pair goes to the case that catches it at the least cost (_costs; a case already
    planned costs nothing). A fault's own clause is caught by its clause run or nowhere. The
    catches of UNSTEADY_FAULTS count for nothing here.
    `marked`: fault_repros.marked_clauses(cases=True), collected when not given."""
    costs = _costs(results, specs)
    marked = fault_repros.marked_clauses(cases=True) if marked is None else marked

    def own_test(spec, case):  # a case of a parametrized test by its own clauses
        return _own_clause(*specs[spec]) in marked.get(case, marked.get(case.split("[")[0], ()))

    caught = {}  # pair -> {(spec, case)}
    for r in results:
        if r["target"] in specs and r["verdict"] in CAUGHT and specs[r["target"]][1] not in UNSTEADY_FAULTS:
            caught.setdefault(_pair(r), set()).add((r["target"], r["test"]))
    plan = {spec: set() for spec in specs}

    def price(unit):
        spec, case = unit
        return (0.0 if case in plan[spec] else round(costs[spec].get(case, 0.0), 2), len(plan[spec]), spec, case)

    for pair in sorted({_pair(r) for r in results if r["target"] in ("ref", "pyref")}):
        units = caught.get(pair, set())
        if units and not any(own_test(spec, case) or case in plan[spec] for spec, case in units):
            spec, case = min(units, key=price)
            plan[spec].add(case)
    return {spec: sorted(cases) for spec, cases in sorted(plan.items())}


#: test -> (verdict, why) of the checks that do not apply to ref by design
NOT_FOR_REF = {
    "test_interop.py::test_library_round_trip": (
        "unsupported", "the generic target's round trip (for libraries read only through their own export); ref's "
        "adapter reads its results itself; test_generic_standalone.py sees it fail on viewlib's planted bugs"),
}
NOT_FOR_REF.update({test: (
    "unsupported", "plain ref has no CUDA device: ref@cuda and pyref@cuda on the simulated runtime are judged there "
    "(test_cuda_checks.py)")
    for test in ["test_cuda_stream.py::" + t for t in (
        "test_consumer_stream_sees_the_producers_data", "test_stream_minus_one_neither_waits_nor_blocks",
        "test_cuda_stream_zero_refused", "test_cuda_consumer_stream_survives",
        "test_cuda_to_host_synchronises_and_flags_the_copy", "test_cuda_copy_is_ordered_on_the_consumer_stream",
        "test_cuda_stream_of_wrong_type_or_range", "test_cuda_consumer_names_the_stream_it_reads_on",
        "test_cuda_consumer_owns_the_import_once", "test_cuda_consumer_honours_byte_offset")]
    + ["test_cuda_exchange.py::" + t for t in (
        "test_cuda_current_work_stream_is_the_librarys", "test_cuda_no_sync_functions_leave_the_streams_alone",
        "test_cuda_consumer_reads_on_the_work_stream")]
    + ["test_cuda_layout.py::" + t for t in (
        "test_cuda_consumer_reads_strided_views", "test_cuda_consumer_imports_dtypes",
        "test_cuda_consumer_takes_empty_and_0d_tensors")]
    + ["test_cuda_keywords.py::" + t for t in (
        "test_cuda_consumer_keeps_the_device", "test_cuda_consumer_copy_keyword",
        "test_cuda_consumer_copy_false_to_host", "test_cuda_consumer_host_copy_impossible",
        "test_cuda_consumer_device_cpu", "test_cuda_consumer_refuses_foreign_device",
        "test_cuda_consumer_passes_max_version_tuple", "test_cuda_consumer_checks_name_and_version",
        "test_cuda_consumer_retries_without_new_keywords",
        "test_cuda_consumer_retries_for_every_keyword", "test_cuda_consumer_readonly_import",
        "test_cuda_consumer_is_copied_import", "test_cuda_consumer_accepts_null_manager_ctx")]
    + ["test_cuda_refusals.py::" + t for t in (
        "test_cuda_consumer_refusal_and_deleter", "test_cuda_consumer_refuses_used_capsule",
        "test_cuda_producer_exception_propagates")]
    + ["test_cuda_interop.py::test_cuda_interop"]})


def _not_for_ref(record):
    """Whether a record of ref is one NOT_FOR_REF expects (any parametrized case of the test)."""
    return NOT_FOR_REF.get(record["test"].split("[")[0], (None,))[0] == record["verdict"]


def test_ref_passes_every_check(calibration):
    data, _, _ = calibration
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
    data, specs, _ = calibration
    ran = {r["target"] for r in data["results"] if r["verdict"] not in ("unsupported", "skip")}
    missing = sorted(name for spec, (_, name) in specs.items() if spec not in ran)
    assert not missing, f"fault targets that ran no check: {missing}"
    errors = sorted({(r["target"].rpartition("__")[2], r["test"], r["message"][:200]) for r in data["results"]
                     if r["verdict"] == "error"})
    assert not errors, "checks that raised:\n" + "\n".join(map(str, errors))


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
    data, specs, _ = calibration
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
    assert not missed, f"faults no check catches (where the map runs them: make calibrate): {missed}"


def test_every_test_and_clause_fails_under_some_fault(calibration):
    """Every (test, clause) pair that ref or pyref records is caught under at least one
    built-in fault, or is in UNCATCHABLE; and every UNCATCHABLE entry still names a recorded
    pair that no fault catches (an entry that is no longer needed is removed)."""
    data, specs, _ = calibration
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
    assert not unexplained, "pairs no fault makes fail (add a fault, or fix a check that cannot fail; a new " \
        "check or a map out of date: make calibrate):\n" + "\n".join("  %s  %s" % p for p in unexplained)
    stale = sorted(set(UNCATCHABLE) - set(uncaught))
    assert not stale, "UNCATCHABLE entries that are caught or no longer recorded (remove them): %s" % stale


def test_the_map_names_every_fault_and_existing_tests(calibration):
    """The map has a line for each fault and no other, and names tests that exist: a fault
    added or removed, or a test renamed, since the last `make calibrate` fails here (the faults
    the map lacks ran on the whole suite meanwhile, so nothing went unchecked)."""
    data, specs, mapped = calibration
    if FULL:
        pytest.skip("make calibrate writes the map (test_write_the_map)")
    tests = {r["test"] for r in data["results"] if r["target"] in ("ref", "pyref")}
    stale = sorted(set(specs) ^ set(mapped)) + sorted({t for ts in mapped.values() for t in ts} - tests)
    assert not stale, "calibration_map.json is out of date (make calibrate): %s" % stale


def test_write_the_map(calibration):
    """make calibrate: after the whole run held every assertion above, the map is written
    from it (plan_from)."""
    data, specs, _ = calibration
    if not FULL:
        pytest.skip("the map is written by make calibrate (DLCONFORM_CALIBRATE=full)")
    doc = {"note": "written by `make calibrate` (harness/tests/test_calibration.py): the cases each built-in fault "
                   "runs in make test besides the tests of its own clause", "faults": plan_from(data["results"], specs)}
    MAP.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
