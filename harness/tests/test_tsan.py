"""The TSan stress of ref's cached export (probes/tests/tsan_cache.c, `make tsan`): the real
cache is race-free in both disciplines (exit 0), and the cache_no_cas and cache_deleter_no_gil
faults are races TSan reports (exit 66)."""
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = REPO / "build" / "tsan_cache"


def _tsan_links():
    probe = subprocess.run(["sh", "-c", "echo 'int main(void){return 0;}' | ${CC:-cc} -fsanitize=thread -x c - "
                            "-o /tmp/dlconform_tsan_probe && rm -f /tmp/dlconform_tsan_probe"], capture_output=True)
    return probe.returncode == 0


@pytest.fixture(scope="module")
def tsan_bin():
    if not _tsan_links():
        pytest.skip("the C compiler cannot link -fsanitize=thread here")
    build = subprocess.run(["make", "--no-print-directory", "build/tsan_cache"], cwd=REPO, capture_output=True,
                           text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    return BIN


def _run(binary, fault=None):
    env = dict(os.environ)
    env.pop("DLCONFORM_REF_FAULT", None)
    if fault:
        env["DLCONFORM_REF_FAULT"] = fault
    env["TSAN_OPTIONS"] = "halt_on_error=0"
    return subprocess.run([str(binary)], env=env, capture_output=True, text=True, timeout=600)


def test_real_cache_is_race_free(tsan_bin):
    p = _run(tsan_bin)
    assert p.returncode == 0, "exit %d\n%s" % (p.returncode, p.stderr[-3000:])
    assert "ok" in p.stdout


def test_cache_without_cas_is_a_race_tsan_reports(tsan_bin):
    p = _run(tsan_bin, "cache_no_cas")
    assert p.returncode == 66, "exit %d\n%s" % (p.returncode, p.stderr[-3000:])
    assert "ThreadSanitizer: data race" in p.stderr and "ref_cache_handout" in p.stderr


def test_gil_counted_deleter_without_the_gil_is_a_race_tsan_reports(tsan_bin):
    p = _run(tsan_bin, "cache_deleter_no_gil")
    assert p.returncode == 66, "exit %d\n%s" % (p.returncode, p.stderr[-3000:])
    assert "ThreadSanitizer: data race" in p.stderr and "drop_gil_count" in p.stderr
