#!/usr/bin/env python3
"""Benchmark: merge and render N synthetic results (default 100,000) into matrix.json, MATRIX.md
and index.html. Not a test: prints the figures.

    PYTHONPATH=harness python3 harness/tools/matrix_bench.py [--results N] [--repeats R] [--out DIR]

Timed: merge (reading the result files, validating, provenance, duplicates and conflicts) and
render (the view model, JSON, Markdown and HTML, written to disk). Writing the synthetic input
files is not timed.
"""
import argparse
import json
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def main():
    from dlconform.matrix import merge, synthetic  # the harness/ put on sys.path above

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", type=int, default=100000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="keep the output here (default: a temporary folder)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        inputs = []
        total = 0
        for label, doc in synthetic.results_docs(a.results):
            path = os.path.join(tmp, label, "results.json")
            os.makedirs(os.path.dirname(path))
            with open(path, "w") as f:
                json.dump(doc, f)
            inputs.append(path)
            total += len(doc["results"])
        out = a.out or os.path.join(tmp, "matrix")
        best = None
        for i in range(a.repeats):
            t0 = time.perf_counter()
            doc, errors = merge.merge(inputs)
            t1 = time.perf_counter()
            paths = merge.write(out, doc)
            t2 = time.perf_counter()
            assert not errors, errors
            row = (t2 - t0, t1 - t0, t2 - t1)
            best = row if best is None or row[0] < best[0] else best
            print("run %d: %d results from %d files: merge %.2f s + render %.2f s = %.2f s"
                  % (i + 1, total, len(inputs), row[1], row[2], row[0]), flush=True)
        sizes = ", ".join("%s %.1f MB" % (os.path.basename(p), os.path.getsize(p) / 1e6) for p in paths.values())
        print("best: %.2f s (merge %.2f s, render %.2f s) for %d results, %d conflicts, %d duplicates; %s"
              % (best[0], best[1], best[2], total, len(doc["conflicts"]), len(doc["duplicates"]), sizes))
        return 0 if best[0] <= 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
