"""The CI recipes for a library's repository (.ci/library, fuzz/ci/github-fuzz.yml,
.ci/matrix.example.yml) and the tools that try them (.ci/library/check). What runs them for
real, in a Debian tier and a runner without Python: .ci/library/check/workflow.sh and
cflite.sh (minutes each; see .ci/library/README.md). Here, what holds without running them."""
import os
import subprocess
import sys
import tempfile

import pytest

import bundle  # fuzz/oss-fuzz, on sys.path by conftest.py
import gha  # .ci/library/check, on sys.path by conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORKFLOWS = [".ci/library/dlpack.yml", "fuzz/ci/github-fuzz.yml", ".ci/matrix.example.yml"]
STEPS = os.path.join(ROOT, ".ci", "library", "steps.sh")


def _jobs(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return gha.jobs(f.read())


@pytest.mark.parametrize("path", WORKFLOWS)
def test_container_jobs_install_git_before_checkout(path):
    """actions/checkout clones only where git exists; otherwise it downloads a tarball, and the
    reports' provenance has no revision."""
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    jobs = _jobs(path)
    assert jobs, path
    for name, (_, steps) in jobs.items():
        block = text[text.index("\n  %s:" % name):]
        if "container:" not in block.split("steps:")[0]:
            continue  # a runner image with git
        checkouts = [i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/checkout@")]
        gits = [i for i, s in enumerate(steps) if "install" in s.get("run", "") and " git" in s.get("run", "")]
        assert checkouts and gits and gits[0] < checkouts[0], (path, name, steps)


@pytest.mark.parametrize("path", WORKFLOWS[:2])
def test_library_workflows_run_known_steps(path):
    """Every steps.sh call of a library workflow names a step steps.sh has, in the order
    tools, build, install, then the rest."""
    (env, steps), = _jobs(path).values()
    called = [s["run"].split()[-1] for s in steps if "steps.sh" in s.get("run", "")]
    cases = subprocess.run(["sed", "-n", r"s/^  \([a-z]*\))$/\1/p", STEPS], stdout=subprocess.PIPE,
                           check=True).stdout.decode().split()
    assert called[:3] == ["tools", "build", "install"] and set(called) <= set(cases), (called, cases)
    assert env["LIB"] and env["FUZZ_SECONDS"].isdigit(), env
    uploads = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads and uploads[-1]["with"]["path"] == "reports/" and "!cancelled()" in uploads[-1]["if"]


def test_steps_sh_refuses_unknown_steps():
    p = subprocess.run(["sh", STEPS, "nonsense"], env=dict(os.environ, LIB="x"), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT)
    assert p.returncode == 2 and b"usage:" in p.stdout, p.stdout
    p = subprocess.run(["sh", STEPS, "fuzz"], env={k: v for k, v in os.environ.items() if k != "LIB"},
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert p.returncode != 0 and b"LIB" in p.stdout, p.stdout


def _fake_venv(folder):
    """A virtualenv whose `dlconform` prints the arguments it was called with, one a line."""
    bin_dir = os.path.join(folder, "venv", "bin")
    os.makedirs(bin_dir)
    os.symlink(sys.executable, os.path.join(bin_dir, "python3"))
    with open(os.path.join(bin_dir, "dlconform"), "w") as f:
        f.write('#!/bin/sh\nfor a in "$@"; do echo "arg:$a"; done\n')
    os.chmod(os.path.join(bin_dir, "dlconform"), 0o755)
    return os.path.dirname(bin_dir)


@pytest.mark.parametrize("extra,expected", [
    ({}, []),
    ({"DEVICE": "cuda", "EXAMPLES": "500", "SEED": "17"}, ["--device", "cuda", "--examples", "500", "--seed", "17"]),
])
def test_steps_sh_conformance_passes_the_device_and_the_depth(tmp_path, extra, expected):
    """The conformance step of a GPU runner's job (DEVICE=cuda) judges LIB's CUDA variant, and
    a nightly one searches deeper (EXAMPLES, SEED): the step hands them to dlconform run."""
    env = dict({k: v for k, v in os.environ.items() if k not in ("DEVICE", "EXAMPLES", "SEED")}, LIB="mylib",
               VENV=_fake_venv(str(tmp_path)), REPORTS=str(tmp_path / "reports"), **extra)
    p = subprocess.run(["sh", STEPS, "conformance"], env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    assert p.returncode == 0, p.stdout
    args = [line[4:] for line in p.stdout.splitlines() if line.startswith("arg:")]
    assert args[:3] == ["run", "--target", "mylib"] and args[7:] == expected, args


@pytest.mark.parametrize("extra,expected", [({}, ["mylib"]), ({"DEVICE": "cuda"}, ["mylib", "mylib@cuda"])])
def test_steps_sh_fuzz_feeds_device_memory_on_a_gpu_runner(tmp_path, extra, expected):
    """A GPU runner's fuzz step (DEVICE=cuda) also fuzzes LIB@cuda, the consumer fed CUDA device
    memory, with its own known file; each target's fuzz-ci goes through dlconform's make."""
    fake = tmp_path / "dlconform"
    fake.mkdir()
    (fake / "Makefile").write_text("fuzz-ci:\n\t@echo \"fuzz-ci:$(TARGET):$(FUZZ_KNOWN)\"; mkdir -p $(OUT)/fuzz; "
                                   "echo 0 > $(OUT)/fuzz/$(TARGET).exit-status\n")
    known = tmp_path / "lib" / ".dlconform" / "fuzz-known" / "mylib@cuda.txt"
    known.parent.mkdir(parents=True)
    known.write_text("LAY-03: result starts at data+N, export at data+N\n")
    env = dict({k: v for k, v in os.environ.items() if k not in ("DEVICE", "FUZZ_TARGETS")}, LIB="mylib",
               VENV=_fake_venv(str(tmp_path)), REPORTS=str(tmp_path / "reports"), DLCONFORM_DIR=str(fake), **extra)
    p = subprocess.run(["sh", STEPS, "fuzz"], env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    runs = [line.split(":", 2)[1:] for line in p.stdout.splitlines() if line.startswith("fuzz-ci:")]
    assert p.returncode == 0 and [t for t, _ in runs] == expected, p.stdout
    assert dict(runs).get("mylib@cuda", str(known)) == str(known), runs


@pytest.mark.parametrize("absolute", [False, True])
def test_steps_sh_finds_the_known_file_in_the_checkout(tmp_path, absolute):
    """The library's known file is found in its checkout, LIB_DIR relative to the workspace
    (the workflow's `lib`) or absolute."""
    known = tmp_path / "lib" / ".dlconform" / "known.txt"
    known.parent.mkdir(parents=True)
    known.write_text("mylib@cuda consumer DT-07 *\n")
    env = dict(os.environ, LIB="mylib", VENV=_fake_venv(str(tmp_path)), REPORTS=str(tmp_path / "reports"),
               LIB_DIR=str(tmp_path / "lib") if absolute else "lib")
    p = subprocess.run(["sh", STEPS, "conformance"], env=env, cwd=str(tmp_path), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    args = [line[4:] for line in p.stdout.splitlines() if line.startswith("arg:")]
    assert p.returncode == 0 and args[args.index("--known") + 1] == str(known), p.stdout


def test_gha_conditions():
    assert gha.condition("${{ !cancelled() }}", {}) is True
    ok = "${{ !cancelled() && steps.install.outcome == 'success' }}"
    assert gha.condition(ok, {"install": "success"}) is True
    assert gha.condition(ok, {"install": "failure"}) is False
    with pytest.raises(ValueError):
        gha.condition("${{ always() }}", {})


def test_gha_reads_blocks_and_flow_mappings():
    text = ("on: [push]\njobs:\n  one:\n    env:\n      A: \"1\"   # note\n      B: ''\n    steps:\n"
            "      - uses: x/y@v1\n        with: {path: lib, repository: o/n}\n"
            "      - name: two lines\n        run: |\n          echo a\n            echo b\n"
            "      - run: echo c\n")
    (env, steps), = gha.jobs(text).values()
    assert env == {"A": "1", "B": ""}
    assert steps == [{"uses": "x/y@v1", "with": {"path": "lib", "repository": "o/n"}},
                     {"name": "two lines", "run": "echo a\n  echo b\n"}, {"run": "echo c"}]


def test_bundle_carries_the_runtime_and_what_a_module_imports():
    """A module found on PYTHONPATH that imports numpy: the bundle has the module, numpy with
    its shared libraries, libpython and the standard library, and no stdlib test suite."""
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "src")
        os.makedirs(os.path.join(src, "cirecipe_lib"))
        with open(os.path.join(src, "cirecipe_lib", "__init__.py"), "w") as f:
            f.write("import numpy\n")
        out = os.path.join(tmp, "out")
        p = subprocess.run([sys.executable, os.path.join(ROOT, "fuzz", "oss-fuzz", "bundle.py"), out,
                            os.path.join(ROOT, "harness"), "cirecipe_lib"],
                           env=dict(os.environ, PYTHONPATH=src), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert p.returncode == 0, p.stdout
        home = os.path.join(out, "python")
        xy = "python%d.%d" % sys.version_info[:2]
        site = sorted(os.listdir(os.path.join(home, "site")))
        assert "cirecipe_lib" in site and "numpy" in site and "dlconform" not in site, site
        assert os.path.isfile(os.path.join(home, "lib", xy, "os.py"))
        assert os.path.isdir(os.path.join(home, "lib", xy, "lib-dynload"))
        assert not os.path.exists(os.path.join(home, "lib", xy, "test"))
        libs = os.listdir(os.path.join(home, "lib"))
        assert any(n.startswith("libpython") for n in libs), libs
        assert any(n.startswith("libffi.so") for n in libs), libs  # _ctypes's, from lib-dynload
        assert not any(n.startswith(("libc.so", "ld-linux")) for n in libs), libs


def test_bundle_names_a_module_that_does_not_import():
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "fuzz", "oss-fuzz", "bundle.py"), tmp,
                            os.path.join(ROOT, "harness"), "cirecipe_missing"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        assert p.returncode == 1 and b"No module named 'cirecipe_missing'" in p.stdout, p.stdout


def test_bundle_top_levels_leave_out_stdlib_and_harness():
    import sysconfig
    stdlib = sysconfig.get_paths()["stdlib"]
    files = [os.path.join(stdlib, "os.py"), "/h/dlconform/__init__.py", "/s/pkg/sub/m.py", "/s/mod.py"]
    tops = bundle.top_levels(files, [os.path.realpath(stdlib), "/h", "/s"], "/h")
    assert tops == {"/s": {"pkg", "mod.py"}}, tops


def test_gpu_recipe_without_a_device_says_so_in_one_line_and_exits_2(tmp_path):
    """.ci/gpu, dlconform's own checks on a GPU machine, runs nothing where no runtime counts a
    device (here: DLCONFORM_CUDART names a library that is not there)."""
    env = dict(os.environ, DLCONFORM_CUDART=str(tmp_path / "libcudart.so"), PYTHON=sys.executable)
    p = subprocess.run(["sh", os.path.join(ROOT, ".ci", "gpu"), str(tmp_path / "out")], env=env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, p.stdout + p.stderr
    assert p.stdout.splitlines() == ["gpu: no CUDA device here: no CUDA runtime: DLCONFORM_CUDART=%s cannot be "
                                     "loaded (%s: cannot open shared object file: No such file or directory); "
                                     "nothing was run" % (tmp_path / "libcudart.so", tmp_path / "libcudart.so")]
    assert os.listdir(tmp_path / "out") == ["gpu.log"]


def test_gpu_recipe_skips_what_its_budget_cannot_hold(tmp_path):
    """.ci/gpu keeps within BUDGET (a lent GPU machine's command limit): a step with under 20 s
    left is skipped, saying so, and the script still ends with its log (here on the simulated
    runtime, with a budget too small for any step). A run that overruns its share is stopped
    with SIGTERM and keeps its reports: by hand, a CPU run of ref, numpy and torch stopped at
    13 s left a cpu.json of what finished (exit_status 130)."""
    sim = os.path.join(ROOT, "build", "cuda", "sim", "libcudart.so")
    if not os.path.exists(sim):
        pytest.skip("no simulated CUDA runtime: run `make build` first")
    env = dict(os.environ, DLCONFORM_CUDART=sim, PYTHON=sys.executable, BUDGET="19", CPU_TARGETS="ref")
    p = subprocess.run(["sh", os.path.join(ROOT, ".ci", "gpu"), str(tmp_path / "out")], env=env,
                       capture_output=True, text=True, timeout=120)
    log = (tmp_path / "out" / "gpu.log").read_text()
    assert p.returncode == 1, log
    for step in ("device", "cpu", "generic clean cai  test_cuda_stream.py"):
        assert "gpu: %s: skipped, under 20 s of the 19 s budget left (BUDGET)" % step in log, log
    assert "gpu: done (exit 1)" in log and "make conformance" not in log, log
