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
