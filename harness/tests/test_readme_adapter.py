"""harness/README.md's adapter example runs: the code block after its marker, saved as a file,
is an adapter that loads and passes the suites' checks of both roles (pyref stands in for the
example's library)."""
import json
import re
import subprocess
import sys
from pathlib import Path

from dlconform.runner import child_env

README = Path(__file__).resolve().parents[1] / "README.md"
MARK = "<!-- adapter example: harness/tests/test_readme_adapter.py -->"


def example():
    text = README.read_text()
    m = re.search(re.escape(MARK) + r"\n```python\n(.*?)\n```", text, re.S)
    assert m, "the adapter example is not in %s" % README
    return m.group(1) + "\n"


def test_the_readme_adapter_is_short_and_passes_the_checks(tmp_path):
    code = example()
    assert len(code.splitlines()) < 60
    adapter = tmp_path / "mylib_adapter.py"
    adapter.write_text(code)
    out = tmp_path / "out"
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "-q", "--target", "%s:MylibTarget" % adapter,
                        "--tests", "test_copy.py", "--tests", "test_layout.py", "--tests", "test_capsule.py",
                        "--out", str(out)], env=child_env(), capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    results = json.loads((out / "results.json").read_text())["results"]
    verdicts = {r["verdict"] for r in results}
    assert "pass" in verdicts and not verdicts & {"fail", "crash", "error", "timeout"}
    roles = {r["role"] for r in results if r["verdict"] == "pass"}
    assert {"producer", "consumer"} <= roles


CONSUMER_MARK = "<!-- consumer adapter example: harness/tests/test_readme_adapter.py -->"
LIBS = Path(__file__).resolve().parent / "libs"


def _run(tmp_path, target, bug=""):
    env = dict(child_env(), BYTECOPY_BUG=bug)
    env["PYTHONPATH"] = env["PYTHONPATH"] + ":" + str(LIBS)
    out = tmp_path / ("out-" + (bug or "clean") + ("-plain" if ":" not in target else ""))
    p = subprocess.run([sys.executable, "-m", "dlconform", "run", "-q", "--target", target, "--tests",
                        "test_layout.py", "--clause", "LAY-11", "--out", str(out)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode in (0, 1), p.stderr[-3000:]
    return p.returncode, [r for r in json.loads((out / "results.json").read_text())["results"]
                          if r["role"] == "consumer" and r["clause"] == "LAY-11"]


def test_the_readme_consumer_adapter_lets_the_checks_read_opaque_results(tmp_path):
    """A consumer whose results have no reader: as a plain module its strided imports are not
    judged (unsupported, pointing at the adapter), so a consumer that ignores strides passes
    unseen; through the README's adapter the same bug fails LAY-11, and the clean library
    passes."""
    m = re.search(re.escape(CONSUMER_MARK) + r"\n```python\n(.*?)\n```", README.read_text(), re.S)
    assert m, "the consumer adapter example is not in %s" % README
    adapter = tmp_path / "handle_adapter.py"
    adapter.write_text(m.group(1) + "\n")
    rc, plain = _run(tmp_path, "handlelib", "ignore_strides")
    assert rc == 0 and plain and all(r["verdict"] in ("unsupported", "pass") for r in plain), plain
    assert any("an adapter whose describe() reads it" in r["message"] for r in plain), plain
    rc, clean = _run(tmp_path, "%s:HandleTarget" % adapter)
    assert rc == 0 and any(r["verdict"] == "pass" for r in clean), clean
    rc, bad = _run(tmp_path, "%s:HandleTarget" % adapter, "ignore_strides")
    assert rc == 1 and any(r["verdict"] == "fail" for r in bad), bad
