"""The reproducers of the built-in faults (helper of test_repro_faults.py and test_bugreport.py).

`clause_runs(tmp)` runs every fault of ref and pyref on its clause (two runners, each running
one fault after another, a library's faults sharing its warm parent);
`findings(runs)` are their non-pass records, each with its fault (the reproducers' tests), and
test_calibration.py reads all their records; `run(text, ...)` runs a
reproducer as a script in a fresh interpreter; `fault_off(text, ...)` is the same script with
the fault off.
"""
import concurrent.futures
import hashlib
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

from dlconform import repro as R

REPO = Path(__file__).resolve().parents[2]
HARNESS = REPO / "harness"
#: the verdicts a reproducer must reproduce
FINDINGS = ("fail", "warn", "crash", "timeout")


def faults():
    """[(library, fault, clause)] of every built-in fault of ref and pyref."""
    from dlconform import _ref, pyref
    # data races and nothing else: no suite check records them (the TSan stress of ref's cache
    # catches them), so they have no reproducer
    from test_calibration import TSAN_FAULTS

    # the CUDA faults run on LIBRARY@cuda over the simulated CUDA runtime, where it is built
    out = [("ref", name, v[0]) for name, v in sorted(_ref.FAULTS.items())
           if name not in TSAN_FAULTS and (not cuda_fault(name) or SIM.exists())]
    return out + [("pyref", name, v[0]) for name, v in sorted(pyref.FAULTS.items())
                  if not cuda_fault(name) or SIM.exists()]


#: the simulated CUDA runtime (make build)
SIM = REPO / "build" / "cuda" / "sim" / "libcudart.so"


def cuda_fault(name):
    """Whether a fault of ref or pyref breaks a rule of its CUDA tensors (ref's CudaTensor,
    pyref's device arrays; pyref.CUDA_FAULTS): it runs on LIBRARY@cuda."""
    return name.startswith("cuda_")


def base_of(library, fault):
    """The target a fault runs on: LIBRARY, or LIBRARY@cuda for a CUDA fault."""
    return library + "@cuda" if cuda_fault(fault) else library


def spec_of(library, fault):
    """The target spec a fault runs as."""
    return "%s:fault=%s" % (base_of(library, fault), fault)


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DLCONFORM_")}
    env["PYTHONPATH"] = os.pathsep.join((str(HARNESS), str(REPO / "suites")))
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def run_specs(out, items, jobs=2, env=None):
    """{item: TargetRun} of the runs of `items`, (target spec, clause glob or None, test files
    or None) each, as `dlconform run` makes them: `jobs` threads, each with a Runner kept warm
    (the targets of one library share its zygote) that takes the next item. The @cuda
    targets run in the simulated CUDA runtime's environment, the others in `env` (default
    _env()). A CPU fault's run of every file leaves the device files out (host_files): their
    checks need a CUDA target, and on its CPU target would only say `unsupported`."""
    from dlconform.runner import Runner

    queue, lock, runs = list(items), threading.Lock(), {}
    env = _env() if env is None else env
    suites = str(REPO / "suites")
    host = host_files()

    def work():
        runners = {}  # one for the CPU targets, one for the @cuda ones (their environment names the runtime)
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    item = queue.pop(0)
                spec, clause, tests = item
                cuda = "@cuda" in spec.partition(":")[0]
                if cuda not in runners:
                    runners[cuda] = Runner(suites, str(out), env=dict(env, DLCONFORM_CUDART=str(SIM)) if cuda else env,
                                           timeout=30.0, target_timeout=900.0, keep_warm=True)
                runner = runners[cuda]
                runner.clause = clause  # read by each child's command line
                if tests is None and not cuda and ":fault=" in spec:
                    tests = host
                runs[item] = runner.run_target(spec, paths=None if tests is None else [
                    os.path.join(suites, t) for t in tests])
        finally:
            for runner in runners.values():
                runner.close()

    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for f in [pool.submit(work) for _ in range(jobs)]:
            f.result()
    return runs


def host_files():
    """The suites' test files but the device files (cli.DEVICE_FILES), sorted."""
    from dlconform.cli import DEVICE_FILES

    device = {f for files in DEVICE_FILES.values() for f in files}
    return tuple(sorted(p.name for p in (REPO / "suites").glob("test_*.py") if p.name not in device))


def clause_runs(out, jobs=2):
    """{(library, fault): the records of its run}: every fault on the tests of its clause
    (run_specs: `dlconform run --clause CLAUSE --target SPEC` for each, SPEC spec_of's)."""
    units = {(spec_of(library, fault), clause, None): (library, fault) for library, fault, clause in faults()}
    runs = run_specs(out, sorted(units), jobs)
    return {key: runs[item].records for item, key in units.items()}


def findings(runs):
    """The non-pass records of clause_runs(), each with `fault` and `library`."""
    return [dict(r, library=library, fault=fault) for (library, fault), records in sorted(runs.items())
            for r in records if r["verdict"] in FINDINGS]


def marked_clauses(files=None, cases=False):
    """{FILE::NAME: the clauses its markers name, over all its cases} of the tests of the
    suites' `files` (default: all), by a collection: the tests a `--clause` run selects.
    cases=True: also FILE::NAME[PARAMS] of each case of a parametrized test, with that case's
    own clauses (a parameter may carry its own clause mark: the case is run by that clause's
    run alone)."""
    import pytest
    from dlconform.pytest_plugin import item_clauses

    found = {}

    class Collector:
        def pytest_collection_modifyitems(self, items):
            for item in items:
                name, clauses = os.path.basename(str(item.path)), set(item_clauses(item))
                found.setdefault("%s::%s" % (name, item.originalname), set()).update(clauses)
                if cases and item.name != item.originalname:
                    found["%s::%s" % (name, item.name)] = clauses

    suites = REPO / "suites"
    pytest.main(["-q", "--collect-only", "-p", "no:cacheprovider", "-p", "dlconform.pytest_plugin", "--dlc-target",
                 "ref"] + [str(suites / f) for f in files or ["."]], plugins=[Collector()])
    return found


def fault_off(text, library, fault):
    """The script with its target built without the fault (RefTarget(fault='NAME', ...) becomes
    RefTarget(...))."""
    cls = "RefTarget" if library == "ref" else "PyrefTarget"
    made = re.search(r"%s\((device='cuda', )?fault=%r(, )?" % (cls, fault), text)
    if made is None:
        raise ValueError("the script does not build %s with the fault %r" % (cls, fault))
    device = "device='cuda'" + (made.group(2) or "") if made.group(1) else ""
    return text.replace(made.group(0), cls + "(" + device)


RUN = R.RUN_PREFIX
header_env = R.header_env


def run(text, folder, name, env=None, python=None, args=(), timeout=120):
    """(returncode, stdout + stderr) of the snippet saved as folder/name.py and run as a script,
    with the assignments of its run line (None on a timeout); `env` replaces the environment
    (default: harness on PYTHONPATH)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name + ".py")
    path.write_text(text)
    full = dict(env or _env(), **header_env(text))
    try:
        p = subprocess.run([python or sys.executable, *args, str(path)], cwd=folder, env=full,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out after %ss" % timeout
    return p.returncode, p.stdout + p.stderr


def run_many(fn, items, workers=2):
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(fn, items))


def tail(out, n=3):
    return " | ".join(out.strip().splitlines()[-n:])[-500:]


def slug(text, key=""):
    """A file name for a script of `text` (and `key`): readable, at most 80 characters, and a
    digest of both, so that distinct texts or keys never share a name. run_many() runs two
    scripts at a time in one folder: a shared name lets one run read the file while another
    rewrites it (an empty script exits 0)."""
    digest = hashlib.sha1(("%s\0%s" % (text, key)).encode()).hexdigest()[:12]
    return "%s_%s" % (re.sub(r"[^A-Za-z0-9]+", "_", text)[:67], digest)


def standalone_scripts(findings, library):
    """({(fault, test name): (its record's reproducer, the standalone script)}, {why: {(fault,
    test name)}} of the findings without one): the bug-report scripts of `library`'s faults,
    the first finding of each fault and test (test_bugreport.py runs these)."""
    from dlconform.report import bugreport

    scripts, none = {}, {}
    for r in findings:
        if r["library"] != library:
            continue
        text, why = bugreport.standalone_script_of(bugreport.Finding([r]), library)
        key = (r["fault"], r["test"].split("::")[-1])
        if text is None:
            none.setdefault(why, set()).add(key)
        else:
            scripts.setdefault(key, (r["repro"], text))
    return scripts, none


def lonely_folder(tmp_path):
    """A folder where a standalone script finds nothing but ref's native module beside it."""
    import shutil

    from dlconform import _ref

    lib = Path(tmp_path) / "lib"
    lib.mkdir(parents=True)
    shutil.copy(_ref.__file__, lib)
    return lib


def on_and_off(item, lib):
    """None when the standalone script of ((library, fault, name), text) exits non-zero under the
    fault and 0 with it off (`python3 -I`, an empty environment), else what it did."""
    (library, fault, name), text = item
    key = slug("%s_%s" % (fault, name), text)
    rc_on, out_on = run(text, lib, key + "_on", env={}, args=("-I",))
    rc_off, out_off = run(fault_off(text, library, fault), lib, key + "_off", env={}, args=("-I",))
    if rc_on in (0, None) or rc_off != 0:
        return "%s %s: under the fault exit %s (%s); fault off exit %s (%s)" % (
            fault, name, rc_on, tail(out_on, 1), rc_off, tail(out_off, 1))
    return None


def standalone_runs(findings, library, folder):
    """(scripts, none, bad) of the standalone scripts of `library`'s faults (standalone_scripts),
    each run under its fault and with it off in a lonely folder under `folder` (on_and_off):
    `bad` lists those that did not fail under the fault or pass without it. A script whose check
    imports torch as the peer (test_interop's round trips) costs an import of torch, about 1 s:
    one per fault and check stands for the others, which differ from it in their arguments only
    (issue 22)."""
    lib = lonely_folder(folder)
    scripts, none = standalone_scripts(findings, library)
    items, peers = [], set()
    for (fault, test), (_, text) in sorted(scripts.items()):
        if "[torch-" in test:
            if (fault, test.split("[")[0]) in peers:
                continue
            peers.add((fault, test.split("[")[0]))
        items.append(((library, fault, test), text))
    bad = [b for b in run_many(lambda item: on_and_off(item, lib), items) if b]
    return scripts, none, bad
