"""Fuzz findings flow back into the suite.

- Every class of finding fuzz-ci confirmed (fuzz/known/, one key a line, its clause first)
  has suite checks that fail on that class of input (FLOW_BACK), or a reason it has none
  (NO_SUITE_CLAUSE).
- The suite's check of the fuzzer's shared seeds (suites/test_fuzz_seeds.py, whose rules are
suites/support/seeds.py) and the fuzz consumer target's oracles (dlconform.fuzz.
consumer_oracles, the Python twin of fuzz/consumer_oracles.c) give one verdict on every seed:
both find something, both find nothing, or both crash. Configs: ref and pyref clean and with
each of their consumer faults, and the host's numpy and torch where they import.

A fuzz breach labelled EXC (a refusal's class, which no catalogue clause names: fuzz/README.md
"Why these oracles") is no finding for this comparison. Seeds offering exchange tables for
the XAPI-04/06/11 checks are test_exchange_api.py's (support/seeds.offers_table_checks).
"""
import ast
import concurrent.futures
import glob
import importlib.util
import json
import os
import subprocess
import sys

from dlconform import HARNESS_DIR, REPO_DIR, SUITES_DIR, _ref, pyref

CHILD = r'''
import json, sys
sys.path.insert(0, %(suites)r)
from dlconform.targets.loader import load
from dlconform.fuzz import consumer_oracles as CO, record as R
from support import seeds as sd
T = load(%(spec)r)
for side, name in %(todo)r:
    data = open(sd.SEEDS_DIR + "/" + name, "rb").read()
    print("BEGIN", side, name, flush=True)
    if side == "suite":
        found = [c for c, v, _ in sd.judge(T, data) if v != "pass"]
    else:
        found = [c for c, _ in CO.judge(data, T.from_dlpack) if c != "EXC"]
    print("END", side, name, json.dumps(found), flush=True)
'''


def _seed_names():
    sys.path.insert(0, SUITES_DIR)
    from dlconform.fuzz import record as R
    from support import seeds as sd

    return [n for n, data in sd.seeds() if not sd.offers_table_checks(R.apply_offer(R.decode(data)))]


def _verdicts(spec, names):
    """{(side, seed): "finding" | "none" | "crash"} of both sides ("suite", "fuzz") against one
    target spec, in one child; a child that dies costs the (side, seed) in flight, and a new
    child takes the rest."""
    everything = [(side, n) for side in ("suite", "fuzz") for n in names]
    out, todo = {}, everything
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [HARNESS_DIR, os.environ.get("PYTHONPATH")])))
    while todo:
        script = CHILD % {"suites": SUITES_DIR, "spec": spec, "todo": todo}
        p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_DIR, env=env,
                           timeout=600)
        current = None
        for line in p.stdout.splitlines():
            if line.startswith("BEGIN "):
                current = tuple(line.split()[1:3])
            elif line.startswith("END "):
                _, side, name, found = line.split(" ", 3)
                out[side, name] = "finding" if json.loads(found) else "none"
                current = None
        if current is None and p.returncode != 0:
            raise AssertionError("%s: the child failed outside a seed: %s" % (spec, p.stderr[-800:]))
        if current is not None:
            out[current] = "crash"
        todo = [k for k in everything if k not in out]
    return out


#: configs whose faults the fuzz oracle cannot see, with the reason; the suite alone judges them
FUZZ_BLIND = {
    "pyref:fault=consumer_strides_as_bytes": "the fuzz oracle reads a result's layout through the buffer "
    "protocol (check_view), which a pure-Python Array of Python 3.11 cannot offer; the suite reads it through "
    "the adapter's describe()",
    "pyref:fault=consumer_used_name_temporary": "the fuzz oracles judge a rename by what the capsule's destructor "
    "does (a renamed capsule's runs no deleter), which a used_* name that dangles does not change; the suite reads "
    "the name itself (CAP-03, and CAP-09's test_consumer_used_names_static)",
}


def _configs():
    # the frameworks first: torch's child takes seconds, ref's a tenth of one, so the pool's
    # other worker takes the many small ones meanwhile instead of idling at the end
    out = [lib for lib in ("torch", "numpy") if importlib.util.find_spec(lib) is not None]
    out += ["ref", "pyref"]
    out += ["ref:fault=%s" % n for n, side in sorted(_ref.FAULT_SIDES.items()) if side == "consumer"]
    out += ["pyref:fault=%s" % n for n, f in sorted(pyref.FAULTS.items()) if f.side == "consumer"]
    assert set(FUZZ_BLIND) <= set(out), set(FUZZ_BLIND) - set(out)  # a stale entry goes
    return [c for c in out if c not in FUZZ_BLIND]


def _compare(spec, names):
    got = _verdicts(spec, names)
    return spec, [(n, got["suite", n], got["fuzz", n]) for n in names]


def test_suite_and_fuzz_oracles_agree_on_the_shared_seeds():
    names = _seed_names()
    assert len(names) >= 15
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        rows = list(pool.map(lambda spec: _compare(spec, names), _configs()))
    bad = [(spec, n, s, f) for spec, results in rows for n, s, f in results if s != f]
    found = sum(1 for _, results in rows for _, s, _ in results if s != "none")
    print("\n%d configs x %d seeds; %d (config, seed) pairs with a finding or a crash" % (len(rows), len(names), found))
    assert not bad, "the suite and the fuzz oracles disagree:\n" + "\n".join(
        "  %-44s %-40s suite: %-8s fuzz: %s" % row for row in bad)


# ---- every confirmed class of finding has suite checks -------------------------------------
#: clause of a fuzz/known key -> the suite checks (file::function) that fail on that class
FLOW_BACK = {
    "CAP-03": ["test_refusals.py::test_consumer_refusal_and_deleter",
               "test_capsule.py::test_import_legacy_from_foreign_producer"],
    "CPY-06": ["test_copy.py::test_consumer_copy_keyword", "test_fuzz_seeds.py::test_consumer_shared_fuzz_seed"],
    "CPY-08": ["test_device.py::test_consumer_device_cpu_impossible_is_buffererror"],
    "DEV-05": ["test_device.py::test_impossible_dl_device_raises_buffererror",
               "test_keywords.py::test_producer_refuses_bad_keywords_in_every_combination"],
    "DEV-06": ["test_device.py::test_consumer_device_cpu"],
    "DEV-07": ["test_device.py::test_consumer_refuses_foreign_device_with_buffererror",
               "test_refusals.py::test_consumer_device_refusals_and_deleter"],
    # the fuzz target labels an accepted item size 0 DT-10; the suite's rule for a 0-bit dtype is DT-13
    "DT-10": ["test_refusals.py::test_consumer_malformed_dtype_refusals_and_deleter"],
    "FLG-04": ["test_flags.py::test_copy_sets_is_copied",
               "test_keywords.py::test_producer_honours_every_valid_keyword_combination"],
    # the fuzz target labels accepted NULL data for elements LAY-01; the suite's rule is LAY-04
    "LAY-01": ["test_refusals.py::test_consumer_refusal_and_deleter"],
    "LAY-03": ["test_layout.py::test_consumer_honours_byte_offset"],
    "LAY-09": ["test_layout.py::test_consumer_refuses_null_shape_with_ndim",
               "test_layout.py::test_consumer_refuses_negative_ndim",
               "test_refusals.py::test_consumer_refusal_and_deleter"],
    "LAY-10": ["test_layout.py::test_consumer_huge_shape", "test_refusals.py::test_consumer_refusal_and_deleter"],
    "OWN-03": ["test_refusals.py::test_consumer_refusal_and_deleter",
               "test_layout.py::test_consumer_zero_size_null_data"],
    "STR-10": ["test_stream.py::test_cpu_producer_refuses_int_streams",
               "test_keywords.py::test_producer_refuses_bad_keywords_in_every_combination"],
    "STR-14": ["test_stream.py::test_consumer_stream_keywords_for_stream_devices",
               "test_fuzz_seeds.py::test_consumer_shared_fuzz_seed"],
    "VER-06": ["test_versioning.py::test_consumer_retries_for_every_keyword"],
    "VER-08": ["test_versioning.py::test_consumer_refuses_other_major",
               "test_refusals.py::test_consumer_refusal_and_deleter"],
    "VER-09": ["test_dtype.py::test_consumer_refuses_unknown_dtype_codes",
               "test_versioning.py::test_consumer_newer_minor",
               "test_refusals.py::test_consumer_ruled_dtype_refusals_and_deleter"],
    "XAPI-04": ["test_exchange_api.py::test_consumer_looks_on_the_type"],
    "XAPI-06": ["test_exchange_api.py::test_consumer_checks_the_major"],
}
#: key labels that name no catalogue clause, and why no suite check is theirs
NO_SUITE_CLAUSE = {
    "EXC": "the class of a refusal alone: no catalogue clause names the class a consumer refuses a CPU export "
           "with (fuzz/README.md, Why these oracles); DEV-07, CPY-08 and ERR-01 judge the classes the spec names",
    "SIGSEGV": "a crash signature: the crash verdict of the checks of the input's clause (LAY-09, LAY-01)",
    "SIGABRT": "a crash signature: the crash verdict of the checks of the input's clause (LAY-11)",
    "oom": "a crash signature: the crash verdict of the checks of the input's clause (LAY-01)",
    "input": "an input class set aside (input:negative-stride): test_layout.py's LAY-11 checks",
}


def _known_labels():
    labels = set()
    for path in glob.glob(os.path.join(REPO_DIR, "fuzz", "known", "**", "*.txt"), recursive=True):
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if line and not line.startswith("#"):
                labels.add(line.split(":")[0].split()[0])
    return labels


def _suite_functions():
    out = set()
    for path in glob.glob(os.path.join(SUITES_DIR, "test_*.py")):
        tree = ast.parse(open(path, encoding="utf-8").read())
        out |= {"%s::%s" % (os.path.basename(path), n.name) for n in tree.body if isinstance(n, ast.FunctionDef)}
    return out


def test_every_confirmed_class_of_finding_has_suite_checks():
    labels = _known_labels()
    assert len(labels) > 10, labels
    missing = sorted(l for l in labels if l not in FLOW_BACK and l not in NO_SUITE_CLAUSE)
    assert not missing, "fuzz/known has findings of these classes with no suite check: %s" % missing
    have = _suite_functions()
    gone = sorted(t for tests in FLOW_BACK.values() for t in tests if t not in have)
    assert not gone, "FLOW_BACK names suite checks that do not exist: %s" % gone
