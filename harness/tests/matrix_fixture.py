"""A small merged matrix with every feature the views show: several tiers and versions (so a
version history with regressions and fixes), interop records, a conflict and duplicates, a
device run (torch@cuda, records on cuda:0), a failed tier and a rejected input. Used by
test_matrix.py and test_matrix_browser.py."""
import json
import os

from dlconform.matrix import merge, synthetic


def write_inputs(tmp, n=3000):
    """Writes the input files under tmp; returns the merge arguments."""
    args = []
    for label, doc in synthetic.results_docs(n, seed=7, tests_per_clause=1):
        path = os.path.join(str(tmp), label, "results.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(doc, f)
        args.append(path)
    a, b = synthetic.conflicting_pair()
    for name, doc, label in (("ci-a", a, "bookworm@ci-runner-1"), ("ci-b", b, "host@laptop")):
        path = os.path.join(str(tmp), name, "results.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(doc, f)
        args.append("%s=%s" % (label, path))
    gpu = synthetic.device_run()
    path = os.path.join(str(tmp), "h200", "results.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(gpu, f)
    args.append("host@h200=" + path)
    failed = os.path.join(str(tmp), "gpu", "failure.json")
    os.makedirs(os.path.dirname(failed), exist_ok=True)
    with open(failed, "w") as f:
        json.dump({"schema": merge.FAILURE_SCHEMA, "tier": "sid", "machine": "gpu-box", "stage": "build",
                   "exit_status": 1, "message": "mmdebstrap failed: could not download python3-torch",
                   "log": "E: Failed to fetch http://deb.debian.org/debian/pool/main/p/pytorch/...\n"}, f)
    args.append(failed)
    bad = os.path.join(str(tmp), "bad", "results.json")
    os.makedirs(os.path.dirname(bad), exist_ok=True)
    with open(bad, "w") as f:
        json.dump({"schema": "dlconform-results/1", "environment": {}, "targets": {},
                   "results": [{"target": "numpy", "clause": "CAP-01", "verdict": "great"}]}, f)
    args.append(bad)
    return args


def build(tmp, n=3000):
    """Merges the fixture inputs into tmp/matrix; returns (doc, errors, paths)."""
    doc, errors = merge.merge(write_inputs(tmp, n))
    paths = merge.write(os.path.join(str(tmp), "matrix"), doc)
    return doc, errors, paths
