"""`make fuzz-ci` fuzzes the library the user's Python finds (issue 13, item 6); run by
`make fuzz-test` (stdlib only; needs build/fuzz/consumer.asan):
- a module found only through the user's PYTHONPATH, or only through an active
  virtualenv's site-packages (a .pth file there, as an editable install writes), is the
  one fuzzed: its planted bug is the finding;
- a module that cannot be imported is reported on the console with Python's error.
"""
import json
import os
import subprocess
import tempfile

from verdicts import ROOT  # first: it puts harness/ on sys.path
from dlconform.fuzz import ci

# A consumer whose from_dlpack refuses everything with an exception no refusal may raise:
# the consumer target's EXC oracle names it on the first input.
PLANTED = 'def from_dlpack(x, **kw):\n    raise RuntimeError("planted by %s")\n'


def _write_module(folder, name):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name + ".py"), "w", encoding="utf-8") as f:
        f.write(PLANTED % name)


def _make_fuzz_ci(target, out, **env):
    """`make fuzz-ci TARGET=target` as a user types it: no PYTHON, no make variables from
    a calling make. (make's status, its output, the summary or None)."""
    e = {k: v for k, v in os.environ.items()
         if k not in ("PYTHON", "PYTHONPATH", "VIRTUAL_ENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    e.update(env)
    p = subprocess.run(["make", "--no-print-directory", "fuzz-ci", "TARGET=" + target, "FUZZ_SECONDS=4",
                        "FUZZ_MIN_SECONDS=0", "OUT=" + out, "FUZZ_CI_ARGS=--known /dev/null --no-merge"],
                       cwd=ROOT, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)
    path = os.path.join(out, "fuzz", target + "-summary.json")
    summary = json.load(open(path)) if os.path.exists(path) else None
    return p.returncode, p.stdout.decode("utf-8", "replace"), summary


def _found_planted(target, summary, output):
    assert summary is not None, output
    messages = [f["message"] for f in summary["findings"]]
    assert any("planted by %s" % target in m for m in messages), (messages, output)


def test_pythonpath_is_kept():
    with tempfile.TemporaryDirectory() as tmp:
        _write_module(os.path.join(tmp, "lib"), "cirecipe_pathmod")
        rc, output, summary = _make_fuzz_ci("cirecipe_pathmod", os.path.join(tmp, "out"),
                                            PYTHONPATH=os.path.join(tmp, "lib"))
        _found_planted("cirecipe_pathmod", summary, output)
        assert rc != 0, output  # a new finding


def test_virtualenv_is_the_interpreter():
    with tempfile.TemporaryDirectory() as tmp:
        venv = os.path.join(tmp, "venv")
        subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages", venv],
                       check=True)
        site = subprocess.run([os.path.join(venv, "bin", "python3"), "-c",
                               "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, stdout=subprocess.PIPE).stdout.decode().strip()
        lib = os.path.join(tmp, "src")  # reachable only through the venv's .pth file
        _write_module(lib, "cirecipe_venvmod")
        with open(os.path.join(site, "cirecipe_venvmod.pth"), "w", encoding="utf-8") as f:
            f.write(lib + "\n")
        rc, output, summary = _make_fuzz_ci("cirecipe_venvmod", os.path.join(tmp, "out"), VIRTUAL_ENV=venv)
        _found_planted("cirecipe_venvmod", summary, output)
        assert rc != 0, output


def test_import_error_is_on_the_console():
    with tempfile.TemporaryDirectory() as tmp:
        rc, output, summary = _make_fuzz_ci("cirecipe_no_such_module", os.path.join(tmp, "out"))
        assert rc != 0 and summary is None, (rc, output)
        assert "ModuleNotFoundError: No module named 'cirecipe_no_such_module'" in output, output
        assert "cannot import the consumer module (consumer 'cirecipe_no_such_module')" in output, output


def test_start_failure_reads_the_last_exception():
    log = ("### round: x\nTraceback (most recent call last):\n  File \"a.py\", line 1, in <module>\n"
           "    import b\nImportError: b.so: undefined symbol: f\n"
           "dlconform-fuzz: cannot import the consumer module (consumer 'b')\n")
    assert ci.start_failure(log) == ["ImportError: b.so: undefined symbol: f",
                                     "dlconform-fuzz: cannot import the consumer module (consumer 'b')"]
    assert ci.start_failure("### round: x\nINFO: Seed: 1\n") == []


if __name__ == "__main__":
    for name, fn in sorted(globals().items()):
        if name.startswith("test_") and callable(fn):
            fn()
            print("ok", name)
