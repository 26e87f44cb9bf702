"""Verdicts of the fuzz targets and of their Python reproducers on the same inputs, for
test_oracle_agreement.py and test_fuzz_py.py. Importing it puts this checkout's harness/ first
on sys.path, for them and test_fuzz_ci_env.py to import dlconform from.

A verdict is the clause of the first oracle breach, NO_FINDING, or PLAIN_CRASH (a signal or
sanitizer report without an oracle line). With keys=True a breach's verdict is its dedup key
instead, "CLAUSE: message" with numbers as N (dlconform.fuzz.triage.oracle_key): the key fuzz-ci
files a finding under and fuzz/known/ lists, so both sides must spell each message alike.
Inputs go in batches: one process takes a whole list and a new one starts after the input that
ended it (an oracle abort, a crash).
- C: build/fuzz/consumer.asan or producer.asan in replay mode (-runs=1, triage on), going on
  after a breach (DLCONFORM_FUZZ_KEEP_GOING): the first oracle line of an input is its verdict.
- Python: the script dlconform.fuzz.repro writes for the input, run by exec in one process;
  its AssertionError names the clause. A process that dies by SIGSEGV while a NULL
  dltensor_from_py_object_no_sync call is in flight gives XAPI-11, as the C target's guard
  (xapi_guard.h) does.
"""
import os
import re
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "harness"))
from dlconform.fuzz.triage import oracle_key  # noqa: E402  (harness/ first)
BUILD = os.path.join(ROOT, "build", "fuzz")
TESTS = os.path.join(ROOT, "fuzz", "tests")
NO_FINDING, PLAIN_CRASH = "no finding", "plain crash"
XAPI11 = "in flight: dltensor_from_py_object_no_sync is NULL"
# the C guard's oracle line for that fault (fuzz/xapi_guard.c), as a key
XAPI11_KEY = oracle_key("XAPI-11", "from_dlpack called dltensor_from_py_object_no_sync, which the exchange table "
                        "leaves NULL (an optional pointer)")
# ASan reports no Python reproducer can see: it runs without a sanitizer, and the deleter
# leaves the buffer mapped (dlconform/fuzz/exchange.py). A read after the deleter, or before
# the buffer's start, is one of these in the C target and nothing in Python.
UNSEEN = re.compile(r"heap-use-after-free|heap-buffer-overflow .* is located \d+ bytes to the left")


SIM = os.path.join(ROOT, "build", "cuda", "sim", "libcudart.so")


def env(target, fault=None, **extra):
    """The environment of a run against TARGET (a consumer module, NAME@cuda: that consumer in
    the CUDA mode on the simulated runtime, or producer-NAME, producer-NAME@cuda), with the built-in fault of ref
    (of pyref for dlconform.pyref) set or none, and the test consumers of fuzz/tests importable."""
    e = {k: v for k, v in os.environ.items() if not k.startswith(("DLCONFORM_", "ASAN_", "UBSAN_"))}
    e["PYTHONPATH"] = os.pathsep.join((os.path.join(ROOT, "harness"), TESTS))
    e["DLCONFORM_REAL_DEVICES"] = ""  # judged as on a machine without devices, GPU or not (devices.h)
    consumer, _, device = target.partition("@")
    if target.startswith("producer-"):
        e["DLCONFORM_FUZZ_PRODUCER"] = target[len("producer-"):]
    else:
        e["DLCONFORM_FUZZ_CONSUMER"] = consumer
    if device:
        e.update(DLCONFORM_FUZZ_DEVICE=device, DLCONFORM_CUDART=SIM)
    if fault:
        library = consumer[len("producer-"):] if target.startswith("producer-") else consumer
        e["DLCONFORM_PYREF_FAULT" if library == "dlconform.pyref" else "DLCONFORM_REF_FAULT"] = fault
    e.update(extra)
    return e


def binary(target):
    return os.path.join(BUILD, ("producer" if target.startswith("producer-") else "consumer") + ".asan")


def c_verdicts(target, env, paths, workdir, keys=False):
    """{path: verdict} of the C target; a plain crash that is an UNSEEN report reads
    "plain crash (KIND)"."""
    verdicts, rest = {}, list(paths)
    env = dict(env, ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:handle_abort=1",
               DLCONFORM_FUZZ_TRIAGE="1", DLCONFORM_FUZZ_KEEP_GOING="1")
    while rest:
        p = subprocess.run([binary(target), "-runs=1", "-artifact_prefix=%s/" % workdir] + rest, env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=workdir)
        current, log = None, p.stderr.decode("latin-1")
        for line in log.splitlines():
            if line.startswith("Running: "):
                current = line[len("Running: "):]
            m = re.match(r"dlconform-oracle: ([^:]+): (.*)$", line)
            if m and current and current not in verdicts:
                verdicts[current] = oracle_key(m.group(1), m.group(2)) if keys else m.group(1)
            if line.startswith("Executed ") and current and current not in verdicts:
                verdicts[current] = NO_FINDING
        if current is None:
            raise AssertionError("%s did not start:\n%s" % (binary(target), log[-3000:]))
        if current not in verdicts:
            asan = re.search(r"ERROR: AddressSanitizer: (\S+).*?\n(?:.*\n)*?(.* is located .*)", log)
            unseen = asan and UNSEEN.search("%s %s" % (asan.group(1), asan.group(2)))
            verdicts[current] = "%s (%s)" % (PLAIN_CRASH, asan.group(1)) if unseen else PLAIN_CRASH
        rest = rest[rest.index(current) + 1:]
    return verdicts


RUNNER = r"""
import gc, os, sys
from dlconform.fuzz import repro
target = sys.argv[1]
for path in sys.argv[2:]:
    print("replay: " + path, flush=True)
    text = repro.script(open(path, "rb").read(), target, "", os.path.basename(path))
    try:
        exec(compile(text, path, "exec"), {"__name__": "__main__"})
        verdict = "no finding"
    except AssertionError as e:
        print("key: " + str(e).replace("\n", " "), flush=True)
        verdict = str(e).split(":", 1)[0]
    except BaseException as e:
        verdict = "reproducer error: %s: %s" % (type(e).__name__, e)
    print("verdict: " + verdict, flush=True)
    # as if each input ran in a process of its own, as a reproducer does: the garbage one input
    # leaves (pyref's device arrays live in reference cycles) is freed now, not by a collection
    # in the middle of a later input, where its cudaFree would synchronise the device and hide
    # that input's pending stream work (STR-01, STR-04)
    gc.collect()
"""


def py_verdicts(target, env, paths, keys=False):
    """{path: verdict} of the Python reproducers."""
    verdicts, rest = {}, list(paths)
    while rest:
        p = subprocess.run([sys.executable, "-u", "-c", RUNNER, target] + rest, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        current, armed, key = None, False, None
        for line in p.stdout.decode("utf-8", "replace").splitlines():
            if line.startswith("replay: "):
                current, armed, key = line[len("replay: "):], False, None
            elif line.startswith("key: "):
                clause, _, msg = line[len("key: "):].partition(": ")
                key = oracle_key(clause, msg)
            elif line.startswith("verdict: "):
                verdicts[current] = key if keys and key else line[len("verdict: "):]
            elif line.startswith(XAPI11):
                armed = True
            elif line.startswith(("accepted: ", "refused: ")):
                armed = False
        if current is None:
            raise AssertionError("the reproducer batch did not start:\n" + p.stdout.decode()[-3000:])
        if current not in verdicts:
            xapi11 = XAPI11_KEY if keys else "XAPI-11"
            verdicts[current] = xapi11 if armed and p.returncode == -signal.SIGSEGV else PLAIN_CRASH
        rest = rest[rest.index(current) + 1:]
    return verdicts


def pair(target, data, fault=None, **extra):
    """(C verdict, Python verdict) of one input; `extra`: more environment."""
    with tempfile.TemporaryDirectory(prefix="verdict-") as tmp:
        path = os.path.join(tmp, "input")
        with open(path, "wb") as f:
            f.write(bytes(data))
        e = env(target, fault, **extra)
        return c_verdicts(target, e, [path], tmp)[path], py_verdicts(target, e, [path])[path]
