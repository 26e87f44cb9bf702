"""One fuzz input through a fuzz target's sanitizer build, as fuzz-ci replays it.

`target_env(target)` is the environment fuzz-ci (ci.py) runs a target's binary in.
`sanitizer_replay(data, target)` replays one input with that binary, where this dlconform is a
clone with the fuzz targets built (build/fuzz/*.asan); a reproducer uses it for a finding only
the sanitizer shows (breaches.conclude), so that `dlconform recheck` judges such a finding by
what the sanitizer says now rather than calling it unsupported.
"""
import os
import subprocess
import sys
import tempfile

from . import devmem
from .triage import triage_log

#: fuzz-ci's sanitizer options for a replay (ci.py)
ASAN_OPTIONS = "detect_leaks=0:allocator_may_return_null=1:handle_abort=1"


def target_env(target, producer=None, ignore_file=None, triage=False):
    """The environment a fuzz target's binary runs in: TARGET a consumer module (NAME@cuda: its
    CUDA mode), or producer-NAME with `producer` NAME; `ignore_file` the keys set aside."""
    e = dict(os.environ)
    consumer, device = devmem.split_target(target)
    e.update(ASAN_OPTIONS=ASAN_OPTIONS, UBSAN_OPTIONS="print_stacktrace=1", DLCONFORM_FUZZ_CONSUMER=consumer)
    if device:  # NAME@cuda: the target's CUDA mode (fuzz/devmem.h, fuzz/producer_cuda.h)
        e[devmem.ENV] = device
        # the CUDA driver maps memory where ASan's shadow gap would be protected
        e["ASAN_OPTIONS"] += ":protect_shadow_gap=0"
    if producer:
        e["DLCONFORM_FUZZ_PRODUCER"] = producer
    if sys.prefix != sys.base_prefix:  # a virtualenv: the target embeds its python3 (fuzz/pyhost.h)
        e.setdefault("DLCONFORM_FUZZ_PYTHON", sys.executable)
    if ignore_file:
        e["DLCONFORM_FUZZ_IGNORE_FILE"] = ignore_file
    if triage:
        e["DLCONFORM_FUZZ_TRIAGE"] = "1"
    return e


def binary_of(target):
    """This clone's sanitizer build of TARGET's fuzz target, or None (an installed dlconform, or
    targets not built: make fuzz-test builds them)."""
    from .. import HARNESS_DIR

    kind = "producer" if target.startswith("producer-") else "consumer"
    path = os.path.join(os.path.dirname(HARNESS_DIR), "build", "fuzz", kind + ".asan")
    return path if os.access(path, os.X_OK) else None


def sanitizer_replay(data, target, known=None, timeout=120):
    """(binary, exit status, triage dict or None) of `data` replayed by TARGET's sanitizer build,
    with the known-findings file `known` set aside as fuzz-ci sets it aside; None where there is
    no such build. The triage dict (triage.triage_log) is None when the input ran through."""
    binary = binary_of(target)
    if binary is None:
        return None
    from .. import HARNESS_DIR

    producer = target[len("producer-"):] if target.startswith("producer-") else None
    env = target_env(target, producer, known if known and os.path.exists(known) else None, triage=True)
    env["PYTHONPATH"] = os.pathsep.join([HARNESS_DIR] + [p for p in [env.get("PYTHONPATH")] if p])
    with tempfile.TemporaryDirectory(prefix="dlconform-replay-") as tmp:
        path = os.path.join(tmp, "input")
        with open(path, "wb") as f:
            f.write(bytes(data))
        try:
            p = subprocess.run([binary, "-runs=1", "-artifact_prefix=%s/" % tmp, path], env=env, cwd=tmp,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        except subprocess.TimeoutExpired:
            return binary, None, {"kind": "timeout", "key": "timeout", "clause": "*",
                                  "message": "the replay ran past %d s" % timeout}
    out = p.stdout.decode("utf-8", "replace")
    return binary, p.returncode, (triage_log(out) if p.returncode != 0 else None)
