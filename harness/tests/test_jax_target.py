"""The built-in `jax` target (targets/jax_target.py): jax on the CPU, judged as the generic
target over jax.dlpack, with its configuration in the results (issue 21: `jax_enable_x64`
decides whether jax has 64-bit types at all). jax is not in Debian: a stand-in of the surface
the target reads (tests/libs/standin_jax, over pyref) runs it here; on a machine with jax the
same run judges jax."""
import json
import os
import subprocess
import sys

import pytest

from dlconform.targets import loader

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.dirname(HERE)
STANDIN = os.path.join(HERE, "libs", "standin_jax")


def _env(*extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLCONFORM_")}
    env["PYTHONPATH"] = os.pathsep.join((HARNESS,) + extra)
    return env


def test_jax_is_a_builtin_target_that_records_its_configuration(tmp_path):
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "jax", "--clause", "LAY-0*",
                        "--tests", "test_layout.py", "--out", str(out), "-q"], env=_env(STANDIN), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((out / "results.json").read_text())
    versions = doc["targets"]["jax"]["versions"]
    assert versions["jax"] == "0.0+standin" and versions["jax_enable_x64"] == "False", versions
    assert versions["jax backend"] == "TFRT_CPU_0 (default cpu)"
    verdicts = {r["verdict"] for r in doc["results"]}
    assert "pass" in verdicts and not verdicts & {"fail", "crash", "error", "warn"}, verdicts
    assert {r["role"] for r in doc["results"] if r["verdict"] == "pass"} >= {"producer", "consumer"}
    assert all(r["target"] == "jax" for r in doc["results"])


def test_the_host_is_named_the_way_jax_names_it(tmp_path):
    """from_dlpack's `device` for the CPU is jax's Device, not the string 'cpu' (which jax does
    not take): the consumer checks of device='cpu' judge jax, not dlconform's argument."""
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "jax", "--clause", "DEV-06",
                        "--clause", "CPY-07", "--clause", "CPY-08", "--tests", "test_device.py", "--tests",
                        "test_copy.py", "--out", str(out), "-q"], env=_env(STANDIN), capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    results = [r for r in json.loads((out / "results.json").read_text())["results"] if r["role"] == "consumer"]
    # CPY-06 too: the check of the copy keyword judges the class of a copy=False refusal (CPY-07)
    assert {r["clause"] for r in results} == {"DEV-06", "CPY-06", "CPY-07", "CPY-08"}, results
    assert {r["verdict"] for r in results} == {"pass"}, results


def test_without_jax_the_target_says_so_in_one_line():
    probe = subprocess.run([sys.executable, "-c", "import jax"], capture_output=True, env=_env())
    if probe.returncode == 0:
        pytest.skip("jax is installed here: the target is jax's")
    found = loader.probe("jax")
    assert not found["ok"] and "jax" in found["reason"] and "\n" not in found["reason"], found
