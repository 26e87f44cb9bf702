"""Known failures (dlconform/known.py): CI gates on new findings only."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dlconform import known
from dlconform.runner import child_env

CAP = "CAP-0[12]"
SIM = Path(__file__).resolve().parents[2] / "build" / "cuda" / "sim" / "libcudart.so"


def run(tmp_path, name, *args, **env):
    out = tmp_path / name
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "-q", "--out", str(out), *args],
                       capture_output=True, text=True, env=dict(child_env(), **env), timeout=300)
    return p, json.loads((out / "results.json").read_text()) if (out / "results.json").exists() else None


def test_parse_format_and_errors(tmp_path):
    f = tmp_path / "known.txt"
    f.write_text("# comment\n\nnumpy@1.24.2 consumer LAY-09 test_layout.py::test_x  # why\n"
                 "torch@* consumer LAY-10 *\nref any * <between tests>\n")
    entries = known.parse(str(f))
    assert [(e.target, e.versions, e.role, e.clause, e.test, e.line) for e in entries] == [
        ("numpy", "1.24.2", "consumer", "LAY-09", "test_layout.py::test_x", 3),
        ("torch", "*", "consumer", "LAY-10", "*", 4), ("ref", "", "any", "*", "<between tests>", 5)]
    f.write_text("numpy consumer LAY-09\n")
    with pytest.raises(known.KnownFileError, match="line 1: expected"):
        known.parse(str(f))
    f.write_text("numpy@banana consumer LAY-09 *\n")
    with pytest.raises(known.KnownFileError, match="line 1: versions"):
        known.parse(str(f))


@pytest.mark.parametrize("line_target, run_target, same", [
    ("adapter/kern_adapter.py:KernTarget", "/home/ci/checkout/adapter/kern_adapter.py:KernTarget", True),
    ("kern_adapter.py:KernTarget", "kern_adapter:KernTarget", True),
    ("kern_adapter.py:KernTarget", "tools.kern_adapter:KernTarget", True),
    ("kern_adapter.py:KernTarget", "kern_adapter.py:OtherTarget", False),
    ("other.py:KernTarget", "kern_adapter.py:KernTarget", False),
    ("ref:fault=readonly_unflagged", "ref:fault=copy_false_copies", False),
    ("numpy", "numpy", True),
])
def test_an_adapter_is_named_by_its_module_and_class(line_target, run_target, same):
    """A known file names an adapter as the run that wrote it did (an absolute path in one
    checkout); in another checkout, or named as a module, it is the same adapter. Before, a
    known file did not carry between checkouts."""
    e = known.Entry(line_target, "", "consumer", "LAY-03", "*", 1)
    rec = {"target": run_target, "role": "consumer", "clause": "LAY-03", "test": "test_layout.py::x"}
    assert e.names(rec, "1.0") is same


def test_a_device_variant_is_a_target_not_a_version(tmp_path):
    """A device run's findings are listed under the variant's spec, whose @ names the device:
    `torch@cuda` is the target torch@cuda for every version, `torch@cuda@>=2.11` for some."""
    f = tmp_path / "known.txt"
    f.write_text("torch@cuda producer STR-01 *\npyref@cuda:fault=cuda_no_wait consumer STR-01 *\n"
                 "torch@cuda@>=2.11 producer STR-08 *\nmylib@cuda consumer LAY-11 *\n")
    assert [(e.target, e.versions) for e in known.parse(str(f))] == [
        ("torch@cuda", ""), ("pyref@cuda:fault=cuda_no_wait", ""), ("torch@cuda", ">=2.11"), ("mylib@cuda", "")]
    f.write_text("torch@cuda@banana producer STR-01 *\n")
    with pytest.raises(known.KnownFileError, match="line 1: versions 'banana'"):
        known.parse(str(f))


def test_a_device_run_gates_on_its_known_file(tmp_path):
    """--write-known of a device run, then --known of the same findings: exit 0 (the file's
    lines name the variant, `pyref@cuda:fault=...`, which the reader once took for versions)."""
    if not SIM.exists():
        pytest.skip("no simulated CUDA runtime: run `make build` first")
    args = ("--device", "cuda", "--target", "pyref:fault=cuda_no_wait", "--tests", "test_cuda_stream.py",
            "--clause", "STR-01")
    p, _ = run(tmp_path, "first", *args, "--write-known", str(tmp_path / "k.txt"), DLCONFORM_CUDART=str(SIM))
    assert p.returncode == 1, p.stderr
    assert "pyref@cuda:fault=cuda_no_wait consumer STR-01" in (tmp_path / "k.txt").read_text()
    p, doc = run(tmp_path, "again", *args, "--known", str(tmp_path / "k.txt"), DLCONFORM_CUDART=str(SIM))
    assert p.returncode == 0, p.stderr
    assert [r for r in doc["results"] if r["verdict"] == "fail"] and all(
        r.get("known") for r in doc["results"] if r["verdict"] == "fail")


def test_versions_a_line_covers(tmp_path):
    f = tmp_path / "known.txt"
    f.write_text("a consumer X-01 *\nb@1.2.0 consumer X-01 *\nc@>=2.0,<2.3 consumer X-01 *\n")
    every, exact, span = known.parse(str(f))
    assert every.covers("0.4.0") and every.covers("0.4.1")
    assert exact.covers("1.2.0") and exact.covers("1.2") and not exact.covers("1.2.1")
    assert span.covers("2.0.1") and span.covers("2.2.9+cu130") and not span.covers("2.3.0")
    assert not span.covers("1.13.1")
    with pytest.raises(known.KnownFileError, match="cannot read"):
        known.parse(str(tmp_path / "missing.txt"))


def test_a_run_gates_only_on_new_findings(tmp_path):
    old = "ref:fault=legacy_capsule_name"
    p, doc = run(tmp_path, "first", "--target", old, "--clause", CAP, "--write-known", str(tmp_path / "k.txt"))
    assert p.returncode == 1 and doc is not None
    lines = [l for l in (tmp_path / "k.txt").read_text().splitlines() if not l.startswith("#")]
    assert lines and all(l.startswith(old + " ") and " CAP-01 " in l for l in lines)  # no version
    # the same findings again: known, exit 0
    p, doc = run(tmp_path, "again", "--target", old, "--clause", CAP, "--known", str(tmp_path / "k.txt"))
    assert p.returncode == 0, p.stderr
    findings = [r for r in doc["results"] if r["verdict"] == "fail"]
    assert findings and all(r.get("known") is True for r in findings)
    # a planted new bug: exit 1, and only it is not known
    new = "ref:fault=versioned_capsule_name"
    p, doc = run(tmp_path, "new", "--target", old, "--target", new, "--clause", CAP,
                 "--known", str(tmp_path / "k.txt"))
    assert p.returncode == 1
    unknown = {r["target"] for r in doc["results"] if r["verdict"] == "fail" and not r.get("known")}
    assert unknown == {new}
    # a known line whose finding is gone is reported as fixed
    (tmp_path / "k2.txt").write_text("ref@* producer CAP-01 test_capsule.py::test_legacy_capsule_named_dltensor\n")
    p, doc = run(tmp_path, "fixed", "--target", "ref", "--clause", "CAP-01", "--known", str(tmp_path / "k2.txt"))
    assert p.returncode == 0
    assert "fixed, remove from" in p.stderr and "CAP-01" in p.stderr
    assert doc["run"]["known"]["fixed"] == ["ref@* producer CAP-01 test_capsule.py::test_legacy_capsule_named_dltensor"]


def test_a_bad_known_file_is_a_usage_error(tmp_path):
    (tmp_path / "bad.txt").write_text("not a line\n")
    p, _ = run(tmp_path, "bad", "--target", "ref", "--clause", "CAP-01", "--known", str(tmp_path / "bad.txt"))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith("dlconform: error: known file")
