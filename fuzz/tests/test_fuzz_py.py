"""Tests of the Python side of fuzzing (stdlib only; run by `make fuzz-test`): the record
decoder and memory plan against build/fuzz/dump_record, the dedup-key normalisation,
crash-log triage, reproducers that run without the fuzzer and give the target's verdict for
the test consumers of fuzz/tests, and fuzz-ci's round loop against a stand-in fuzz binary.
The seeds and their mutants against ref's faults: test_oracle_agreement.py."""
import importlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

import verdicts as V  # first: it puts harness/ on sys.path
from dlconform.fuzz import ci, repro, triage
from dlconform.fuzz import record as R

ROOT = V.ROOT
SEEDS = os.path.join(ROOT, "fuzz", "corpus", "seeds")


def _seed(name):
    with open(os.path.join(SEEDS, name), "rb") as f:
        return bytearray(f.read())


def test_decode_and_plan_match_dump_record():
    dump = os.path.join(ROOT, "build", "fuzz", "dump_record")
    for name in sorted(os.listdir(SEEDS)):
        path = os.path.join(SEEDS, name)
        rec = R.decode(_seed(name))
        out = subprocess.run([dump, path], stdout=subprocess.PIPE, check=True).stdout.decode()
        assert "dtype (%d, %d, %d)" % rec["dtype"] in out, (name, out)
        assert "ndim %d" % rec["ndim"] in out, (name, out)
        assert "byte_offset %d" % rec["byte_offset"] in out, (name, out)
        assert "offer 0x%02x" % rec["offer"] in out, (name, out)
        capsule = "versioned" if R.apply_offer(rec)["kind"] & 1 else "legacy"
        assert "capsule " + capsule in out, (name, out)
        p = R.plan(rec)
        data = "data %s" % p["mode"] + (" size %d pad %d" % (p["size"], p["pad"]) if p["mode"] == "buffer" else "")
        assert data in out, (name, data, out)
    assert R.decode(b"")["ndim"] == 0  # every byte string decodes


def test_encode_is_canonical():
    """encode(decode(b)) is b truncated or zero-extended to the record's size (record.h)."""
    g = random.Random(7)
    samples = [bytes(_seed(n)) for n in sorted(os.listdir(SEEDS))]
    samples += [bytes(g.randrange(256) for _ in range(g.randrange(200))) for _ in range(200)]
    for b in samples:
        n = 68 + 16 * max(R.decode(b)["ndim"], 0)
        assert R.encode(R.decode(b)) == b[:n].ljust(n, b"\0"), b.hex()


def test_normalize():
    n = triage.normalize
    assert n("accepted NULL data for 12 elements") == "accepted NULL data for N elements"
    assert n("at 0x7ffd12 and -5, data-4") == "at N and N, data-N"
    assert n("size overflows int64") == "size overflows intN"
    # a list in brackets is one N whatever its length; tuples keep their arity
    assert n("with sizes=[4, 5, 6] and strides=[1]") == "with sizes=[N] and strides=[N]"
    assert n("dtype (5, 8, 1) shape [2, -3]") == "dtype (N, N, N) shape [N]"
    assert n("sizes=[]") == "sizes=[]" and n("[a, 1, 2]") == "[a, N]"
    for k in ("sizes=[N, N, N] of NaN", "device=(N, N)", "N: [N, N]"):  # keys stay keys
        assert n(k) == n(n(k)), k
    assert n("sizes=[N, N, N] of NaN") == "sizes=[N] of NaN"
    assert len(triage.oracle_key("EXC", "x" * 500)) == triage.KEY_MAX


def test_triage_lines_of_the_target_and_its_twin_agree():
    """The clause a plain crash on an input is filed under ("dlconform-input: CLAUSE: why"), as
    the C consumer target prints it and as its twin writes it (consumer_oracles.triage_line),
    for every seed: NULL data of a zero-size tensor is LAY-04's, which a consumer must import,
    as the suite files a death on it (before: LAY-11, "a legal export")."""
    from dlconform.fuzz import consumer_oracles

    paths = sorted(os.path.join(SEEDS, n) for n in os.listdir(SEEDS))
    env = dict(V.env("ref"), ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:handle_abort=1",
               DLCONFORM_FUZZ_TRIAGE="1", DLCONFORM_FUZZ_KEEP_GOING="1")
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([V.binary("ref"), "-runs=1"] + paths, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, cwd=tmp, timeout=300)
    c_lines, current = {}, None
    for line in p.stderr.decode("latin-1").splitlines():
        if line.startswith("Running: "):
            current = line[len("Running: "):]
        elif line.startswith("dlconform-input: ") and current and current not in c_lines:
            c_lines[current] = line[len("dlconform-input: "):]
    assert len(c_lines) > 20, p.stderr.decode("latin-1")[-3000:]
    for path, line in c_lines.items():
        rec = R.apply_offer(R.decode(open(path, "rb").read()))
        assert consumer_oracles.triage_line(rec, R.plan(rec)) == line, path
    assert c_lines[os.path.join(SEEDS, "versioned-zero-size-null-data")].startswith("LAY-04: ")


def test_triage_log():
    oracle = "dlconform-input: LAY-11: a legal export\ndlconform-oracle: OWN-03: deleter ran 2 times\n"
    t = triage.triage_log(oracle)
    assert (t["clause"], t["key"], t["kind"]) == ("OWN-03", "OWN-03: deleter ran N times", "oracle")
    segv = ("dlconform-input: LAY-09: accepted ndim 2 / shape NULL\n"
            "==1==ERROR: AddressSanitizer: SEGV on unknown address 0x000000000000\n"
            "    #0 0x7f in PyArray_NewFromDescr_int (/usr/lib/x/_multiarray_umath.so+0x12e210)\n"
            "    #1 0x7f in from_dlpack /usr/src/numpy/dlpack.c:300:5\n"
            "    #2 0x7f in _PyObject_Call /usr/src/python/call.c:1:1\n"
            "    #3 0x7f in LLVMFuzzerTestOneInput /work/fuzz/target_consumer.c:1:1\n")
    t = triage.triage_log(segv)
    assert t["clause"] == "LAY-09" and t["kind"] == "SIGSEGV", t
    assert t["message"] == "SIGSEGV on an input: accepted ndim 2 / shape NULL", t
    assert t["key"] == "SIGSEGV in PyArray_NewFromDescr_int < from_dlpack", t["key"]


def _run_script(text, consumer="ref", fault=None):
    """Runs a reproducer's text: (exit status, output)."""
    p = subprocess.run([sys.executable, "-c", text], env=V.env(consumer, fault), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode()


def test_reproducer_runs_without_the_fuzzer():
    text = repro.reproducer(_seed("legacy-float32-2x3"), "ref", "LAY-03: x", "legacy-float32-2x3")
    rc, out = _run_script(text)
    assert rc == 0 and "accepted: Tensor" in out and "done: no oracle breached" in out, out


def test_reproducer_sets_aside_what_the_known_file_lists():
    """A reproducer raises the finding's clause when it shows (REPRODUCED, exit 1); when it does
    not, the first breach its known-findings file does not list (by key or bare clause, as
    fuzz-ci) ends it UNDETERMINED (exit 3); with only listed breaches left it ends "done" and
    exits 0, so a maintainer who fixed the finding sees so.
    ref's consumer_no_rename breaks CAP-03 three times, then OWN-03, on this input."""
    seed = _seed("legacy-uint8-negstride-offset")
    tmp = tempfile.mkdtemp(prefix="known-")
    known = os.path.join(tmp, "known.txt")

    def run(finding, lines, path=None):
        with open(known, "w") as f:
            f.write("# a comment\n\n" + "".join(line + "\n" for line in lines))
        return _run_script(repro.reproducer(seed, "ref", finding, "x", path or known), "ref", "consumer_no_rename")

    rc, out = run("LAY-03: gone", ["CAP-03", "OWN-03: deleter ran N times once the result was dropped"])
    done = "done: no new breach; 4 known one(s) set aside by %s (the finding was LAY-03)" % known
    assert rc == 0 and done in out, out
    assert out.count("breach (known, set aside by %s): " % known) == 4, out
    rc, out = run("LAY-03: gone", ["CAP-03"])  # another breach, unlisted: exit 3, as dlconform recheck reads it
    assert rc == 3 and "UNDETERMINED LAY-03: the finding's clause does not show, another breach does: OWN-03: " \
        "deleter ran 2 times once the result was dropped" in out, out
    rc, out = run("CAP-03: x", ["CAP-03"])  # the finding itself is raised, listed or not
    assert rc == 1 and "AssertionError: CAP-03: the consumer imported the tensor" in out, out
    rc, out = run("", [], os.path.join(tmp, "missing.txt"))
    assert rc == 1 and "is not there: no breach is set aside" in out and "AssertionError: CAP-03" in out, out
    rc, out = _run_script(repro.reproducer(seed, "ref", "", "x"), "ref", "consumer_no_rename")
    assert rc == 1 and "known: none" in repro.reproducer(seed, "ref") and "AssertionError: CAP-03" in out, out
    shutil.rmtree(tmp)


def test_a_sanitizer_finding_is_replayed_by_the_sanitizer_build():
    """A finding only the sanitizer build shows (ref's consumer_delete_early: a heap-use-after-free
    on the seed offer-minor, which the Python twin cannot see): its reproducer replays the input
    with build/fuzz/consumer.asan, REPRODUCED (exit 1) while the fault is there, done (exit 0)
    once it is gone, UNDETERMINED (exit 3) when the build crashes another way; without such a
    build it says UNSUPPORTED with the replay command."""
    from dlconform.fuzz import breaches

    seed = _seed("offer-minor")

    def run(fault, kind="heap-use-after-free"):
        text = repro.reproducer(seed, "ref", "OWN-03: %s on an input" % kind, "offer-minor", None, kind)
        return _run_script(text, "ref", fault)

    rc, out = run("consumer_delete_early")
    assert rc == 1 and "REPRODUCED OWN-03: heap-use-after-free again in %s" % V.binary("ref") in out, out
    rc, out = run(None)
    assert rc == 0 and "ran the input through (exit 0): the heap-use-after-free is gone" in out, out
    rc, out = run("consumer_delete_early", "heap-buffer-overflow")
    assert rc == 3 and "replayed the input to another finding: heap-use-after-free in" in out, out
    lines = []
    say, breaches.say = breaches.say, lines.append
    try:
        breaches.conclude([], "OWN-03: x", sanitizer="SEGV", name="in", replay=lambda: None)
    finally:
        breaches.say = say
    assert lines == ["UNSUPPORTED: the finding is a SEGV in the sanitizer build, unseen here without one; make "
                     "fuzz-replay FILE=in (the input beside this script) replays it"], lines


def test_fuzz_repro_takes_the_known_file_of_fuzz_ci():
    """dlconform fuzz-repro writes the known file fuzz-ci would use (fuzz/known/TARGET.txt) into
    the script, or the one named; a named file that is not there, or an input that cannot be read,
    is one line and status 2."""
    seed = os.path.join(V.ROOT, "fuzz", "corpus", "seeds", "legacy-float32-2x3")

    def fuzz_repro(*args):
        p = subprocess.run([sys.executable, "-m", "dlconform", "fuzz-repro", seed] + list(args), cwd=V.ROOT,
                           env=V.env("ref"), capture_output=True, text=True)
        return p.returncode, p.stdout, p.stderr

    rc, out, _ = fuzz_repro("--target", "torch")
    assert rc == 0 and "known=%r" % os.path.join(V.ROOT, "fuzz", "known", "torch.txt") in out, out
    rc, out, _ = fuzz_repro("--target", "torch", "--known", "")
    assert rc == 0 and "known=None" in out, out
    rc, out, err = fuzz_repro("--target", "ref", "--known", "/nonexistent/known.txt")
    assert rc == 2 and not out and err == "fuzz-repro: no known-findings file /nonexistent/known.txt\n", err
    seed = "/nonexistent/input"  # an input that cannot be read: one line too
    rc, out, err = fuzz_repro()
    assert rc == 2 and not out and err == "fuzz-repro: cannot read %s: No such file or directory\n" % seed, err


def test_reproducer_forges_every_record_ndim():
    """A record's ndim goes up to 127 (int8): the reproducer forges it (fuzz/record.h) rather
    than stopping at ref's own 64-dim limit; ref as consumer then refuses it."""
    rec = _seed("legacy-float32-2x3")[:68]
    rec[2] = 127
    rec += (1).to_bytes(8, "little") * 127 + (0).to_bytes(8, "little") * 127  # shape 1s, strides 0
    assert R.decode(bytes(rec))["ndim"] == 127
    rc, out = _run_script(repro.reproducer(bytes(rec), "ref", "", "ndim127"))
    assert rc == 0 and "refused: BufferError" in out and "done:" in out, out


def test_offer_reproducers_take_the_type_table():
    """Offer seeds rebuild the target's exchange tables: the correct ref passes every one, and
    takes the table on the type where that table is a usable 1.3 one."""
    for seed in sorted(n for n in os.listdir(SEEDS) if n.startswith("offer-")):
        rc, out = _run_script(repro.reproducer(_seed(seed), "ref", "", seed))
        assert rc == 0 and "accepted:" in out and "done:" in out, (seed, out)
        took = "exchange API calls: [('ok', " in out
        assert took == (seed not in ("offer-instance", "offer-major2", "offer-major0", "offer-chained")), (seed, out)


def test_xapi11_reproducer_dies_in_flight():
    """A consumer that calls the NULL dltensor_from_py_object_no_sync dies in from_dlpack; the
    reproducer said beforehand that such a SIGSEGV is XAPI-11."""
    text = repro.reproducer(_seed("offer-null-dltensor-copy"), "ref", "XAPI-11: x", "x")
    rc, out = _run_script(text, fault="consumer_xapi_null_dltensor")
    assert rc == -11 and V.XAPI11 in out and "accepted:" not in out, (rc, out)


def _run_target(consumer, seed):
    env = V.env(consumer, ASAN_OPTIONS="detect_leaks=0", DLCONFORM_FUZZ_STATS="1")
    with tempfile.TemporaryDirectory(prefix="target-") as tmp:  # where a crash's artifact goes
        p = subprocess.run([V.binary(consumer), "-artifact_prefix=%s/" % tmp, os.path.join(SEEDS, seed)], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return p.returncode, p.stdout.decode(errors="replace")


def test_foreign_device_tuple_refusal_is_no_finding():
    """device= as a pair other than (1, 0) goes as a tuple no library has a device object for:
    refusing that argument with AssertionError (torch 2.14) is no EXC finding."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    rec[48:52] = (2).to_bytes(4, "little")  # kw dl_device (1, 0) -> (2, 0): REC_OFF_KW_DEV_TYPE
    assert R.decode(bytes(rec))["kw_device"] == (2, 0)
    assert V.pair("tuple_device_asserter", rec) == (V.NO_FINDING, V.NO_FINDING)
    rc, out = _run_script(repro.reproducer(bytes(rec), "tuple_device_asserter", "", "x"), "tuple_device_asserter")
    assert "refused: AssertionError" in out, out


def test_cpu_device_refusal_clause_follows_the_producer():
    """from_dlpack(device='cpu') of CUDA memory, refused with RuntimeError after asking for
    dl_device=(1, 0) (fuzz/tests/host_asker.py): CPY-08 when the producer refused the request
    (the host is out of reach), DEV-07 when it ignored it and handed out its CUDA export
    (the producer broke DEV-05 first; numpy 2.4's "Unsupported device in DLTensor")."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    assert R.decode(bytes(rec))["kw_device"] == (1, 0) and rec[5] & R.KW["strict_producer"]
    assert V.pair("host_asker", rec) == ("CPY-08", "CPY-08")
    rec[5] &= ~R.KW["strict_producer"]  # the producer ignores dl_device
    assert V.pair("host_asker", rec) == ("DEV-07", "DEV-07")


def test_refusal_class_of_a_device_this_machine_has_is_not_judged():
    """Where a CUDA device really exists (devices.h; DLCONFORM_REAL_DEVICES=2 says so here), a
    seed naming CUDA over host memory is a lie the consumer may act on (torch copies from
    "device" memory and raises a CUDA error): both twins leave its refusal's class alone, and
    judge it as before where there is no such device."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    assert V.pair("host_asker", rec, DLCONFORM_REAL_DEVICES="2") == (V.NO_FINDING, V.NO_FINDING)
    assert V.pair("host_asker", rec, DLCONFORM_REAL_DEVICES="10") == ("CPY-08", "CPY-08")


def test_cuda_mode_exports_are_device_memory():
    """In the CUDA mode (NAME@cuda, fuzz/devmem.h; here on the simulated runtime) an export on
    (2, 0) is device memory: a consumer that reads it from the host (host_reader) dies, in the
    target and in its reproducer, where host memory named CUDA reads fine."""
    rec = _seed("legacy-cuda-device")
    assert V.pair("host_reader", rec) == (V.NO_FINDING, V.NO_FINDING)
    c, py = V.pair("host_reader@cuda", rec)
    assert c.startswith(V.PLAIN_CRASH) and py == V.PLAIN_CRASH, (c, py)


def test_a_copy_holds_the_exports_elements():
    """A copy of a transposed export (copy_values.h) read through its strides holds its elements
    (gather_copier: its only finding is the copy itself, SEM-01, ambiguous since it copies even
    a plain export); one that ignores them (flat_copier) holds others: LAY-11 first, in the
    target and in its reproducer."""
    rec = R.decode(_seed("legacy-float32-2x3"))
    rec.update(dtype=(1, 8, 1), strides=(1, 2))
    data = R.encode(rec)
    assert V.pair("gather_copier", data) == ("SEM-01", "SEM-01")
    assert V.pair("flat_copier", data) == ("LAY-11", "LAY-11")
    # float16: a signalling NaN of the fill pattern may come back quiet (nan_quieter); a fill
    # seed whose 32 halves hold one is sought, not assumed (the pattern makes float16 ones only)
    rec.update(dtype=(2, 16, 1), shape=(4, 8), strides=(1, 4))
    nan_seeds = [seed for seed in range(256) if any(
        _f16_signalling_nan(bytes(((2 * i + j) * 131 + seed) & 0xFF for j in range(2))) for i in range(32))]
    assert nan_seeds
    rec.update(seed=nan_seeds[0])
    data = R.encode(rec)
    assert V.pair("gather_copier", data) == ("SEM-01", "SEM-01")
    assert V.pair("nan_quieter", data) == ("SEM-01", "SEM-01")
    assert V.pair("flat_copier", data) == ("LAY-11", "LAY-11")


def _f16_signalling_nan(b):
    v = int.from_bytes(b, "little")
    return v & 0x7C00 == 0x7C00 and v & 0x3FF != 0 and not v & 0x200


def _c_oracle_line(target, data):
    """The C target's first oracle line for one input."""
    with tempfile.TemporaryDirectory(prefix="line-") as tmp:
        path = os.path.join(tmp, "input")
        with open(path, "wb") as f:
            f.write(bytes(data))
        p = subprocess.run([V.binary(target), "-runs=1", path], env=V.env(target, ASAN_OPTIONS="detect_leaks=0"),
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tmp)
    return next((line for line in p.stderr.splitlines() if line.startswith("dlconform-oracle:")), None)


def test_a_needless_copy_is_plain_or_ambiguous_by_the_plain_import():
    """SEM-01 (plain_import.h): a consumer that views a plain export but copies a strided one it
    could view (strided_copier) breaks it plainly; one that copies even a plain export
    (gather_copier: its arrays own their memory) is ambiguous, a warn, as the suite grades it."""
    rec = R.decode(_seed("legacy-float32-2x3"))
    rec.update(dtype=(1, 8, 1), strides=(1, 2))
    data = R.encode(rec)
    for consumer, ambiguous in (("strided_copier", False), ("gather_copier", True)):
        assert V.pair(consumer, data) == ("SEM-01", "SEM-01"), consumer
        line = _c_oracle_line(consumer, data)
        assert line.startswith("dlconform-oracle: SEM-01:") and ("(ambiguous:" in line) == ambiguous, line
        out = subprocess.run([sys.executable, "-c", repro.script(data, consumer)], env=V.env(consumer),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
        assert "AssertionError: SEM-01:" in out and ("(ambiguous:" in out.splitlines()[-1]) == ambiguous, out[-600:]


def test_a_cuda_library_of_its_own_is_judged_on_stream_order():
    """The consumer target's CUDA mode leaves each device export's bytes pending on the fuzz
    producer's stream (fuzz/devmem.h): cudalib (harness/tests/libs, a ctypes CUDA library that
    copies on a work stream of its own) passes clean; when its work stream does not wait for the
    stream it named (no_wait), or when it names -1 (minus_one), its copy holds the bytes from
    before the producer's stream wrote them: STR-01, in the target and the reproducer alike."""
    libs = os.path.join(V.ROOT, "harness", "tests", "libs")
    path = os.pathsep.join((os.path.join(V.ROOT, "harness"), V.TESTS, libs))
    data = _seed("versioned-cuda-2x3-copy")
    for bug, want in (("", V.NO_FINDING), ("no_wait", "STR-01"), ("minus_one", "STR-01")):
        got = V.pair("cudalib@cuda", data, PYTHONPATH=path, CUDALIB_CUDART=V.SIM, CUDALIB_BUG=bug)
        assert got == (want, want), (bug, got)


def test_a_library_of_its_own_is_a_producer_target():
    """producer-MODULE for a library with no view maker of dlconform's (producer_views: its
    from_dlpack of a compact export makes the array it exports): viewlib (harness/tests/libs)
    views its imports and re-exports a read-only one with READ_ONLY; with its drop_readonly bug
    it does not (FLG-02), in the target and the reproducer alike. A library whose arrays have no
    __dlpack__ does not start: one line, exit status 2."""
    libs = os.path.join(V.ROOT, "harness", "tests", "libs")
    path = os.pathsep.join((os.path.join(V.ROOT, "harness"), V.TESTS, libs))
    rec = R.decode(_seed("versioned-max-version-host-copy"))
    rec.update(flags=1, kw=R.KW["max_version"])  # a read-only view, exported versioned
    data = R.encode(rec)
    assert V.pair("producer-viewlib", data, PYTHONPATH=path) == (V.NO_FINDING, V.NO_FINDING)
    assert V.pair("producer-viewlib", data, PYTHONPATH=path, VIEWLIB_BUG="drop_readonly") == ("FLG-02", "FLG-02")
    e = V.env("producer-bytecopy", PYTHONPATH=path, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([V.binary("producer-bytecopy"), "-runs=1", os.path.join(SEEDS, "legacy-float32-2x3")], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [line for line in p.stderr.splitlines() if line.startswith("dlconform-fuzz:")]
    assert p.returncode == 2 and lines == ["dlconform-fuzz: producer bytecopy: what its from_dlpack gives (Copy) has "
                                           "no __dlpack__: it is no producer"], p.stderr[-2000:]


def test_cuda_mode_without_a_runtime_is_one_line():
    """The CUDA mode without a CUDA runtime does not start: one line, exit status 2, from the
    consumer and the producer target and from fuzz-ci; a device with no mode is refused before
    anything runs."""
    seed = os.path.join(V.ROOT, "fuzz", "corpus", "seeds", "legacy-cuda-device")
    e = V.env("ref@cuda", DLCONFORM_CUDART="/nonexistent/libcudart.so", ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([V.binary("ref"), "-runs=1", seed], env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    lines = [line for line in p.stderr.splitlines() if line.startswith("dlconform-fuzz:")]
    assert p.returncode == 2 and len(lines) == 1 and "needs a CUDA runtime" in lines[0], p.stderr[-2000:]
    p = subprocess.run([sys.executable, "-m", "dlconform", "fuzz-ci", "--target", "ref@rocm", "--seconds", "1"],
                       env=V.env("ref"), cwd=V.ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 2 and p.stdout.strip().splitlines() == [
        "fuzz-ci: ref@rocm: the fuzz targets' device modes are cuda (NAME@cuda)"], p.stdout
    # the producer target's CUDA mode (producer_cuda.h) alike
    e = V.env("producer-ref@cuda", DLCONFORM_CUDART="/nonexistent/libcudart.so", ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.run([V.binary("producer-ref"), "-runs=1", seed], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    lines = [line for line in p.stderr.splitlines() if line.startswith("dlconform-fuzz:")]
    assert p.returncode == 2 and len(lines) == 1 and "needs a CUDA runtime" in lines[0], p.stderr[-2000:]


def test_dev06_is_a_refusal_without_asking_for_the_host():
    """from_dlpack(device='cpu') refused without asking the producer for dl_device=(1, 0)
    breaks DEV-06 (tuple_device_asserter refuses a CUDA producer at once); asking first
    (host_asker) does not."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    assert V.pair("tuple_device_asserter", rec) == ("DEV-06", "DEV-06")
    assert "DEV-06" not in V.pair("host_asker", rec)


def test_cpy07_is_forwarding_a_copy_other_than_false():
    """device='cpu', copy=False forwarded as copy=None (fuzz/tests/copy_dropper.py) breaks
    CPY-07; forwarding copy=False (host_asker) does not."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    rec[5] = (rec[5] | R.KW["copy"]) & ~R.KW["strict_producer"]
    rec[64] = R.COPY_FALSE
    assert "call     from_dlpack(producer, copy=False, device='cpu')" in repro.reproducer(bytes(rec), "ref")
    assert V.pair("copy_dropper", rec) == ("CPY-07", "CPY-07")
    c, py = V.pair("host_asker", rec)
    assert c == py != "CPY-07", (c, py)


def test_no_device_kw_for_a_record_too_big_to_copy():
    """device='cpu' for an export of another device asks for a copy to the host: as with
    copy=True, the consumer target passes it only when the copy fits the cap (torch 2.14
    allocated the 8 GiB a dangling MAIA record claims, a libFuzzer OOM that is no finding).
    The reproducer passes the same keywords (device_kw_reporter raises SystemError for any)."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    assert "device='cpu'" in repro.reproducer(bytes(rec), "numpy", "", "small")
    assert V.pair("device_kw_reporter", rec) == ("DEV-06", "DEV-06")
    rec[68:76] = (1 << 33).to_bytes(8, "little")  # shape (2**33,) of float32: 32 GiB, no buffer
    assert R.too_big_to_copy(R.plan(R.decode(bytes(rec))))
    assert "device=" not in repro.reproducer(bytes(rec), "numpy", "", "giant").split("# call")[1].split("\n")[0]
    assert V.pair("device_kw_reporter", rec) == (V.NO_FINDING, V.NO_FINDING)


def test_device_class_judged_only_without_byte_offset():
    """DEV-07 / CPY-08 judge the class of a refusal only when the device is the one thing
    unusual: a ValueError for an export with a non-zero byte_offset or strides that are not
    row-major is no finding, the same ValueError for the device alone is
    (fuzz/tests/offset_refuser.py)."""
    rec = _seed("legacy-cuda-strict-to-cpu")
    rec[5] &= ~R.KW["strict_producer"]  # the producer ignores dl_device
    assert V.pair("offset_refuser", rec) == ("DEV-07", "DEV-07")
    offset = bytearray(rec)
    offset[32:40] = (16).to_bytes(8, "little")  # byte_offset 16
    assert V.pair("offset_refuser", offset) == (V.NO_FINDING, V.NO_FINDING)
    strided = bytearray(rec)  # strides (-1,): not row-major (torch 2.14: "Storage size calculation overflowed")
    strided[76:84] = (-1).to_bytes(8, "little", signed=True)
    assert R.decode(bytes(strided))["strides"] == (-1,)
    assert V.pair("offset_refuser", strided) == (V.NO_FINDING, V.NO_FINDING)


def test_a_kept_view_breaks_xapi15():
    """XAPI-15 can fail: the target and the reproducer report a consumer that keeps a
    dltensor_from_py_object_no_sync view (fuzz/tests/xapi_view_keeper.py), and not the same
    consumer refusing a table of a foreign major."""
    assert V.pair("xapi_view_keeper", _seed("offer-type")) == ("XAPI-15", "XAPI-15")
    assert V.pair("xapi_view_keeper", _seed("offer-major2")) == (V.NO_FINDING, V.NO_FINDING)


def test_offered_tables_work():
    """Every function of the offered tables works under ASan (fuzz/tests/xapi_table_user.py:
    stream, allocator with and without SetError, to_py, dltensor view, hand-out once)."""
    for seed in ("offer-type", "offer-type-copy", "offer-minor", "offer-shadowed", "offer-null-dltensor-copy"):
        rc, out = _run_target("xapi_table_user", seed)
        assert rc == 0 and "dlconform-oracle" not in out and "ERROR" not in out, (seed, out[-3000:])
        assert " 0 refused" in out, (seed, out[-3000:])  # every check in it passed


def test_report_verdicts_follow_clause_level():
    """An oracle breach of a SHOULD clause, or an EXC finding on the class of a refusal only, is
    a warn in results.json (as in the suites); a MUST oracle breach, an EXC finding that breaks
    the C API, and any plain crash whatever the clause, are crashes."""
    tmp = tempfile.mkdtemp(prefix="fuzzci-report-")
    args = ci.parse(["--target", "ref", "--out", tmp])
    fz = ci.Fuzz(args)
    os.makedirs(fz.dir, exist_ok=True)
    fz.rounds = 1
    base = {"new": True, "count": 1, "found_after": 1.0, "input": "x", "evidence": "e", "repro": ""}
    fz.findings = {
        "XAPI-04: a": dict(base, key="XAPI-04: a", clause="XAPI-04", kind="oracle", message="a"),
        "XAPI-06: b": dict(base, key="XAPI-06: b", clause="XAPI-06", kind="oracle", message="b"),
        "SEGV in f": dict(base, key="SEGV in f", clause="XAPI-04", kind="SEGV", message="c"),
        "EXC: r": dict(base, key="EXC: r", clause="EXC", kind="oracle",
                       message="from_dlpack raised RuntimeError: Unsupported lanes"),
        "EXC: s": dict(base, key="EXC: s", clause="EXC", kind="oracle",
                       message="from_dlpack returned NULL without setting an exception"),
    }
    assert fz.report() == 1  # new findings of any level fail fuzz-ci
    with open(os.path.join(tmp, "results.json")) as f:
        doc = json.load(f)
    shutil.rmtree(tmp)
    got = {r["message"].split("; key ")[1].split(";")[0]: (r["clause"], r["level"], r["verdict"])
           for r in doc["results"]}
    assert got == {"XAPI-04: a": ("XAPI-04", "SHOULD", "warn"),
                   "XAPI-06: b": ("XAPI-06", "MUST", "crash"),
                   "SEGV in f": ("XAPI-04", "SHOULD", "crash"),
                   "EXC: r": ("EXC", "SHOULD", "warn"),  # the class of a refusal only
                   "EXC: s": ("EXC", "MUST", "crash")}


def test_reproducer_passes_the_cpu_device_by_name():
    """kw dl_device (1, 0) goes to from_dlpack as device='cpu' (fuzz/exchange.c): the array
    API's device is the consumer's device object, and numpy 2 refuses the pair (1, 0)."""
    seed = _seed("legacy-float32-2x3")
    seed[5] |= R.KW["dl_device"]
    seed[48:56] = (1).to_bytes(4, "little") + (0).to_bytes(4, "little")
    text = repro.reproducer(bytes(seed), "ref", "DEV-06: x", "cpu-device")
    assert "call     from_dlpack(producer, device='cpu')" in text, text
    rc, out = _run_script(text)
    assert rc == 0 and "accepted:" in out, out
    seed[48:52] = (2).to_bytes(4, "little")
    assert "from_dlpack(producer, device=(2, 0))" in repro.reproducer(bytes(seed), "ref", "DEV-06: x", "cuda-device")


# the must-refuse clauses VER-08 then LAY-09: the target names the first one not set aside.
FAKE_BIN = r"""#!%s
import os, sys
ignored = set(open(os.environ["DLCONFORM_FUZZ_IGNORE_FILE"]).read().splitlines())
plain = os.environ.get("FAKE_PLAIN")
hit = next((k for k in (("VER-08", "LAY-09") if plain else ("A: one", "B: two")) if k not in ignored), None)
line = ("dlconform-input: %%s: breaks it\n==1==ERROR: AddressSanitizer: SEGV on unknown address 0x0\n"
        "    #0 0x1 in lib_import /lib/x.c:1:1" %% hit) if plain else "dlconform-oracle: %%s" %% hit
if "-runs=1" in sys.argv or "-minimize_crash=1" in sys.argv:
    print(line if hit else "ok")
    sys.exit(1 if hit and "-runs=1" in sys.argv else 0)
prefix = [a for a in sys.argv if a.startswith("-artifact_prefix=")][0].split("=", 1)[1]
if os.environ.get("FAKE_NOISE"):  # a library that warns per input: 400 KB of it
    sys.stdout.write("Exception ignored in: <function Array.__del__>\n" * 8500)
print("stat::number_of_executed_units: 7")
if hit is None:
    sys.exit(0)
print(line if not plain else "==1==ERROR: AddressSanitizer: SEGV on unknown address 0x0")
with open(prefix + "crash-0123abcd", "wb") as f:
    f.write(bytes(68))
print("artifact_prefix='%%s'; Test unit written to %%scrash-0123abcd" %% (prefix, prefix))
sys.exit(1)
"""


def fake_fuzz_ci(tmp, plain=False, noise=False):
    """ci's round loop against FAKE_BIN: (exit status, summary, the final ignore list). noise:
    each round prints 400 KB before libFuzzer's final stats."""
    fake = os.path.join(tmp, "consumer.asan")
    with open(fake, "w") as f:
        f.write(FAKE_BIN % sys.executable)
    os.chmod(fake, 0o755)
    out = os.path.join(tmp, "out")
    a = ci.parse(["--target", "ref", "--seconds", "60", "--bin", fake, "--out", out, "--known", "",
                      "--corpus", os.path.join(tmp, "corpus"), "--seeds", os.path.join(tmp, "none"),
                      "--dict", "", "--minimize-seconds", "0", "--no-merge"])
    old = os.environ.get("FAKE_PLAIN"), os.environ.get("FAKE_NOISE")
    os.environ["FAKE_PLAIN"], os.environ["FAKE_NOISE"] = "1" if plain else "", "1" if noise else ""
    try:
        rc = ci.Fuzz(a).run()
    finally:
        os.environ["FAKE_PLAIN"], os.environ["FAKE_NOISE"] = old[0] or "", old[1] or ""
    summary = json.load(open(os.path.join(out, "fuzz", "ref-summary.json")))
    ignore = open(os.path.join(out, "fuzz", "ref.ignore")).read().splitlines()[1:]
    return rc, summary, ignore


def test_fuzz_ci_counts_executions_through_a_noisy_library():
    """A library that prints a warning per input fills the log: each round's executions still
    come from that round's final stats (before, a round longer than the last 200 KB read was
    counted as none, and a clean run said "0 execs")."""
    with tempfile.TemporaryDirectory() as tmp:
        rc, summary, _ = fake_fuzz_ci(tmp, noise=True)
        assert summary["rounds"] >= 2 and summary["executions"] == 7 * summary["rounds"], summary


def test_fuzz_ci_says_a_library_cannot_be_imported_however_short_the_run():
    """A consumer module that cannot be imported is one clear line and exit 2, also with a
    budget shorter than a round (before, a run under a second ran no round and exited 0 with
    "0 execs"); a budget of no seconds is a usage error."""
    with tempfile.TemporaryDirectory() as tmp:
        for seconds in ("0.5", "3"):
            p = subprocess.run([sys.executable, "-m", "dlconform", "fuzz-ci", "--target", "no_such_lib_x",
                                "--seconds", seconds, "--out", tmp, "--no-merge"], cwd=V.ROOT, env=V.env("ref"),
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 2 and "cannot import the consumer module (consumer 'no_such_lib_x')" in p.stderr, \
                (seconds, p.stdout, p.stderr)
        p = subprocess.run([sys.executable, "-m", "dlconform", "fuzz-ci", "--target", "ref", "--seconds", "0",
                            "--out", tmp], cwd=V.ROOT, env=V.env("ref"), capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and p.stderr.strip().endswith("--seconds must be above 0 and --max-rounds at least 1")


def test_fuzz_ci_findings_are_rechecked_by_the_line_it_prints():
    """fuzz-ci ends, when it found something, with the recheck command of its findings (as
    dlconform run does); run, it reproduces each of them while the bug is there (ref's
    consumer_ignores_byte_offset), and none once it is gone."""
    with tempfile.TemporaryDirectory() as tmp:
        env = V.env("ref", "consumer_ignores_byte_offset")
        p = subprocess.run([sys.executable, "-m", "dlconform", "fuzz-ci", "--target", "ref", "--seconds", "4",
                            "--minimize-seconds", "1", "--minimize-total", "2", "--out", tmp,
                            "--corpus", os.path.join(tmp, "corpus"), "--known", ""], cwd=V.ROOT, env=env,
                           capture_output=True, text=True, timeout=300)
        hint = [line for line in p.stdout.splitlines() if "each finding's reproducer, run again: " in line]
        assert p.returncode == 1 and len(hint) == 1, p.stdout + p.stderr
        command = hint[0].split("run again: ", 1)[1]
        assert command.endswith(" --test 'fuzz:ref:*'"), command
        again = subprocess.run(["sh", "-c", command + " -q"], cwd=V.ROOT, env=env, capture_output=True, text=True,
                               timeout=300)
        n = len(json.load(open(os.path.join(tmp, "fuzz", "ref-summary.json")))["findings"])
        assert again.returncode == 0 and "%d findings: %d reproduced" % (n, n) in again.stdout, again.stdout
        fixed = subprocess.run(["sh", "-c", command + " -q"], cwd=V.ROOT, env=V.env("ref"), capture_output=True,
                               text=True, timeout=300)
        assert fixed.returncode == 1 and "0 reproduced, %d not reproduced, 0 broken" % n in fixed.stdout, fixed.stdout


def test_fuzz_replay_of_a_missing_input_is_one_line():
    """make fuzz-replay FILE=... of an input that is not there: one line and status 2 (before,
    libFuzzer's 'required directory does not exist' and the Python reproducer's command)."""
    p = subprocess.run(["make", "--no-print-directory", "-C", V.ROOT, "fuzz-replay", "FILE=/nonexistent/ref-crash-x"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and p.stdout.strip() == "fuzz-replay: no input file /nonexistent/ref-crash-x", p.stdout


def test_fuzz_ci_sets_aside_each_must_refuse_clause_a_known_plain_crash_comes_with():
    with tempfile.TemporaryDirectory() as tmp:
        rc, summary, ignore = fake_fuzz_ci(tmp, plain=True)
        assert rc == 1 and [f["key"] for f in summary["findings"]] == ["SIGSEGV in lib_import"], summary
        assert summary["findings"][0]["count"] == 2
        assert ignore == ["VER-08", "LAY-09"] and summary["rounds"] == 3, (ignore, summary)


def test_fuzz_ci_triages_an_input_written_again_with_another_finding():
    with tempfile.TemporaryDirectory() as tmp:
        rc, summary, _ = fake_fuzz_ci(tmp)
        keys = {f["key"]: f for f in summary["findings"]}
        assert rc == 1 and set(keys) == {"A: one", "B: two"}, (rc, summary)
        inputs = {keys[k]["input"] for k in keys}
        assert len(inputs) == 2 and all(os.path.isfile(p) for p in inputs), inputs
        assert len({keys[k]["repro_file"] for k in keys}) == 2
        assert summary["executions"] == 21 and summary["rounds"] == 3, summary


HANGING_BIN = r"""#!%s
import os, subprocess, sys, time
child = subprocess.Popen(["sleep", "300"])  # as libFuzzer's own children (-minimize_crash, ...)
with open(os.environ["FAKE_PIDS"], "w") as f:
    f.write("%%d %%d" %% (os.getpid(), child.pid))
time.sleep(300)
"""


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_fuzz_ci_stopped_leaves_no_fuzzer_running():
    """SIGTERM to fuzz-ci stops the fuzzer it runs and every process the fuzzer started."""
    import signal
    import time
    with tempfile.TemporaryDirectory() as tmp:
        fake, pids = os.path.join(tmp, "consumer.asan"), os.path.join(tmp, "pids")
        with open(fake, "w") as f:
            f.write(HANGING_BIN % sys.executable)
        os.chmod(fake, 0o755)
        env = dict(os.environ, FAKE_PIDS=pids, PYTHONPATH=os.path.join(ROOT, "harness"))
        p = subprocess.Popen([sys.executable, "-m", "dlconform", "fuzz-ci", "--target", "ref", "--seconds", "200",
                              "--bin", fake, "--out", os.path.join(tmp, "out"), "--known", "",
                              "--corpus", os.path.join(tmp, "corpus"), "--no-merge"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while not (os.path.exists(pids) and open(pids).read()) and time.time() < deadline:
            time.sleep(0.05)
        fuzzer, child = map(int, open(pids).read().split())
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=30)[0].decode()
        assert p.returncode == 130 and "interrupted" in out, (p.returncode, out)
        time.sleep(0.2)
        assert not _alive(fuzzer) and not _alive(child), out


def _producer_record(stream=None, dl_device=None, copy=None, readonly=False):
    """A record the producer target turns into float32 [3] (strides 1), read-only when asked,
    exported with __dlpack__(max_version=(1, 3)) plus stream (an int), dl_device and copy when
    given."""
    rec = R.decode(b"")
    rec.update(format=2, ndim=1, dtype=(2, 32, 1), device=(1, 0), version=(1, 3), flags=int(readonly),
               max_version=(1, 3), kw_device=dl_device or (1, 0), stream=stream or 0,
               copy=(None, False, True).index(copy), stream_kind=1, seed=7, shape=(3,), strides=(1,))
    rec["kw"] = R.KW["max_version"] | (R.KW["stream"] if stream is not None else 0) | \
        (R.KW["dl_device"] if dl_device else 0) | (R.KW["copy"] if copy is not None else 0)
    return R.encode(rec)


def test_strides_counted_in_bytes_are_lay05():
    """Strides in bytes break LAY-05, not just SEM-01: where the values differ, or the export
    leaves the tensor's memory, or names device memory the runtime cannot read, and the strides
    divided by the item size describe the tensor, the producer target and its twin say LAY-05: a
    view (ref's byte_strides), a copy (copy=True), a CUDA tensor's (cuda_strides_in_bytes). Values
    wrong for another reason stay SEM-01 (pyref's byteswap_in_place)."""
    rec2 = R.decode(_producer_record())
    rec2.update(ndim=2, shape=(2, 3), strides=(3, 1))
    for data in (_producer_record(), _producer_record(copy=True), R.encode(rec2)):
        assert V.pair("producer-ref", data) == (V.NO_FINDING, V.NO_FINDING)
        assert V.pair("producer-ref", data, "byte_strides") == ("LAY-05", "LAY-05")
    assert V.pair("producer-ref@cuda", R.encode(rec2), "cuda_strides_in_bytes") == ("LAY-05", "LAY-05")
    assert V.pair("producer-dlconform.pyref", R.encode(rec2), "byteswap_in_place") == ("SEM-01", "SEM-01")


def _run_producer_target(producer, rec, fault=None):
    binary = os.path.join(ROOT, "build", "fuzz", "producer.asan")
    env = {k: v for k, v in os.environ.items() if k != "DLCONFORM_REF_FAULT"}
    env.update(ASAN_OPTIONS="detect_leaks=0:handle_abort=1", DLCONFORM_FUZZ_PRODUCER=producer,
               **({"DLCONFORM_REF_FAULT": fault} if fault else {}))
    fd, path = tempfile.mkstemp(prefix="prec-")
    os.write(fd, rec)
    os.close(fd)
    try:
        p = subprocess.run([binary, "-runs=1", path], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    finally:
        os.unlink(path)
    out = p.stdout.decode(errors="replace")
    lines = [l for l in out.splitlines() if l.startswith("dlconform-oracle: ")]
    return lines[0][len("dlconform-oracle: "):] if lines else None, p.returncode, out


def test_producer_target_stream_oracles():
    """The producer target on a CPU tensor exported with an int stream (STR-10): refused by the
    clean ref (BufferError), no finding; accepted (ref fault stream_accepted), STR-10, at SHOULD:
    stream=-1 is ambiguous and another int is an invalid argument, both warns in the suites;
    refused with SystemError (stream_systemerror), EXC at MUST; refused with RuntimeError
    (numpy's "NumPy only supports stream=None"), no finding: STR-10 names no class for the
    refusal, and ERR-01 leaves bad arguments to other exceptions."""
    line, rc, out = _run_producer_target("ref", _producer_record(1))
    assert line is None and rc == 0 and "Executed " in out, out[-2000:]
    line, rc, out = _run_producer_target("ref", _producer_record(1), "stream_accepted")
    assert line and line.startswith("STR-10: __dlpack__ accepted stream=<int>"), out[-2000:]
    assert "(invalid argument: " in line, line
    assert ci.finding_level("STR-10", line, "MUST") == "SHOULD"
    line, rc, out = _run_producer_target("ref", _producer_record(-1), "stream_accepted")
    assert line and line.startswith("STR-10: __dlpack__ accepted stream=-1 for a CPU tensor (ambiguous: "), out[-2000:]
    assert ci.finding_level("STR-10", line, "MUST") == "SHOULD"
    cpu_id = ("DEV-05: __dlpack__ accepted dl_device=(1, 4) for a CPU tensor "
              "(ambiguous: a CPU device id that is not zero)")
    assert ci.finding_level("DEV-05", cpu_id, "MUST") == "SHOULD"
    line, rc, out = _run_producer_target("ref", _producer_record(1), "stream_systemerror")
    assert line and line.startswith("EXC: __dlpack__ raised SystemError"), out[-2000:]
    assert ci.finding_level("EXC", line, None) == "MUST"
    try:
        importlib.import_module("numpy")
    except ImportError:
        return
    line, rc, out = _run_producer_target("numpy", _producer_record(1))
    assert line is None and rc == 0 and "Executed " in out, out[-2000:]


def test_consumer_accepting_invalid_metadata_is_a_warn():
    """The consumer target's "accepted ..." findings of malformed metadata (an extent that
    overflows or is negative, an item size of 0, NULL data for elements) are warns, as the suites
    grade an import of invalid input (test_layout.py: LAY-09, LAY-10 with feeds="invalid");
    before, a crash verdict for numpy's import of an overflowing shape that the suite warns on.
    The refusals a clause names (VER-08, VER-09, CAP-04) keep their level. The messages are the
    twin's (held to target_consumer.c by test_oracle_agreement.py)."""
    import inspect
    from dlconform.fuzz import consumer_oracles

    source = inspect.getsource(consumer_oracles.refusal_clause)
    for clause, message, level in (("LAY-10", "accepted a tensor whose size overflows int64", "SHOULD"),
                                   ("LAY-09", "accepted ndim 1 / shape set with extent status negative", "SHOULD"),
                                   ("DT-10", "accepted dtype (2, 0, 1) of item size 0", "SHOULD"),
                                   ("VER-08", "accepted a versioned capsule of version 2.0", "MUST"),
                                   ("CAP-04", "accepted a capsule already named used_*", "MUST"),
                                   ("VER-09", "accepted device type 99, unknown in DLPack 1.3", "MUST")):
        assert '"%s"' % clause in source and message.split(" ")[1] in source, clause
        assert ci.finding_level(clause, message, "MUST") == level, (clause, message)


def test_producer_target_device_refusal_class():
    """dl_device=(kDLCUDA, 0) for a CPU tensor: the clean ref refuses with BufferError, no
    finding; ref's fault dl_device_valueerror refuses with ValueError: DEV-05 (MUST BufferError),
    as torch 2.14's NotImplementedError from aten::empty_strided was."""
    line, rc, out = _run_producer_target("ref", _producer_record(dl_device=(2, 0)))
    assert line is None and rc == 0 and "Executed " in out, out[-2000:]
    line, rc, out = _run_producer_target("ref", _producer_record(dl_device=(2, 0)), "dl_device_valueerror")
    assert line and line.startswith("DEV-05: __dlpack__ refused dl_device=(2, 0) with ValueError, not BufferError: "), \
        out[-2000:]
    assert ci.finding_level("DEV-05", line, "MUST") == "MUST"
    # a CPU pair with another id is a bad argument: any class
    line, rc, out = _run_producer_target("ref", _producer_record(dl_device=(1, 3)), "dl_device_valueerror")
    assert line is None and rc == 0, out[-2000:]


def test_producer_reproducers_give_the_target_verdict():
    """A producer-target reproducer fails on the clause the target's oracle names (ref's
    faults), and passes on the clean ref, a refusal of an allowed class included."""
    cases = ((_producer_record(dl_device=(2, 0)), "dl_device_valueerror", "DEV-05"),
             (_producer_record(1), "stream_accepted", "STR-10"),
             (_producer_record(copy=True), "copy_unflagged", "FLG-04"),
             (_producer_record(readonly=True), "readonly_unflagged", "FLG-02"))
    for rec, fault, clause in cases:
        assert V.pair("producer-ref", rec) == (V.NO_FINDING, V.NO_FINDING), clause
        assert V.pair("producer-ref", rec, fault) == (clause, clause), fault


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("ok", name)
