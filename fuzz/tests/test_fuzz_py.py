"""Tests of the Python side of fuzzing (stdlib only; run by `make fuzz-test`):
fuzzrepro's record decoder against build/fuzz/dump_record, the dedup-key normalisation,
crash-log triage, and that a reproducer runs without the fuzzer."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "harness"))

from dlconform import fuzzci, fuzzrepro  # noqa: E402

SEEDS = os.path.join(ROOT, "fuzz", "corpus", "seeds")


def test_decode_matches_dump_record():
    dump = os.path.join(ROOT, "build", "fuzz", "dump_record")
    for name in sorted(os.listdir(SEEDS)):
        path = os.path.join(SEEDS, name)
        rec = fuzzrepro.decode(open(path, "rb").read())
        out = subprocess.run([dump, path], stdout=subprocess.PIPE, check=True).stdout.decode()
        assert "dtype (%d, %d, %d)" % rec["dtype"] in out, (name, out)
        assert "ndim %d" % rec["ndim"] in out, (name, out)
        assert "byte_offset %d" % rec["byte_offset"] in out, (name, out)
    assert fuzzrepro.decode(b"")["ndim"] == 0  # every byte string decodes


def test_normalize():
    n = fuzzci.normalize
    assert n("accepted NULL data for 12 elements") == "accepted NULL data for N elements"
    assert n("at 0x7ffd12 and -5, data-4") == "at N and N, data-N"
    assert n("size overflows int64") == "size overflows intN"
    assert len(fuzzci.oracle_key("EXC", "x" * 500)) == fuzzci.KEY_MAX


def test_triage_log():
    oracle = "dlconform-input: LAY-11: a legal export\ndlconform-oracle: OWN-03: deleter ran 2 times\n"
    t = fuzzci.triage_log(oracle)
    assert (t["clause"], t["key"], t["kind"]) == ("OWN-03", "OWN-03: deleter ran N times", "oracle")
    segv = ("dlconform-input: LAY-09: accepted ndim 2 / shape NULL\n"
            "==1==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000\n"
            "    #0 0x7f in PyArray_NewFromDescr_int (/usr/lib/x/_multiarray_umath.so+0x12e210)\n"
            "    #1 0x7f in from_dlpack /usr/src/numpy/dlpack.c:300:5\n"
            "    #2 0x7f in _PyObject_Call /usr/src/python/call.c:1:1\n"
            "    #3 0x7f in LLVMFuzzerTestOneInput /work/fuzz/target_consumer.c:1:1\n")
    t = fuzzci.triage_log(segv)
    assert t["clause"] == "LAY-09" and t["kind"] == "SIGSEGV", t
    assert t["key"] == "SIGSEGV in PyArray_NewFromDescr_int < from_dlpack", t["key"]


def test_reproducer_runs():
    seed = os.path.join(SEEDS, "legacy-float32-2x3")
    text = fuzzrepro.reproducer(open(seed, "rb").read(), "ref", "LAY-03: x", "legacy-float32-2x3")
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "harness"))
    p = subprocess.run([sys.executable, "-c", text], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode()
    assert p.returncode == 0 and "accepted:" in out, out


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("ok", name)
