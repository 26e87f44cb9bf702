"""`dlconform report`: bug reports whose reproducers need only the library, Python and ctypes
(issue 13, item 5). A report's script is the finding's own script with the dlconform modules
it uses embedded (dlconform.repro.standalone); it runs from a folder with nothing of dlconform
on the path: the library beside it (ref's native module, pyref inside the script)."""
import json
import subprocess
import sys

import pytest

import fault_repros as fr
from dlconform.report import bugreport


def _report(tmp_path, records, *args):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"schema": "dlconform-results/1", "environment": {"dlpack_header": [1, 3]},
                                "targets": {}, "results": records}))
    out = tmp_path / "reports"
    p = subprocess.run([sys.executable, "-m", "dlconform", "report", "--results", str(path), str(out), *args],
                       env=fr._env(), capture_output=True, text=True, timeout=120)
    return p, sorted(out.glob("*.md")) if out.exists() else []


def test_report_writes_one_file_per_finding(fault_findings, tmp_path):
    ref = [r for r in fault_findings if r["library"] == "ref"]
    p, files = _report(tmp_path, ref, "--all-findings", "-q")
    assert p.returncode == 0, p.stderr
    assert len(files) == len({(r["target"], r["clause"], r["test"]) for r in ref})
    text = files[0].read_text()
    for heading in ("## Versions", "## The requirement", "Where it is written:", "## Expected behaviour",
                    "## Actual behaviour", "## Reproducer", "| dlpack.h | 1.3 |"):
        assert heading in text
    one = ref[0]
    p, files = _report(tmp_path / "one", ref, "--target", one["target"], "--clause", one["clause"])
    assert p.returncode == 0 and files and all(one["clause"] in f.name for f in files)
    p, _ = _report(tmp_path / "none", ref, "--clause", "LAY-*")
    assert p.returncode == 2 and "--all-findings" in p.stderr


@pytest.mark.parametrize("args, says", [
    (["--clause", "NOPE-*"], "--clause 'NOPE-*' matches no clause of the catalogue"),
    (["--clause", "NOPE-*", "--all-findings"], "--clause 'NOPE-*' matches no clause of the catalogue"),
    (["--target", "nosuch", "--all-findings"], "has no target 'nosuch' (its targets: lib)"),
    (["--clause", "LAY-*"], "name a finding with --target T too, or give --all-findings"),
    (["--target", "lib"], "name a finding with --clause C too, or give --all-findings"),
    ([], "name a finding with --target T and --clause C, or give --all-findings"),
])
def test_a_selection_that_names_nothing_is_one_line_and_exit_2(tmp_path, args, says):
    """As `dlconform run --clause` refuses a glob that matches no clause: one line, exit 2."""
    record = {"target": "lib", "clause": "LAY-05", "test": "t::a", "verdict": "fail", "message": "x", "repro": ""}
    p, files = _report(tmp_path, [record], *args)
    assert p.returncode == 2 and p.stderr.startswith("dlconform report: ") and says in p.stderr, p.stderr
    assert len(p.stderr.splitlines()) == 1 and not files, p.stderr


@pytest.mark.parametrize("library", ["ref", "pyref"])
def test_standalone_reproducers_of_faults(fault_findings, standalone_runs, tmp_path, library):
    """Each fault's report carries a standalone script: non-zero under the fault, 0 with the fault
    off, run where dlconform cannot be imported (fault_repros.standalone_runs, made by the session
    in the background where it can: conftest.py)."""
    scripts, none, bad = standalone_runs(library)
    print("\n%s: %d standalone scripts; none for %d: %s" % (library, len(scripts), sum(map(len, none.values())),
                                                           {w: len(k) for w, k in none.items()}))
    assert len(scripts) >= {"ref": 161, "pyref": 91}[library]  # as many as the hand-written kit gave
    assert not bad, "\n".join(bad)
    lib = fr.lonely_folder(tmp_path)
    p = subprocess.run([sys.executable, "-I", "-c", "import dlconform"], env={}, cwd=lib, capture_output=True)
    assert p.returncode != 0


def test_standalone_reproducers_against_host_torch(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "run"
    subprocess.run([sys.executable, "-m", "dlconform", "run", "--target", "torch",
                    "--clause", "LAY-03,OWN-03,STR-10,CAP-07", "--out", str(out), "-q"],
                   env=fr._env(), capture_output=True, timeout=300)
    results = json.loads((out / "results.json").read_text())
    paths = bugreport.write(results, str(tmp_path / "reports"))
    scripts = [s for s in (bugreport.standalone_script(open(p).read()) for p in paths) if s]
    if not scripts:
        pytest.skip("this torch has no finding on these clauses")
    runs = fr.run_many(lambda item: fr.run(item[1], tmp_path / "scripts", "torch_%d" % item[0], env={}, args=("-I",)),
                       list(enumerate(scripts)))
    for rc, output in runs:
        assert rc not in (0, None) and (rc < 0 or "REPRODUCED " in output), (rc, fr.tail(output))


def test_nanobind_report_carries_the_glue_and_how_to_build_it(tmp_path):
    glue = bugreport.glue()
    if glue is None:
        pytest.skip("not a checkout")
    rec = {"target": "nanobind", "clause": "LAY-03", "test": "test_layout.py::test_x", "verdict": "fail",
           "level": "MUST", "role": "consumer", "message": "m", "repro": fr.RUN + "PYTHONPATH=x python3 repro.py\n"
           "def test_x(target, check):\n    pass\n\n\n" + "\n".join([
               "# ---- what the check imports, and its module-level definitions that run as they are made", "",
               "if __name__ == \"__main__\":", "    from dlconform.targets.nanobind_target import NanobindTarget",
               "    from dlconform.kit import reproduce", "    target = NanobindTarget()",
               "    reproduce(test_x, target, {}, focus='LAY-03', levels={}, feeds='valid')"]) + "\n"}
    text = bugreport.render(bugreport.Finding([rec]), {"results": [rec]})
    assert "```cpp" in text and glue[1].splitlines()[0] in text
    assert "'dlconform.targets.nanobind_target': (" in bugreport.standalone_script(text)
