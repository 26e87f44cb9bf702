"""End to end for the generic target's standalone bug reports (issue 13 item 5): a pure-Python
ctypes library (harness/tests/libs/viewlib.py, found through `dlconform run --target viewlib`)
with planted re-export bugs gets one report per finding, and each report's script, run with
only the library beside it (no PYTHONPATH, no user site: dlconform cannot be imported),
reproduces the finding: it exits non-zero with the bugs planted and 0 without them.

The clauses are those the planted bugs break (LAY-03: byte_offset dropped; FLG-02: READ_ONLY
dropped) and those that see the same memory through the re-export (CAP-01/02, OWN-05, LAY-05..08,
SEM-01 via the strided views): their scripts are the checks themselves, with the generic target
(which builds its tensors from the kit's host tensors) embedded."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dlconform.report.bugreport import standalone_script

REPO = Path(__file__).resolve().parents[2]
LIB = REPO / "harness" / "tests" / "libs" / "viewlib.py"
CLAUSES = ["FLG-02", "LAY-03", "OWN-05", "CAP-01", "CAP-02", "LAY-0[5-8]"]
BUGS = "drop_offset,drop_readonly"
pytestmark = pytest.mark.skipif(not list((REPO / "harness" / "dlconform").glob("_ref*.so")),
                                reason="dlconform._ref not built (make build)")


def _dlconform(tmp_path, *args, bug=""):
    env = dict(os.environ, VIEWLIB_BUG=bug,
               PYTHONPATH=os.pathsep.join([str(REPO / "harness"), str(LIB.parent)]))
    return subprocess.run([sys.executable, "-m", "dlconform", *args], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=120)


def _findings(tmp_path, bug):
    out = tmp_path / ("run-" + (bug or "clean"))
    args = ["run", "--target", "viewlib", "--out", str(out), "-q"]
    for c in CLAUSES:
        args += ["--clause", c]
    p = _dlconform(tmp_path, *args, bug=bug)
    assert p.returncode in (0, 1), (p.stdout + p.stderr)[-3000:]
    return out / "results.json", [r for r in json.loads((out / "results.json").read_text())["results"]
                                  if r["target"] == "viewlib" and r["verdict"] in ("fail", "crash", "error")]


def _script_exit(script, folder, bug):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIEWLIB_BUG")}
    env["VIEWLIB_BUG"] = bug
    p = subprocess.run([sys.executable, "-E", "-s", str(script)], env=env, cwd=str(folder), capture_output=True,
                       text=True, timeout=60)
    return p.returncode, (p.stdout + p.stderr)[-600:]


def test_generic_findings_reproduce_standalone(tmp_path):
    _, clean = _findings(tmp_path, "")
    assert not clean, [(r["clause"], r["test"], r["message"][:200]) for r in clean]
    results, found = _findings(tmp_path, BUGS)
    assert {"LAY-03", "FLG-02"} <= {r["clause"] for r in found}, [(r["clause"], r["test"]) for r in found]
    reports = tmp_path / "reports"
    p = _dlconform(tmp_path, "report", "--results", str(results), "--all-findings", str(reports))
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    folder = tmp_path / "standalone"
    folder.mkdir()
    shutil.copy(LIB, folder)
    shutil.copy(LIB.parent / "dlpack_structs.py", folder)
    assert _script_exit_import(folder) != 0  # dlconform is not importable where the scripts run
    scripts = []
    for md in sorted(reports.glob("*.md")):
        text = standalone_script(md.read_text())
        assert text is not None, "%s has no standalone script" % md.name
        scripts.append(folder / (md.stem + ".py"))
        scripts[-1].write_text(text)
    assert len(scripts) >= len(found) > 0
    # the generic target is what made the tensors, views and read-only copies
    assert all("GenericTarget('viewlib')" in s.read_text() for s in scripts)
    on = {s.name: _script_exit(s, folder, BUGS) for s in scripts}
    off = {s.name: _script_exit(s, folder, "") for s in scripts}
    assert all(rc not in (0, None) for rc, _ in on.values()), {k: v for k, v in on.items() if v[0] == 0}
    assert all(rc == 0 for rc, _ in off.values()), {k: v for k, v in off.items() if v[0] != 0}


def _script_exit_import(folder):
    return subprocess.run([sys.executable, "-E", "-s", "-c", "import dlconform"], cwd=str(folder),
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
                          capture_output=True).returncode
