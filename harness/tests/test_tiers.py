"""Debian tiers (harness/tiers/tier.sh): argument checks, the stamp, and the rebuild decision.

The fast tests work on fake tier directories and never run mmdebstrap. The last test needs a
tier that was really built (`make tier TIER=sid`) and is skipped otherwise.
"""
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TIER_SH = REPO / "harness" / "tiers" / "tier.sh"
TIERS_MK = REPO / "harness" / "tiers" / "tiers.mk"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0
HAVE_DPKG = shutil.which("dpkg-query") is not None
needs_root = pytest.mark.skipif(not IS_ROOT, reason="needs root (mount, chroot)")
needs_dpkg = pytest.mark.skipif(not HAVE_DPKG, reason="needs dpkg-query (Debian)")


def tier_sh(*args, tier_dir=None, env=None, timeout=60):
    e = dict(os.environ)
    if tier_dir is not None:
        e["TIER_DIR"] = str(tier_dir)
    e.update(env or {})
    return subprocess.run(["sh", str(TIER_SH), *args], capture_output=True, text=True,
                          env=e, timeout=timeout, cwd=REPO)


def packages(tier):
    proc = tier_sh("packages", tier)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def fake_tier(root, tier, header=(1, 3), stamp=True, versions=None, stored_header=None):
    """A directory that looks like a complete tier: python3, dlpack.h, a dpkg database, a stamp."""
    d = Path(root) / tier
    (d / "usr/bin").mkdir(parents=True)
    py = d / "usr/bin/python3"
    py.write_text("#!/bin/sh\n")
    py.chmod(py.stat().st_mode | stat.S_IXUSR)
    (d / "usr/include/dlpack").mkdir(parents=True)
    (d / "usr/include/dlpack/dlpack.h").write_text(
        "#define DLPACK_MAJOR_VERSION %d\n#define DLPACK_MINOR_VERSION %d\n" % header)
    if stored_header:
        h = d / "usr/local/share/dlconform/include/dlpack"
        h.mkdir(parents=True)
        (h / "dlpack.h").write_text(
            "#define DLPACK_MAJOR_VERSION %d\n#define DLPACK_MINOR_VERSION %d\n" % stored_header)
    pkgs = packages(tier)
    versions = dict(versions or {})
    for p in pkgs:
        versions.setdefault(p, "1.0-1")
    dpkg = d / "var/lib/dpkg"
    (dpkg / "info").mkdir(parents=True)
    (dpkg / "updates").mkdir()
    (dpkg / "status").write_text("".join(
        "Package: %s\nStatus: install ok installed\nVersion: %s\nArchitecture: amd64\n\n" % (p, v)
        for p, v in versions.items() if v is not None))
    if stamp:
        lines = ["dlconform-tier=1", "tier=%s" % tier, "mirror=http://deb.debian.org/debian",
                 "built=2025-01-01T00:00:00Z", "packages=%s" % " ".join(pkgs), "header=fake"]
        lines += ["pkg %s=%s" % (p, versions[p] or "1.0-1") for p in pkgs]
        lines += ["py numpy=2.4.6", "complete=yes"]
        (d / ".dlconform-tier").write_text("\n".join(lines) + "\n")
    return d


def plan(tmp_path, tier="sid"):
    proc = tier_sh("plan", tier, tier_dir=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


# ---- arguments ------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("build", "buster"), ("conformance", "SID"), ("plan", ""),
                                  ("build",)])
def test_unknown_or_missing_tier_is_a_one_line_usage_error(args, tmp_path):
    proc = tier_sh(*args, tier_dir=tmp_path)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "bookworm trixie sid" in proc.stderr
    assert not any(tmp_path.iterdir()), "nothing is created for a bad TIER"


def test_unknown_command_is_a_usage_error():
    proc = tier_sh("frobnicate", "sid")
    assert proc.returncode == 2 and "usage" in proc.stderr


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_tier_with_unknown_tier_exits_2(tmp_path):
    proc = subprocess.run(["make", "-s", "-f", str(TIERS_MK), "tier", "TIER=jessie",
                           "TIER_DIR=%s" % tmp_path], capture_output=True, text=True, cwd=REPO,
                          timeout=60)
    assert proc.returncode == 2
    assert "unknown TIER 'jessie'" in proc.stderr


def test_package_lists():
    common = {"python3-numpy", "python3-torch", "python3-mpi4py", "python3-pytest",
              "python3-hypothesis", "python3-dev", "gcc", "make", "libdlpack-dev"}
    for tier in ("bookworm", "trixie"):
        assert set(packages(tier)) == common
    assert set(packages("sid")) == common | {"python3-tvm-ffi", "python3-pyarrow", "nanobind-dev", "python3-nanobind",
                                             "g++", "python3-onnxruntime"}


# ---- stamp and rebuild decision -------------------------------------------------------------
def test_missing_tier_is_built(tmp_path):
    assert plan(tmp_path) == "build"


@needs_dpkg
@pytest.mark.parametrize("tier", ["bookworm", "trixie", "sid"])
def test_complete_tier_is_reused(tmp_path, tier):
    fake_tier(tmp_path, tier, header=(1, 3) if tier == "sid" else (0, 6),
              stored_header=None if tier == "sid" else (1, 3))
    assert plan(tmp_path, tier) == "reuse"
    assert tier_sh("check", tier, tier_dir=tmp_path).returncode == 0


@needs_dpkg
def test_half_built_tier_without_stamp_is_rebuilt(tmp_path):
    fake_tier(tmp_path, "sid", stamp=False)
    assert plan(tmp_path) == "rebuild: no stamp (half-built or interrupted)"
    check = tier_sh("check", "sid", tier_dir=tmp_path)
    assert check.returncode == 1 and "no stamp" in check.stderr


def test_empty_directory_is_rebuilt(tmp_path):
    (tmp_path / "sid").mkdir()
    assert plan(tmp_path).startswith("rebuild: no stamp")


@needs_dpkg
def test_stamp_being_written_does_not_count(tmp_path):
    d = fake_tier(tmp_path, "sid")
    (d / ".dlconform-tier").rename(d / ".dlconform-tier.tmp")
    assert plan(tmp_path).startswith("rebuild: no stamp")


def _truncate(text):
    return "\n".join(text.splitlines()[:-3]) + "\n"


@needs_dpkg
@pytest.mark.parametrize("edits, reason", [
    ([_truncate], "stamp is truncated"),
    ([lambda t: t.replace("tier=sid", "tier=trixie")], "stamp is for another tier"),
    ([lambda t: t.replace("tier=sid", "tier=trixie"), lambda t: t.replace("dlconform-tier=1", "dlconform-tier=0")],
     "stamp has an unknown format"),
    ([lambda t: t.replace(" python3-pyarrow", "")], "package list changed"),
], ids=["truncated", "other-tier", "other-format", "package-list"])
def test_a_changed_stamp_is_rebuilt(tmp_path, edits, reason):
    s = fake_tier(tmp_path, "sid") / ".dlconform-tier"
    for edit in edits:
        s.write_text(edit(s.read_text()))
    assert plan(tmp_path) == "rebuild: " + reason


@needs_dpkg
def test_package_changed_or_removed_after_the_stamp_is_rebuilt(tmp_path):
    d = fake_tier(tmp_path, "sid", versions={"python3-torch": "2.14.1+dfsg-1"})
    status = d / "var/lib/dpkg/status"
    text = status.read_text()
    status.write_text(text.replace("2.14.1+dfsg-1", "2.14.2+dfsg-1"))
    assert plan(tmp_path) == "rebuild: python3-torch is 2.14.2+dfsg-1, stamp says 2.14.1+dfsg-1"
    status.write_text(text.replace("install ok installed\nVersion: 2.14.1",
                                   "deinstall ok config-files\nVersion: 2.14.1"))
    assert plan(tmp_path) == "rebuild: python3-torch is not installed, stamp says 2.14.1+dfsg-1"


@needs_dpkg
def test_tier_without_python_or_header_is_rebuilt(tmp_path):
    d = fake_tier(tmp_path, "trixie", header=(1, 0))
    assert plan(tmp_path, "trixie") == "rebuild: no DLPack >= 1.3 header"
    shutil.rmtree(d)
    d = fake_tier(tmp_path, "sid")
    (d / "usr/bin/python3").unlink()
    assert plan(tmp_path) == "rebuild: no /usr/bin/python3"


# ---- build and clean on fake tiers (root; a fake mmdebstrap proves what runs) --------------
def fake_mmdebstrap(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "mmdebstrap.log"
    tool = bin_dir / "mmdebstrap"
    tool.write_text('#!/bin/sh\necho "$@" >> %s\nexit 1\n' % log)
    tool.chmod(0o755)
    return {"PATH": "%s:%s" % (bin_dir, os.environ["PATH"])}, log


@needs_root
@needs_dpkg
def test_build_reuses_a_complete_tier_without_running_mmdebstrap(tmp_path):
    tiers = tmp_path / "tiers"
    fake_tier(tiers, "sid")
    env, log = fake_mmdebstrap(tmp_path)
    proc = tier_sh("build", "sid", tier_dir=tiers, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "reusing" in proc.stdout
    assert not log.exists()


@needs_root
@needs_dpkg
def test_build_deletes_a_half_built_tier_before_rebuilding(tmp_path):
    tiers = tmp_path / "tiers"
    d = fake_tier(tiers, "sid", stamp=False)
    (d / "leftover").write_text("from an interrupted build")
    env, log = fake_mmdebstrap(tmp_path)
    proc = tier_sh("build", "sid", tier_dir=tiers, env=env)
    assert "not a complete tier (no stamp" in proc.stdout
    assert log.exists(), "mmdebstrap was asked to rebuild"
    args = log.read_text().split()
    assert "--variant=apt" in args and args[-3:-1] == ["sid", str(d)]
    assert "--include=" + ",".join(packages("sid")) in args
    assert not (d / "leftover").exists()
    assert proc.returncode != 0 and "mmdebstrap failed" in proc.stderr
    assert not (d / ".dlconform-tier").exists()


def mounted(path):
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == str(path) for line in f)


@needs_root
def test_clean_unmounts_before_deleting(tmp_path):
    tiers = tmp_path / "tiers"
    d = tiers / "bookworm"
    (d / "proc").mkdir(parents=True)
    (d / "dev/shm").mkdir(parents=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(d / "proc")], check=True)
        subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(d / "dev/shm")], check=True)
    except subprocess.CalledProcessError:
        pytest.skip("cannot mount here")
    (d / "dev/shm/file").write_text("x")
    try:
        proc = tier_sh("clean", "bookworm", tier_dir=tiers)
        assert proc.returncode == 0, proc.stderr
        assert not mounted(d / "proc") and not mounted(d / "dev/shm")
        assert not d.exists()
    finally:
        for m in (d / "dev/shm", d / "proc"):
            if mounted(m):
                subprocess.run(["umount", "-l", str(m)])


# ---- a real tier ------------------------------------------------------------------------------
REAL_TIER_DIR = Path(os.environ.get("TIER_DIR") or Path.home() / ".cache/dlconform/tiers")
REAL_SID_STAMP = REAL_TIER_DIR / "sid" / ".dlconform-tier"


@needs_root
@pytest.mark.skipif(not REAL_SID_STAMP.exists(), reason="no built sid tier (make tier TIER=sid)")
def test_built_sid_tier_is_complete_and_reused(tmp_path):
    import fcntl
    lock = REAL_TIER_DIR / ".sid.lock"
    if lock.exists():  # a run in the tier holds it (tier.sh): `build` would wait for it to end
        with open(lock) as fh:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fh, fcntl.LOCK_UN)
            except BlockingIOError:
                pytest.skip("the sid tier is in use by another run")
    assert tier_sh("check", "sid", tier_dir=REAL_TIER_DIR).returncode == 0
    stamp = dict(line.split("=", 1) for line in REAL_SID_STAMP.read_text().splitlines())
    for mod in ("numpy", "torch", "tvm_ffi", "pyarrow", "mpi4py"):
        assert stamp.get("py " + mod, "unknown") != "unknown", mod
    assert int(stamp["py numpy"].split(".")[0]) >= 2
    env, log = fake_mmdebstrap(tmp_path)
    proc = tier_sh("build", "sid", tier_dir=REAL_TIER_DIR, env=env)
    assert proc.returncode == 0 and "reusing" in proc.stdout, proc.stderr
    assert not log.exists()


# ---- fuzz-ci in a tier (tier.sh fuzz-ci, tierfuzz.sh): dispatch, usage, plan; no tier built --
FUZZ_PACKAGES = ["clang", "libclang-rt-dev", "llvm"]


def fuzz_stamp(d, versions):
    lines = ["dlconform-fuzz=1", "installed=2025-01-01T00:00:00Z", "packages=%s" % " ".join(FUZZ_PACKAGES)]
    lines += ["pkg %s=%s" % (p, versions[p]) for p in FUZZ_PACKAGES]
    lines += ["added=%s" % " ".join(FUZZ_PACKAGES), "cc=Debian clang version 21.1.8", "complete=yes"]
    (d / ".dlconform-fuzz").write_text("\n".join(lines) + "\n")


def add_dpkg(d, versions):
    with open(d / "var/lib/dpkg/status", "a") as f:
        for p, v in versions.items():
            f.write("Package: %s\nStatus: install ok installed\nVersion: %s\nArchitecture: amd64\n\n" % (p, v))


def fuzz_plan(tmp_path, target="numpy", **env):
    proc = tier_sh("fuzz-plan", "sid", tier_dir=tmp_path, env=dict({"TARGET": target, "OUT": "reports/out"}, **env))
    assert proc.returncode == 0, proc.stderr
    return dict(line.split(": ", 1) for line in proc.stdout.splitlines())


@pytest.mark.parametrize("env,why", [
    ({}, "TARGET= is required"), ({"TARGET": "a b"}, "TARGET 'a b' is not a module or target name"),
    ({"TARGET": "../x"}, "is not a module or target name"),
    ({"TARGET": "numpy", "FUZZ_SECONDS": "10m"}, "FUZZ_SECONDS must be a whole number of seconds"),
    ({"TARGET": "numpy", "FUZZ_MIN_SECONDS": "-1"}, "FUZZ_MIN_SECONDS must be a whole number")])
def test_fuzz_ci_usage_errors_are_one_line_and_touch_nothing(env, why, tmp_path):
    e = {"TARGET": "", "FUZZ_SECONDS": "", "FUZZ_MIN_SECONDS": ""}
    e.update(env)
    for cmd in ("fuzz-ci", "fuzz-plan"):
        proc = tier_sh(cmd, "sid", tier_dir=tmp_path, env=e)
        assert proc.returncode == 2, (cmd, proc.stdout, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1 and why in proc.stderr, proc.stderr
        assert not any(tmp_path.iterdir())


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_fuzz_ci_dispatches_to_the_tier_only_with_tier_set():
    env = {k: v for k, v in os.environ.items() if k not in ("TIER", "MAKEFLAGS", "MFLAGS")}

    def run(*a):
        return subprocess.run(["make", "-n", "--no-print-directory", "fuzz-ci", *a], capture_output=True,
                              text=True, cwd=REPO, timeout=60, env=env)

    proc = run("TIER=sid", "TARGET=numpy", "FUZZ_SECONDS=600", "FUZZ_CI_ARGS=--max-rounds 50")
    assert proc.returncode == 0, proc.stderr
    assert "tier.sh fuzz-ci 'sid'" in proc.stdout
    for want in ("TARGET='numpy'", "FUZZ_SECONDS='600'", "FUZZ_CI_ARGS='--max-rounds 50'"):
        assert want in proc.stdout, (want, proc.stdout)
    assert "dlconform fuzz-ci" not in proc.stdout     # nothing runs on the host
    proc = run("TARGET=numpy")
    assert proc.returncode == 0, proc.stderr
    assert "tier.sh" not in proc.stdout and "-m dlconform fuzz-ci --target numpy" in proc.stdout
    assert "--known 'fuzz/known/numpy.txt'" in proc.stdout   # the host keeps its own list


@needs_dpkg
def test_fuzz_plan_reports_the_toolchain_layer_and_the_tier_known_list(tmp_path):
    d = fake_tier(tmp_path, "sid")
    p = fuzz_plan(tmp_path)
    assert p["tier"] == "reuse"
    assert p["toolchain"] == "install clang libclang-rt-dev llvm: not installed"
    sid_list = REPO / "fuzz/known/sid/numpy.txt"
    assert p["known"] == ("fuzz/known/sid/numpy.txt" if sid_list.exists() else "none")  # never the host's
    assert fuzz_plan(tmp_path, target="dlc_no_such_module")["known"] == "none"
    assert p["out"] == str(REPO / "reports/out/sid/fuzz")
    versions = {"clang": "1:21.1.8-74", "libclang-rt-dev": "1:21.1.8-74", "llvm": "1:21.1.8-74"}
    fuzz_stamp(d, versions)
    assert fuzz_plan(tmp_path)["toolchain"] == "install clang libclang-rt-dev llvm: clang is not installed, " \
                                                "fuzz stamp says 1:21.1.8-74"
    add_dpkg(d, versions)
    assert fuzz_plan(tmp_path)["toolchain"] == "install clang libclang-rt-dev llvm: no /usr/bin/clang"
    (d / "usr/bin/clang").write_text("#!/bin/sh\n")
    (d / "usr/bin/clang").chmod(0o755)
    assert fuzz_plan(tmp_path)["toolchain"] == "reuse (Debian clang version 21.1.8)"
    # the layer is optional: extra packages leave the tier complete
    assert tier_sh("check", "sid", tier_dir=tmp_path).returncode == 0
    s = d / ".dlconform-fuzz"
    s.write_text(s.read_text().replace("complete=yes\n", ""))
    assert fuzz_plan(tmp_path)["toolchain"].endswith(": fuzz stamp is truncated")
    (d / ".dlconform-tier").unlink()
    p = fuzz_plan(tmp_path)
    assert p["tier"].startswith("rebuild: no stamp") and p["toolchain"].endswith("after the tier is built")


@needs_root
@needs_dpkg
def test_failed_toolchain_install_is_one_line_and_leaves_the_tier_as_it_was(tmp_path):
    """A fake tier has no /usr/bin/env, so nothing runs inside it: apt-get update fails."""
    tiers = tmp_path / "tiers"
    d = fake_tier(tiers, "sid")
    for m in ("proc", "sys", "dev"):
        (d / m).mkdir()
    stamp = (d / ".dlconform-tier").read_text()
    env, log = fake_mmdebstrap(tmp_path)
    env.update(TARGET="numpy", FUZZ_SECONDS="5", OUT=str(tmp_path / "out"))
    proc = tier_sh("fuzz-ci", "sid", tier_dir=tiers, env=env)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "fuzz toolchain (clang libclang-rt-dev llvm) not installed: apt-get update failed" \
        in err[0] and "log " in err[0], err
    assert not log.exists() and (d / ".dlconform-tier").read_text() == stamp
    assert not (d / ".dlconform-fuzz").exists() and not (d / "opt").exists()
    with open("/proc/self/mounts") as f:
        assert not [l for l in f if str(d) in l.split()[1]], "nothing stays mounted"
