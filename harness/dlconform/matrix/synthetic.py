"""Synthetic dlconform-results/1 documents, for the matrix benchmark and the matrix tests.

results_docs(n, seed) returns a list of (label, document) with about n result records in all,
spread over tiers and machines, with interop records (`peer`), messages and reproducers for
everything that did not pass, some verdicts that change between versions, and some that
disagree between two runs of the same version (conflicts).
"""
import random

from .. import catalogue as _catalogue

TIERS = (("bookworm", {"numpy": "1.24.2", "torch": "1.13.1"}),
         ("trixie", {"numpy": "2.2.4", "torch": "2.6.0"}),
         ("sid", {"numpy": "2.4.6", "torch": "2.14.1", "tvm_ffi": "0.1.12", "pyarrow": "25.0.0"}),
         ("host", {"numpy": "1.24.2", "torch": "1.13.1"}))
_WEIGHTS = (("pass", 70), ("warn", 6), ("unsupported", 12), ("skip", 3), ("fail", 6), ("timeout", 1), ("crash", 2))


def _pick(rng):
    x = rng.random() * sum(w for _, w in _WEIGHTS)
    for v, w in _WEIGHTS:
        x -= w
        if x < 0:
            return v
    return "pass"


def _doc(tier, libs, records, machine="x86_64", python="3.11.2"):
    targets = {"ref": {"status": "ran", "reason": "", "roles": ["consumer", "producer"],
                       "versions": {"dlconform._ref": "0.1.0"}}}
    for lib, v in libs.items():
        targets[lib] = {"status": "ran", "reason": "", "roles": ["consumer", "producer"], "versions": {lib: v}}
    return {
        "schema": "dlconform-results/1",
        "generated": "2026-01-01T00:00:00+00:00",
        "environment": {"python": {"version": python, "implementation": "CPython", "executable": "/usr/bin/python3"},
                        "platform": "Linux-synthetic", "machine": machine, "libraries": dict(libs),
                        "dlpack_header": [1, 3], "dlconform": {"version": "0.1.0", "git": "synthetic"}},
        "run": {"argv": ["run"], "exit_status": 1, "duration": 1.0},
        "targets": targets,
        "results": records,
        "summary": {},
        "tier": tier,
    }


def results_docs(n=100000, seed=1, tiers=TIERS, tests_per_clause=None):
    rng = random.Random(seed)
    clauses = [(c.id, c.level, c.group) for c in _catalogue.load()] or [("CAP-01", "MUST", "CAP")]
    # results per (tier, library): conformance clauses x tests, plus interop
    per_tier_libs = [(t, ["ref"] + list(libs)) for t, libs in tiers]
    n_pairs = sum(len(libs) for _, libs in per_tier_libs)
    tests = tests_per_clause or max(1, int(n * 0.85 / (n_pairs * len(clauses))))
    docs = []
    drift = {c[0]: rng.random() < 0.15 for c in clauses}  # clauses whose verdict depends on the version
    for tier, libs in tiers:
        records = []
        for lib in ["ref"] + list(libs):
            ver = libs.get(lib, "0.1.0")
            for cid, level, group in clauses:
                base = random.Random("%s|%s|%s" % (seed, lib, cid))
                for t in range(tests):
                    r2 = random.Random("%s|%s|%s|%d|%s" % (seed, lib, cid, t, ver if drift[cid] else ""))
                    v = "pass" if lib == "ref" else _pick(r2)
                    if base.random() < 0.5 and v != "pass" and lib != "ref" and not drift[cid]:
                        v = "pass"
                    rec = {"target": lib, "role": "producer" if t % 2 else "consumer", "clause": cid, "level": level,
                           "group": group, "verdict": v, "message": "", "repro": "",
                           "test": "test_%s.py::test_%s_%d" % (group.lower(), cid.replace("-", "_").lower(), t),
                           "duration": 0.001}
                    if v != "pass":
                        rec["message"] = "%s: %s on %s %s (case %d): the check saw %s" % (
                            cid, v, lib, ver, t, rng.choice(("strides (4, 1) for shape (2, 2)", "a NULL deleter",
                                                             "capsule name 'dltensor'", "BufferError",
                                                             "byte offset 3")))
                        rec["repro"] = "import %s\nfrom dlconform import _probe\nx = %s.ones((2, 2))\n" \
                                       "print(_probe.inspect(x.__dlpack__()))  # %s case %d" % (lib, lib, cid, t)
                    if v in ("crash", "timeout"):
                        rec["evidence"] = "Fatal Python error: Segmentation fault\n  File \"test_x.py\", line 12"
                    records.append(rec)
        # interop: consumer = target, peer = producer
        budget = max(0, n // len(tiers) - len(records))
        names = ["ref"] + list(libs)
        cases = 0
        while cases < budget:
            for cons in names:
                for prod in names:
                    v = "pass" if "ref" in (cons, prod) else _pick(rng)
                    rec = {"target": cons, "role": "consumer", "clause": rng.choice(("LAY-11", "SEM-01")),
                           "level": "MUST", "group": "LAY", "verdict": v, "peer": prod,
                           "message": "" if v == "pass" else "%s from %s: values differ at element 3" % (cons, prod),
                           "repro": "" if v == "pass" else "import %s, %s\n# %s -> %s" % (prod, cons, prod, cons),
                           "test": "test_interop.py::test_interop[%s-contiguous-float32-%d]" % (prod, cases),
                           "duration": 0.001}
                    records.append(rec)
                    cases += 1
                    if cases >= budget:
                        break
                if cases >= budget:
                    break
        docs.append((tier, _doc(tier, libs, records)))
    return docs


def conflicting_pair():
    """Two small documents for the same numpy version that disagree on one test: a conflict."""
    a = _doc("bookworm", {"numpy": "1.24.2"}, [
        {"target": "numpy", "role": "producer", "clause": "CAP-01", "level": "MUST", "group": "CAP",
         "verdict": "pass", "message": "", "repro": "", "test": "test_capsule.py::test_name", "duration": 0.01},
        {"target": "numpy", "role": "producer", "clause": "CAP-02", "level": "MUST", "group": "CAP",
         "verdict": "pass", "message": "", "repro": "", "test": "test_capsule.py::test_rename", "duration": 0.01},
    ])
    b = _doc("host", {"numpy": "1.24.2"}, [
        {"target": "numpy", "role": "producer", "clause": "CAP-01", "level": "MUST", "group": "CAP",
         "verdict": "pass", "message": "", "repro": "", "test": "test_capsule.py::test_name", "duration": 0.01},
        {"target": "numpy", "role": "producer", "clause": "CAP-02", "level": "MUST", "group": "CAP",
         "verdict": "fail", "message": "capsule not renamed after use", "repro": "import numpy\nprint(1)",
         "test": "test_capsule.py::test_rename", "duration": 0.01},
    ])
    return a, b


def device_run():
    """A run of the device checks (make conformance DEVICE=cuda): torch's CUDA tensors, each
    record naming the device they were on."""
    recs = [{"target": "torch@cuda", "role": "producer", "clause": c, "level": "MUST", "group": "STR", "verdict": v,
             "message": m, "repro": "import torch\nprint(1)" if m else "", "device": "cuda:0", "duration": 0.02,
             "test": "test_cuda_stream.py::%s" % test}
            for c, v, m, test in (("STR-01", "pass", "", "test_consumer_stream_sees_the_producers_data"),
                                  ("STR-03", "pass", "", "test_stream_minus_one_neither_waits_nor_blocks"),
                                  ("STR-02", "crash", "stream=-2: the process died (SIGSEGV)",
                                   "test_cuda_stream_of_wrong_type_or_range[minus-2]"))]
    return _doc("host", {"torch@cuda": "2.11.0"}, recs)
