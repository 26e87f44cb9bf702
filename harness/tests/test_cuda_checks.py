"""The device run (the device checks, suites/test_cuda_stream.py and test_cuda_exchange.py, and
the producer checks of the host files on device tensors) against pyref@cuda and ref@cuda on the
simulated CUDA runtime (build/cuda/sim/libcudart.so, `make build`): clean pyref@cuda and
ref@cuda pass every check, each CUDA fault of pyref and ref (pyref.CUDA_FAULTS, ref's cuda_*)
is caught on its own clause, and export faults are caught on device tensors. Without a runtime
the targets are unavailable with a one-line reason."""
import json
import os
import subprocess
import sys

import pytest

import fault_repros
from dlconform import _ref, pyref
from dlconform.cli import DEVICE_FILES, DEVICE_TESTS
from dlconform.targets import loader
from test_meta import REPO

SIM = REPO / "build" / "cuda" / "sim" / "libcudart.so"
CAUGHT = frozenset({"fail", "warn", "crash", "timeout"})


@pytest.fixture(scope="module")
def sim():
    if not SIM.exists():
        pytest.skip("no simulated CUDA runtime: run `make build` first")
    return SIM


@pytest.mark.parametrize("spec", ["pyref@cuda", "ref@cuda"])
def test_reference_at_cuda_without_a_runtime_is_unavailable(tmp_path, spec):
    env = dict(os.environ, DLCONFORM_CUDART=str(tmp_path / "libcudart.so"))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), env.get("PYTHONPATH")]))
    found = loader.probe(spec, env=env)
    assert not found["ok"] and "%s needs a CUDA runtime" % spec in found["reason"]
    assert "\n" not in found["reason"]


def _device_run(out, cudart, *args, **extra):
    env = dict(os.environ, DLCONFORM_CUDART=str(cudart))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "harness"), extra.pop("PYTHONPATH", None),
                                                      env.get("PYTHONPATH")]))
    env.update(extra)
    return subprocess.run([sys.executable, "-m", "dlconform", "run", "--device", "cuda", "--out", str(out), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)


def test_device_run_without_a_device_says_so_in_one_line_and_exits_2(tmp_path):
    p = _device_run(tmp_path / "out", tmp_path / "libcudart.so")
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device cuda: no CUDA runtime" in lines[0] and "nothing was run" in lines[0]
    assert not (tmp_path / "out" / "results.json").exists()


def test_device_run_refuses_a_target_without_that_device(sim, tmp_path):
    p = _device_run(tmp_path / "out", sim, "--target", "numpy")
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        "dlconform: error: --device cuda: target 'numpy' has no cuda variant (targets that have one: cupy, jax, pyref, "
        "ref, torch, any module with from_dlpack as a consumer, and an adapter of its own)"]


ADAPTER = """
from dlconform.targets.generic_cuda import GenericCudaTarget


class CudalibTarget(GenericCudaTarget):  # a CUDA library's own adapter: its device target
    def __init__(self):
        super().__init__("cudalib@cuda")
"""


def test_device_run_takes_an_adapter_as_its_device_target(sim, tmp_path):
    """--device cuda --target FILE.py:Class: the adapter is the device target it makes itself (a
    CUDA library's own, naming its streams), run on the device files. Before, 'has no cuda
    variant', exit 2: an auditor had to list the device files by hand without --device."""
    (tmp_path / "cudalib_adapter.py").write_text(ADAPTER)
    libs = str(REPO / "harness" / "tests" / "libs")
    p = _device_run(tmp_path / "out", sim, "--target", "%s:CudalibTarget" % (tmp_path / "cudalib_adapter.py"),
                    "--tests", "test_cuda_layout.py", CUDALIB_CUDART=str(sim), PYTHONPATH=libs)
    assert p.returncode == 0, p.stderr[-3000:]
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert any(r["verdict"] == "pass" and r["device"] == "cuda:0" for r in doc["results"]), doc["summary"]


@pytest.fixture(scope="module")
def clean_device_run(sim, tmp_path_factory):
    """(the process, results.json) of `dlconform run --device cuda` with no target: every built-in
    target with a CUDA variant, on the simulated runtime (pyref@cuda and ref@cuda run there)."""
    out = tmp_path_factory.mktemp("clean-device-run")
    p = _device_run(out, sim, "-q")
    return p, json.loads((out / "results.json").read_text())


def _records(clean_device_run, spec):
    return [r for r in clean_device_run[1]["results"] if r["target"] == spec]


def test_device_run_judges_every_target_with_that_device_on_the_device_checks(sim, tmp_path, clean_device_run):
    p = _device_run(tmp_path / "out", sim, "-q", "--target", "pyref:fault=cuda_no_wait", "--tests",
                    "test_cuda_stream.py")
    doc = json.loads((tmp_path / "out" / "results.json").read_text())
    assert list(doc["targets"]) == ["pyref@cuda:fault=cuda_no_wait"], p.stderr
    assert p.returncode == 1  # the fault is caught
    p, doc = clean_device_run
    assert {r["test"].split("::")[0] for r in doc["results"] if r["target"] == "pyref@cuda"} == \
        set(DEVICE_TESTS["cuda"])
    ran = [spec for spec, t in doc["targets"].items() if t["status"] != "skipped"]
    assert p.returncode == 0 and ran == ["pyref@cuda", "ref@cuda"], p.stderr
    # every built-in target with a CUDA variant was tried: one that cannot run here says why
    # in one line and is no error of the run (torch without a CUDA device, or not installed)
    assert set(doc["targets"]) == {"pyref@cuda", "ref@cuda", "torch@cuda", "cupy@cuda", "jax@cuda"}, doc["targets"]
    for spec in ("torch@cuda", "cupy@cuda", "jax@cuda"):
        t = doc["targets"][spec]
        assert t["status"] == "skipped" and "\n" not in t["reason"], t
        assert "target '%s': %s" % (spec, t["reason"]) in p.stderr


def test_torch_at_cuda_without_a_cuda_torch_is_unavailable_in_one_line():
    """torch@cuda needs a torch with a CUDA device; this machine's torch (a CPU build, or on a
    GPU machine a CPU-only one) gives the reason, and torch@cuda's reproducers name it."""
    torch = pytest.importorskip("torch")
    assert loader.construction("torch@cuda")[1] == "TorchTarget(device='cuda')"
    if torch.cuda.is_available():
        pytest.skip("this torch has a CUDA device: make conformance DEVICE=cuda judges it")
    found = loader.probe("torch@cuda")
    assert not found["ok"] and "torch.cuda.is_available() is False" in found["reason"], found
    assert "\n" not in found["reason"]
    assert loader.load("torch").stream_device() is None  # plain torch judges CPU tensors alone


def test_gpu_libraries_have_device_specs():
    """cupy@cuda and jax@cuda are built-in targets of the device run (targets/cuda_libs.py);
    plain `cupy` stays the generic target, plain `jax` is jax on the CPU (targets/jax_target.py),
    and another device is no built-in spec."""
    assert loader.construction("cupy@cuda")[1] == "CupyTarget(device='cuda')"
    assert loader.construction("jax@cuda") == (("from dlconform.targets.cuda_libs import JaxTarget",),
                                               "JaxTarget(device='cuda')")
    assert loader.construction("jax") == (("from dlconform.targets.jax_target import JaxCpuTarget",),
                                          "JaxCpuTarget()")
    assert loader.construction("cupy")[1] == "GenericTarget('cupy')"
    assert loader.library_module("jax@cuda") == "jax" and loader.library_module("cupy@cuda") == "cupy"
    for spec in ("cupy@cuda", "jax@cuda"):
        found = loader.probe(spec)
        if not found["ok"]:  # not installed here, or no GPU: one line saying which
            assert found["reason"] and "\n" not in found["reason"], found


def test_reference_at_cuda_specs_compose():
    assert loader.construction("pyref@cuda:fault=cuda_no_wait,role=producer")[1] == \
        "PyrefTarget(device='cuda', fault='cuda_no_wait', role='producer')"
    assert loader.construction("ref@cuda:fault=cuda_to_py_synchronizes")[1] == \
        "RefTarget(device='cuda', fault='cuda_to_py_synchronizes')"
    assert loader.quick_check("pyref@cuda") is None and loader.quick_check("ref@cuda") is None
    assert loader.quick_check("pyref@gpu") == "pyref has no device 'gpu' (its devices: cuda)"


def _interop_unavailable(record):
    """Whether a record is a device interop case with no tensor to import: a producer that
    cannot load here (torch without CUDA) or makes no view of that layout on the device (pyref's
    and ref's CUDA tensors are compact)."""
    return (record["test"].startswith("test_cuda_interop.py") and record["verdict"] == "unsupported"
            and any(why in record["message"] for why in ("unavailable:", "view of its CUDA tensors")))


def test_clean_pyref_at_cuda_passes_every_check(clean_device_run):
    """The device checks pass; the producer checks of the host files, run on pyref's device
    arrays, pass or do not apply (no sub-byte dtypes, no exchange table); their consumer checks
    are the CPU run's (skip, saying so). Each record names the device its tensors were on."""
    records = _records(clean_device_run, "pyref@cuda")
    device = [r for r in records if r["test"].split("::")[0] in DEVICE_FILES["cuda"]]
    assert len({r["test"] for r in device if r["verdict"] == "pass"}) >= 6, records
    # pyref is pure Python: no exchange table to judge on CUDA (XAPI-01 makes it optional), and its
    # consumer imports through __dlpack__ alone
    wrong = [(r["test"], r["clause"], r["verdict"], r["message"][:200]) for r in device if r["verdict"] != "pass"
             and not (r["test"].startswith("test_cuda_exchange.py") and r["verdict"] == "unsupported"
                      and ("no __dlpack_c_exchange_api__" in r["message"]
                           or "did not import through the exchange table (it called __dlpack__)" in r["message"]))
             and not _interop_unavailable(r)]
    assert not wrong, wrong
    host = [r for r in records if r["test"].split("::")[0] not in DEVICE_FILES["cuda"]]
    assert {r["test"].split("::")[0] for r in host} == set(DEVICE_TESTS["cuda"]) - set(DEVICE_FILES["cuda"])
    producer = [r for r in host if r["role"] == "producer"]
    assert len({r["test"] for r in producer if r["verdict"] == "pass"}) >= 40, producer
    # what pyref's device arrays lack: sub-byte dtypes, an exchange table, read-only memory, an
    # unexportable tensor
    lacks = ("DT-07", "DT-08", "DT-09", "VER-07", "FLG-02", "FLG-06", "ERR-01")
    wrong = [(r["test"], r["clause"], r["verdict"], r["message"][:200]) for r in producer
             if r["verdict"] != "pass" and not (r["verdict"] == "unsupported" and (
                 r["clause"] in lacks or "no C exchange API" in r["message"]))]
    assert not wrong, wrong
    # exports of one device array from 8 C threads: each hand-out read through the runtime, one deleter each
    threads = {(r["clause"], r["verdict"]) for r in producer
               if r["test"] == "test_threads.py::test_dlpack_from_many_c_threads"}
    assert threads == {("OWN-04", "pass"), ("OWN-05", "pass")}, producer
    assert {r["verdict"] for r in host if r["role"] != "producer"} == {"skip"}
    assert all("judges it, not its device variant" in r["message"] for r in host if r["role"] != "producer")
    assert {r.get("device") for r in device + producer} == {"cuda:0"}, records
    assert {r.get("device") for r in host if r["role"] != "producer"} == {None}


def test_clean_ref_at_cuda_passes_the_device_checks(clean_device_run):
    """ref's CudaTensors pass the device checks, its exchange table's on CUDA included, and its
    CUDA consumer (_ref.cuda_from_dlpack) passes the consumer checks, through __dlpack__ and
    through a producer's table, the keyword checks (device=, copy=) included. The producer
    checks of the host files pass on its CudaTensors or do not apply (whole-byte types only,
    never read-only): the C export path over CUDA memory, and its exchange table used from 8 C
    threads (XAPI-14); their consumer checks are the CPU run's (skip)."""
    records = _records(clean_device_run, "ref@cuda")
    device = [r for r in records if r["test"].split("::")[0] in DEVICE_FILES["cuda"]]
    exchange = {(r["test"].split("::")[-1], r["clause"]) for r in device
                if r["test"].startswith("test_cuda_exchange.py") and r["verdict"] == "pass"}
    assert {clause for _, clause in exchange} == {"XAPI-14", "XAPI-15", "XAPI-16", "XAPI-17", "XAPI-19"}, device
    assert len({r["test"] for r in device if r["verdict"] == "pass"}) >= 12, device
    assert {r["role"] for r in device if r["verdict"] == "pass"} == {"producer", "consumer"}
    # _ref.cuda_from_dlpack takes device= and copy=: every keyword check of CUDA memory is judged, and passes
    keywords = {r["clause"] for r in device if r["test"].startswith("test_cuda_keywords.py") and r["verdict"] == "pass"}
    assert {"API-05", "CPY-06", "CPY-07", "CPY-08", "DEV-06", "DEV-07", "VER-06", "FLG-05"} <= keywords, device
    wrong = [(r["test"], r["clause"], r["verdict"], r["message"][:200]) for r in device if r["verdict"] != "pass"
             and not _interop_unavailable(r)]
    assert not wrong, wrong
    host = [r for r in records if r not in device]
    producer = [r for r in host if r["role"] == "producer"]
    lacks = ("DT-07", "DT-08", "DT-09", "FLG-02", "FLG-06", "ERR-01")
    wrong = [(r["test"], r["clause"], r["verdict"], r["message"][:200]) for r in producer
             if r["verdict"] != "pass" and not (r["verdict"] == "unsupported" and r["clause"] in lacks)]
    assert not wrong, wrong
    assert len({r["test"] for r in producer if r["verdict"] == "pass"}) >= 40, producer
    assert ("test_threads.py::test_exchange_api_and_dlpack_from_many_c_threads", "XAPI-14", "pass") in {
        (r["test"], r["clause"], r["verdict"]) for r in producer}
    assert {r["verdict"] for r in host if r["role"] != "producer"} == {"skip"}
    assert {r.get("device") for r in device + producer} == {"cuda:0"}


#: faults of pyref's export that its device arrays share (the managed struct it fills), each
#: with the clause it breaks: the host checks catch them on device tensors read through CUDA
DEVICE_TENSOR_FAULTS = {"byte_strides": "LAY-05", "leading_unit_dim": "LAY-09", "dtype_code_past_enum": "DT-01",
                        "int_two_lanes": "DT-10", "bfloat16_as_float16": "DT-05",
                        "versioned_flags_before_deleter": "FLG-01", "legacy_capsule_name": "CAP-01",
                        "newer_minor_refused": "VER-03"}


def test_host_checks_catch_export_faults_on_device_tensors(sim, tmp_path):
    """A fault in what pyref's export writes is caught on its clause by the producer checks of
    the host files run on device arrays (a device run of pyref@cuda), with records naming the
    device: the element and field reads go through the CUDA runtime."""
    specs = ["pyref:fault=%s" % f for f in sorted(DEVICE_TENSOR_FAULTS)]
    p = _device_run(tmp_path / "out", sim, "-q", *[a for s in specs for a in ("--target", s)],
                    *[a for f in DEVICE_TESTS["cuda"][len(DEVICE_FILES["cuda"]):] for a in ("--tests", f)],
                    "--clause", ",".join(sorted(set(DEVICE_TENSOR_FAULTS.values()))))
    assert p.returncode == 1, p.stderr
    records = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    for fault, clause in DEVICE_TENSOR_FAULTS.items():
        mine = [r for r in records if r["target"] == "pyref@cuda:fault=%s" % fault]
        caught = [r for r in mine if r["clause"] == clause and r["verdict"] == "fail"]
        assert caught and all(r["device"] == "cuda:0" for r in caught), (fault, mine)
        assert not [r for r in mine if r["verdict"] == "error"], mine


def test_every_cuda_fault_is_caught_on_its_clause(sim, fault_runs):
    """Each CUDA fault of pyref and ref, run as pyref@cuda or ref@cuda on the simulated runtime
    on the tests of its clause (the session's fault runs, conftest.py: fault_runs), is caught
    there."""
    clauses = {("pyref", name): pyref.FAULTS[name].clause for name in pyref.CUDA_FAULTS}
    clauses.update({("ref", name): v[0] for name, v in _ref.FAULTS.items() if fault_repros.cuda_fault(name)})
    assert len(pyref.CUDA_FAULTS) >= 8 and len(clauses) - len(pyref.CUDA_FAULTS) >= 6
    found = {}
    for key, clause in sorted(clauses.items()):
        records = fault_runs[key]
        assert not [r for r in records if r["verdict"] == "error"], records
        found[key] = sorted({"%s:%s" % (r["verdict"], r["test"].split("::")[-1]) for r in records
                             if r["clause"] == clause and r["verdict"] in CAUGHT})
    print("\nfault -> clause -> caught by")
    for key in sorted(found):
        print("  %-40s %-7s %s" % ("%s:%s" % key, clauses[key], ", ".join(found[key]) or "NOT CAUGHT"))
    assert not [key for key, by in found.items() if not by]
    assert found["pyref", "cuda_host_sync"] == ["warn:test_consumer_stream_sees_the_producers_data"]
    assert found["ref", "cuda_dltensor_from_waits"] == [
        "fail:test_cuda_no_sync_functions_leave_the_streams_alone[dltensor_from]"]
    assert found["ref", "cuda_consumer_ignores_work_stream"] == ["warn:test_cuda_consumer_reads_on_the_work_stream"]
    for lib in ("pyref", "ref"):  # the per-thread default stream context shows the same fault (STR-06)
        assert [r for r in fault_runs[lib, "cuda_consumer_ignores_context"] if r["clause"] == "STR-06"
                and r["verdict"] == "fail" and "per-thread default stream context" in r["message"]]


def test_a_failing_runtime_call_of_pyref_is_its_cuda_error(sim):
    """pyref's runtime raises the kit's CudaError (call, code, the runtime's words) for a call
    that fails, not a TypeError of its own making, which a check would read as pyref's bug."""
    code = ("from dlconform.pyref import _cuda\nrt, why = _cuda.runtime()\ntry:\n"
            "    rt('cudaMemcpy', None, None, 8, 99)\nexcept _cuda.CudaError as e:\n    print(e.call, e.code)")
    p = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, DLCONFORM_CUDART=str(sim),
                                                              PYTHONPATH=str(REPO / "harness")),
                       capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["cudaMemcpy", "21"], (p.stdout, p.stderr)  # cudaErrorInvalidMemcpyDirection


#: pyref's consumer faults of the code its CPU and CUDA imports share (taking the capsule, asking
#: the producer): fault -> (its clause, the device check that must fail on it, the clauses it
#: may fail besides: a capsule left unrenamed is given back twice, by the consumer and by the
#: capsule's destructor, which OWN-03 counts)
CUDA_CONSUMER_FAULTS = {
    "consumer_no_rename": ("CAP-03", "owns_the_import_once", {"OWN-03"}),
    "consumer_double_delete": ("OWN-03", "owns_the_import_once", set()),
    "consumer_no_delete": ("OWN-03", "owns_the_import_once", set()),
    "consumer_accepts_used": ("CAP-04", "refuses_used_capsule", set()),
    "consumer_wraps_producer_errors": ("ERR-02", "producer_exception_propagates", set()),
}


def _consumer_fault(fault):
    return "pyref@cuda:fault=%s,role=consumer" % fault


@pytest.fixture(scope="module")
def consumer_fault_runs(sim, tmp_path_factory):
    """(the process, {fault: its records}) of one device run of every CUDA_CONSUMER_FAULTS fault
    (a target each) on the consumer's device files: one run, its targets side by side."""
    out = tmp_path_factory.mktemp("consumer-faults")
    targets = [a for fault in CUDA_CONSUMER_FAULTS for a in ("--target", _consumer_fault(fault))]
    p = _device_run(out, sim, "-q", *targets, "--tests", "test_cuda_stream.py", "--tests", "test_cuda_refusals.py",
                    "--tests", "test_cuda_keywords.py")
    records = json.loads((out / "results.json").read_text())["results"]
    return p, {fault: [r for r in records if r["target"] == _consumer_fault(fault)] for fault in CUDA_CONSUMER_FAULTS}


@pytest.mark.parametrize("fault", sorted(CUDA_CONSUMER_FAULTS))
def test_consumer_faults_are_caught_on_cuda_capsules(consumer_fault_runs, fault):
    """Each of pyref's shared consumer faults, through its CUDA import (device_from_dlpack), fails
    the device check of its clause, and no other clause. The deleter faults fail OWN-03 of the
    refusals over CUDA memory too (test_cuda_refusals.py): the rules a CUDA-only consumer is
    judged on by the device checks alone, and of the retry of an old producer over CUDA memory
    (test_cuda_keywords.py), which leaves VER-05 and VER-06 clean."""
    p, runs = consumer_fault_runs
    clause, check, besides = CUDA_CONSUMER_FAULTS[fault]
    records = runs[fault]
    caught = {r["verdict"] for r in records if check in r["test"] and r["clause"] == clause}
    assert caught == {"fail"} and p.returncode == 1, (records, p.stderr)
    assert not [r for r in records if r["verdict"] == "fail" and r["clause"] not in {clause} | besides], records
    if fault in ("consumer_double_delete", "consumer_no_delete"):
        caught = {r["verdict"] for r in records if r["clause"] == "OWN-03" and "after the refusal" in r["message"]}
        assert caught >= {"fail", "warn"}, records
        # the count of the capsule-kind and retry checks is OWN-03's too, and theirs stay clean
        failed = {r["test"].split("::")[-1] for r in records if r["clause"] == "OWN-03" and r["verdict"] == "fail"}
        assert "test_cuda_consumer_retries_without_new_keywords" in failed, records
        assert not [r for r in records if "test_cuda_keywords" in r["test"] and r["clause"] in ("VER-05", "VER-06")
                    and r["verdict"] != "pass"], records


def test_host_files_beyond_the_device_run_do_not_judge_device_tensors(sim, tmp_path):
    """A host file outside cli.DEVICE_TESTS (CPU stream rules, the keyword matrix, the exchange
    table's forged host tensors) feeds host memory of its own beside the library's tensors: asked
    for on a device variant (--tests, or the variant named without --device), its producer
    checks skip, saying so, rather than judge the library by host inputs (ref@cuda's table of
    CUDA tensors refusing test_exchange_api's host tensor failed XAPI-17)."""
    files = ("test_stream.py", "test_keywords.py", "test_exchange_api.py")
    p = _device_run(tmp_path / "out", sim, "-q", "--target", "pyref", "--target", "ref",
                    *[a for f in files for a in ("--tests", f)])
    assert p.returncode == 0, p.stderr
    records = json.loads((tmp_path / "out" / "results.json").read_text())["results"]
    producer = [r for r in records if r["role"] == "producer"]
    assert {r["target"] for r in producer} == {"pyref@cuda", "ref@cuda"}
    assert {r["test"].split("::")[0] for r in producer} == set(files)
    assert {r["verdict"] for r in producer} == {"skip"}, [(r["test"], r["verdict"]) for r in producer]
    assert all("feed host memory of their own" in r["message"] for r in producer), producer[0]["message"]
