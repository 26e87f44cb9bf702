"""`MODULE@cuda`, the generic target's device spec (targets/generic_cuda.py), on the simulated
CUDA runtime: cudalib (tests/libs/cudalib.py, a pure-Python ctypes consumer that copies CUDA
tensors on a work stream of its own) judged by the device checks' consumer side.

Clean, it passes STR-01 and STR-08 through either reader of its imports (its
__cuda_array_interface__, its own __dlpack__). Each planted consumer bug is caught on its
clause; a bug of its reader (an export that does not order the read, or describes the wrong
memory) is `unsupported`, never blamed on the consumer. Bad specs fail in one line."""
import json
import os
import subprocess
import sys

import pytest

from dlconform.targets import loader
from test_meta import REPO

SIM = REPO / "build" / "cuda" / "sim" / "libcudart.so"
LIBS = REPO / "harness" / "tests" / "libs"


@pytest.fixture(scope="module")
def sim():
    if not SIM.exists():
        pytest.skip("no simulated CUDA runtime: run `make build` first")
    return SIM


def _env(cudart, bug="", reader="cai", view=""):
    env = dict(os.environ, DLCONFORM_CUDART=str(cudart), CUDALIB_CUDART=str(cudart), CUDALIB_BUG=bug,
               CUDALIB_READER=reader, CUDALIB_VIEW=view)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), str(LIBS), env.get("PYTHONPATH")]))
    return env


def _run(out, bug="", reader="cai", target="cudalib@cuda", files=("test_cuda_stream.py", "test_cuda_exchange.py"),
         view=""):
    """(the process, results.json, {clause: (verdict, message)} of the consumer checks that are not
    parametrized) of a device run of cudalib with `bug` planted, its imports read through
    `reader`, copied or viewed (`view` "1"), on `files` (None: the whole device run)."""
    tests = [a for f in files or () for a in ("--tests", f)]
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--device", "cuda", "--target", target, *tests,
                        "--out", str(out), "-q"], cwd=REPO, env=_env(SIM, bug, reader, view), capture_output=True,
                       text=True, timeout=300)
    doc = json.loads((out / "results.json").read_text())
    seen = {}
    for r in doc["results"]:
        # skip: the host files' consumer checks; a parametrized check's records are read from `doc`
        if r["role"] == "consumer" and r["verdict"] != "skip" and "[" not in r["test"]:
            # one check records each clause, but for a second check of a clause (VER-06: the retry
            # of a plain import and under each keyword), which goes under "CLAUSE TEST"
            key = r["clause"] if r["clause"] not in seen else "%s %s" % (r["clause"], r["test"].split("::")[-1])
            assert key not in seen, "two consumer records of %s" % key
            seen[key] = (r["verdict"], r.get("message") or "")
    return p, doc, seen


@pytest.mark.parametrize("reader", ["cai", "dlpack"])
def test_a_clean_cuda_consumer_passes_through_either_reader(sim, tmp_path, reader):
    p, doc, seen = _run(tmp_path / "out", reader=reader)
    assert p.returncode == 0, p.stderr
    # imports that export themselves (its own __dlpack__ the reader) are a producer too
    assert doc["targets"]["cudalib@cuda"]["roles"] == ["consumer"] + (["producer"] if reader == "dlpack" else [])
    assert seen["STR-01"][0] == "pass" and "passed stream 1 and read the final data" in seen["STR-01"][1]
    assert seen["STR-08"][0] == "pass"
    for clause in ("STR-05", "STR-06", "STR-07"):  # which stream it should name is its library's to know
        assert seen[clause][0] == "unsupported" and "knows no current stream" in seen[clause][1]
    assert seen["XAPI-19"][0] == "unsupported" and "did not import through the exchange table" in seen["XAPI-19"][1]
    producer = [r for r in doc["results"] if r["role"] == "producer"]
    assert producer and all(r["verdict"] in ("unsupported", "skip", "pass") for r in producer)
    assert bool([r for r in producer if r["verdict"] == "pass"]) == (reader == "dlpack")
    assert all(r["device"] == "cuda:0" for r in doc["results"] if r["verdict"] != "skip")


@pytest.mark.parametrize("bug, reader, clause, words", [
    ("no_wait", "cai", "STR-01", "took the data before the producer's stream was done"),
    ("minus_one", "dlpack", "STR-01", "streams passed: [-1]"),
    ("stream_zero", "cai", "STR-08", "the consumer passed stream=0"),
    ("never_delete", "cai", "OWN-03", "deleter calls once the result died: got 0, expected 1"),
    ("ignores_offset", "cai", "LAY-03", "CUDA capsule with byte_offset=256: the import's elements"),
])
def test_each_planted_consumer_bug_is_caught_on_its_clause(sim, tmp_path, bug, reader, clause, words):
    p, doc, seen = _run(tmp_path / "out", bug, reader)
    assert p.returncode == 1, p.stderr
    assert seen[clause][0] == "fail" and words in seen[clause][1], seen[clause]
    failing = {c for c, v in seen.items() if v[0] == "fail"}
    assert failing == {clause}


@pytest.mark.parametrize("bug, words", [
    ("export_no_wait", "the read was not ordered after the import's work"),
    ("export_offset", "does not give back a ready import as given"),
])
def test_a_bug_of_the_reader_is_unsupported_not_the_consumers_fail(sim, tmp_path, bug, words):
    """cudalib's from_dlpack is right; its own __dlpack__, the only reader of its imports here,
    is not: nothing is blamed on the consumer."""
    p, doc, seen = _run(tmp_path / "out", bug, "dlpack")
    assert p.returncode == 0, p.stderr
    assert seen["STR-01"][0] == "unsupported" and words in seen["STR-01"][1], seen["STR-01"]
    assert not [r for r in doc["results"] if r["verdict"] in ("fail", "warn", "crash", "error")]


def test_imports_that_export_themselves_are_judged_as_a_producer(sim, tmp_path):
    """cudalib's arrays with __dlpack__ as well: the host files' producer checks run on its
    imports of ready device memory and pass, but for two readings (a zero-size export's data is
    not NULL, a SHOULD; no export to the host); the stream checks that need its own pending
    work say why not, and those that need none run."""
    p, doc, _ = _run(tmp_path / "out", reader="both", files=None)
    assert p.returncode == 0, p.stderr
    assert doc["targets"]["cudalib@cuda"]["roles"] == ["consumer", "producer"]
    producer = [r for r in doc["results"] if r["role"] == "producer"]
    passed = {r["test"].split("::")[0] for r in producer if r["verdict"] == "pass"}
    assert {"test_fields.py", "test_layout.py", "test_dtype.py", "test_capsule.py", "test_versioning.py",
            "test_ownership.py", "test_cuda_stream.py"} <= passed, passed
    assert {(r["clause"], r["verdict"]) for r in producer if r["verdict"] in ("fail", "warn", "crash", "error")} == {
        ("LAY-04", "warn"), ("DEV-06", "warn")}
    stream = {r["test"].split("::")[-1].split("[")[0]: r for r in producer if r["test"].startswith("test_cuda_stream")}
    assert stream["test_cuda_stream_zero_refused"]["verdict"] == "pass"
    assert stream["test_cuda_stream_of_wrong_type_or_range"]["verdict"] == "pass"
    assert "the stream the library's own work is pending on is unknown" in \
        stream["test_stream_minus_one_neither_waits_nor_blocks"]["message"]
    assert all(r["device"] == "cuda:0" for r in producer if r["verdict"] == "pass")


def test_an_import_that_changes_dtype_is_not_blamed_on_the_producer(sim, tmp_path):
    """as_bytes imports every tensor as flat uint8 bytes, the right bytes: the producer checks
    find their tensors are not what they asked for and say unsupported, failing nothing."""
    p, doc, _ = _run(tmp_path / "out", "as_bytes", "both", files=("test_dtype.py", "test_layout.py"))
    producer = [r for r in doc["results"] if r["role"] == "producer"]
    assert p.returncode == 0 and not [r for r in producer if r["verdict"] in ("fail", "crash", "error")], p.stderr
    assert any("imported it as shape" in r["message"] for r in producer if r["verdict"] == "unsupported")


def test_a_zero_copy_consumer_that_asks_for_no_synchronisation_fails(sim, tmp_path):
    """CUDALIB_VIEW=1: cudalib views the producer's memory. Naming its stream, it passes; naming
    -1 and synchronising nothing, STR-01 fails, though the memory holds the final data once the
    device is idle (nothing could have ordered a reader after the producer's work)."""
    for bug, verdict in (("", "pass"), ("minus_one", "fail")):
        p, doc, seen = _run(tmp_path / bug, bug, files=("test_cuda_stream.py",), view="1")
        assert seen["STR-01"][0] == verdict, (seen["STR-01"], p.stderr)
        if bug:
            assert "it passed stream=-1 (no synchronisation)" in seen["STR-01"][1]


#: the clauses of the device consumer's layout and dtype checks (suites/test_cuda_layout.py)
LAYOUT_CLAUSES = ("LAY-11", "DT-03", "DT-04", "DT-05", "DT-06", "DT-13")


@pytest.mark.parametrize("reader, view, bug", [
    ("cai", "", ""), ("cai", "1", ""), ("dlpack", "1", ""),
    ("cai", "", "ignores_strides"), ("cai", "1", "ignores_strides"), ("dlpack", "1", "ignores_strides"),
])
def test_strided_views_and_dtypes_on_cuda(sim, tmp_path, reader, view, bug):
    """Every dtype imports with its bytes through either reader. Copying, cudalib refuses strided
    tensors (LAY-11 lets it); viewing, it keeps their strides, and each reader's strided view is
    gathered right. Taking strided tensors for compact ones (ignores_strides) fails LAY-11, copied
    or viewed: the viewing runs' pass is no refusal's."""
    p, doc, seen = _run(tmp_path / "out", bug, reader, files=("test_cuda_layout.py",), view=view)
    want = dict.fromkeys(LAYOUT_CLAUSES, "pass")
    if bug:
        want["LAY-11"] = "fail"
    assert {c: seen[c][0] for c in LAYOUT_CLAUSES} == want, (seen, p.stderr)
    assert p.returncode == (1 if bug else 0), p.stderr
    if bug:
        assert "the import's elements (read through" in seen["LAY-11"][1], seen["LAY-11"]


def test_a_producer_bug_of_its_imports_is_caught_on_its_clause(sim, tmp_path):
    p, doc, _ = _run(tmp_path / "out", "export_device_1", "both", files=("test_device.py",))
    failing = {r["clause"] for r in doc["results"] if r["verdict"] == "fail"}
    assert p.returncode == 1 and failing == {"DEV-03", "DEV-04"}, (failing, p.stderr)


def test_a_device_run_makes_a_plain_module_its_cuda_consumer(sim, tmp_path):
    p, doc, seen = _run(tmp_path / "out", "no_wait", "cai", "cudalib")
    assert list(doc["targets"]) == ["cudalib@cuda"] and seen["STR-01"][0] == "fail", p.stderr


def test_a_finding_reproduces_under_its_bug_and_not_without(sim, tmp_path):
    p, _, seen = _run(tmp_path / "out", "no_wait")
    assert p.returncode == 1 and seen["STR-01"][0] == "fail", p.stderr
    results = str(tmp_path / "out" / "results.json")
    for bug, rc, word in (("no_wait", 0, "1 reproduced"), ("", 1, "1 not reproduced")):
        q = subprocess.run([sys.executable, "-m", "dlconform", "recheck", "--results", results], cwd=tmp_path,
                           env=_env(SIM, bug), capture_output=True, text=True, timeout=300)
        assert q.returncode == rc and word in q.stdout, q.stdout + q.stderr


@pytest.mark.parametrize("spec, words", [
    ("no_such_module_here@cuda", "cannot import module 'no_such_module_here' (ModuleNotFoundError)"),
    ("cudalib@rocm", "a module's device variant is MODULE@DEVICE, DEVICE one of cuda"),
    ("json@cuda", "module 'json' has no from_dlpack"),
])
def test_bad_specs_fail_in_one_line(sim, spec, words):
    found = loader.probe(spec, env=_env(SIM))
    assert not found["ok"] and words in found["reason"] and "\n" not in found["reason"], found


def test_without_a_runtime_it_is_unavailable_in_one_line(sim, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(LIBS))  # where probe() looks before it starts the loader's process
    found = loader.probe("cudalib@cuda", env=dict(_env(SIM), DLCONFORM_CUDART=str(tmp_path / "libcudart.so")))
    assert not found["ok"] and "cudalib@cuda: the CUDA consumer checks observe through a CUDA runtime" in \
        found["reason"] and "\n" not in found["reason"], found


def test_keywords_over_cuda_memory(sim, tmp_path):
    """suites/test_cuda_keywords.py on cudalib, which copies every import to CUDA device 0 and
    refuses others with BufferError: clean, device='cpu' is refused (DEV-06 warns, SHOULD),
    with BufferError (CPY-07, CPY-08 pass), copy=None copies (CPY-06 warns: it copies every
    import), the copy of a READ_ONLY capsule is writable (FLG-03 passes), its interface names no
    device (API-05 unsupported), it passes max_version (1, 3) and asks an old producer again with
    the stream alone (VER-01, VER-06 pass), the deleter once (OWN-03). Refusing any device with
    NotImplementedError, as cupy 14 does, fails CPY-08, and CPY-07 is not judged: device='cpu' is
    refused with or without copy=False. RuntimeError for copy=False on the device fails CPY-07
    alone: it copied nothing (CPY-06 holds), the class is the finding."""
    same = {"API-05 keeps_the_device": "unsupported", "CPY-06 copy_keyword": "warn", "CPY-07 copy_keyword": "pass",
            "CPY-07 copy_false_to_host": "pass", "CPY-08 host_copy_impossible": "pass",
            "DEV-06 device_cpu": "warn", "DEV-07 refuses_foreign_device": "pass",
            "VER-01 passes_max_version_tuple": "pass", "VER-05 checks_name_and_version": "pass",
            "OWN-03 checks_name_and_version": "pass", "VER-06 retries_without_new_keywords": "pass",
            "OWN-03 retries_without_new_keywords": "pass", "VER-06 retries_for_every_keyword": "pass",
            "FLG-03 readonly_import": "pass", "FLG-05 is_copied_import": "pass",
            "OWN-06 accepts_null_manager_ctx": "pass"}
    want = {"": same,
            "device_not_implemented": dict(same, **{"CPY-07 copy_false_to_host": "unsupported",
                                                    "CPY-08 host_copy_impossible": "fail"}),
            "copy_false_runtimeerror": dict(same, **{"CPY-07 copy_keyword": "fail"})}
    for bug, verdicts in want.items():
        p, doc, _ = _run(tmp_path / (bug or "clean"), bug, files=("test_cuda_keywords.py",))
        got = {"%s %s" % (r["clause"], r["test"].split("::test_cuda_consumer_")[-1]): (r["verdict"], r["message"])
               for r in doc["results"] if r["role"] == "consumer"}
        assert {k: v for k, (v, _) in got.items()} == verdicts, (bug, got, p.stderr)
        assert p.returncode == (0 if not bug else 1), p.stderr
        if bug == "device_not_implemented":
            assert "NotImplementedError" in got["CPY-08 host_copy_impossible"][1], got
            assert "not the copy's" in got["CPY-07 copy_false_to_host"][1], got
        elif bug:
            assert "raised RuntimeError" in got["CPY-07 copy_keyword"][1], got


def test_every_refusal_reason_over_cuda_memory(sim, tmp_path):
    """suites/test_cuda_refusals.py on cudalib: clean, it refuses what it must and takes what it
    may (each reason passes); trusting the header (trusts_header) it imports a version 2.0 and
    a 0.9 capsule (VER-08 fails), a negative ndim and overflowing shapes (warns: invalid input),
    dtype codes no DLPack version defines as untyped bytes (its interface's typestr V: carried
    unread, a warn), and fp6 and fp4 whose bits say 8 (DT-07, DT-08 fail), which is all that
    taking those codes for whole bytes (subbyte_as_bytes) breaks."""
    subbyte = [("dtype-15-8-1", "DT-07", "fail"), ("dtype-17-8-1", "DT-08", "fail")]
    want = {"": [], "subbyte_as_bytes": subbyte, "trusts_header": sorted(subbyte + [
        ("dtype-18-8-1", "VER-09", "warn"), ("dtype-99-32-1", "VER-09", "warn"), ("dtype-255-8-1", "VER-09", "warn"),
        ("ndim-negative", "LAY-09", "warn"), ("shape-bytes-overflow", "LAY-10", "warn"),
        ("shape-numel-overflow", "LAY-10", "warn"), ("version-0.9", "VER-08", "fail"),
        ("version-1.99-dtype-99", "VER-09", "warn"), ("version-2.0", "VER-08", "fail")])}
    for bug, expected in want.items():
        p, doc, _ = _run(tmp_path / (bug or "clean"), bug, files=("test_cuda_refusals.py",))
        found = sorted({(r["test"].split("[")[-1].rstrip("]"), r["clause"], r["verdict"]) for r in doc["results"]
                        if r["verdict"] != "pass"})
        assert len(doc["results"]) >= 2 * 19, doc["results"]  # each reason: its clause and OWN-03
        assert found == expected, (bug, found, p.stderr)
        assert p.returncode == (1 if bug else 0), p.stderr


def test_a_consumer_without_0d_arrays_is_not_failed_on_lay08(sim, tmp_path):
    """A CUDA consumer that refuses every 0-d tensor, with a shape and strides as with NULL ones
    (cudalib's no_0d: a library without 0-d arrays), lacks the rank, which says nothing of
    LAY-08: unsupported, as on the CPU. Before, the device check had no control and failed it
    (an auditor's gpulib)."""
    p, doc, seen = _run(tmp_path / "no0d", bug="no_0d", files=("test_cuda_layout.py",))
    verdict, message = seen["LAY-08"]
    assert verdict == "unsupported" and "takes no 0-d tensor" in message, (verdict, message, p.stdout[-2000:])


def test_a_consumer_naming_none_warns_str14(sim, tmp_path):
    """A CUDA consumer that names stream=None (the legacy default stream to a CUDA producer,
    STR-04) instead of 1: STR-14's warn (SHOULD), and nothing fails while it orders its read
    after that stream. Before, the device run judged None nowhere (an auditor's gpulib);
    inside a stream context of a library whose current stream is known, None is compared as
    the legacy stream it names (STR-07, as pyref's cuda_consumer_ignores_context)."""
    p, doc, seen = _run(tmp_path / "none", bug="stream_none", files=("test_cuda_stream.py",))
    assert seen["STR-14"][0] == "warn" and "passed stream=None" in seen["STR-14"][1], seen.get("STR-14")
    assert not {c for c, v in seen.items() if v[0] == "fail"} and p.returncode == 0, seen
