"""Resolve a target spec string to a Target.

Specs: `ref`, `ref:fault=NAME[,role=R]`, `ref@cuda[:fault=NAME[,role=R]]` (ref's CUDA tensors on a CUDA
runtime), `pyref`, `pyref:fault=NAME[,role=R]`, `pyref@cuda[:fault=NAME[,role=R]]` (pyref's device arrays on a
CUDA runtime), `numpy`, `torch`, `torch@cuda` (torch's CUDA tensors), `module:attr`, `path/to/file.py:attr`,
any importable module with `from_dlpack` (generic target), or `module@cuda`: that module's from_dlpack judged as a
CUDA consumer (targets/generic_cuda.py).

`load()` imports the library and must only run in a child process. The parent calls `probe()`,
which runs `python -m dlconform.targets.loader SPEC` in a subprocess and reads one JSON line.
"""
import importlib
import importlib.machinery
import importlib.util
import json
import os
import signal
import subprocess
import sys

from .base import ROLES, Target, TargetError

#: the built-in targets, in the default run's order: name -> (the adapter's module, its class,
#: the module the library needs, checked before anything is imported; None for ours)
BUILTIN = {
    "ref": ("dlconform.targets.ref", "RefTarget", None),
    "pyref": ("dlconform.targets.pyref_target", "PyrefTarget", None),
    "numpy": ("dlconform.targets.numpy_target", "NumpyTarget", "numpy"),
    "torch": ("dlconform.targets.torch_target", "TorchTarget", "torch"),
    "tvm_ffi": ("dlconform.targets.tvm_ffi_target", "TvmFfiTarget", "tvm_ffi"),
    "pyarrow": ("dlconform.targets.pyarrow_target", "PyarrowTarget", "pyarrow"),
    "mpi4py": ("dlconform.targets.mpi4py_target", "Mpi4pyTarget", "mpi4py"),
    "nanobind": ("dlconform.targets.nanobind_target", "NanobindTarget", "dlconform._nanobind"),
    "onnxruntime": ("dlconform.targets.onnxruntime_target", "OnnxruntimeTarget", "onnxruntime"),
    "jax": ("dlconform.targets.jax_target", "JaxCpuTarget", "jax"),
}
#: the built-in targets of a device (`NAME@DEVICE`, judged by `--device`) whose adapter is not
#: their CPU one: libraries whose tensors live on the GPU alone (cupy), or whose GPU arrays a
#: different adapter makes (jax: `jax` is jax_target's, `jax@cuda` cuda_libs')
DEVICE_ONLY = {
    "cupy": ("dlconform.targets.cuda_libs", "CupyTarget", "cupy"),
    "jax": ("dlconform.targets.cuda_libs", "JaxTarget", "jax"),
}
#: the targets that take a built-in fault (`NAME:fault=FAULT`)
WITH_FAULTS = ("ref", "pyref")
#: the devices a built-in target may name (`NAME@DEVICE`, before its options): ref@cuda, pyref@cuda,
#: torch@cuda, and every device-only target's cupy@cuda, jax@cuda
DEVICES = dict({"ref": ("cuda",), "pyref": ("cuda",), "torch": ("cuda",)}, **{name: ("cuda",) for name in DEVICE_ONLY})


def _registered(name, device=None):
    """(adapter module, class, library module) of a built-in name, on `device` (None: the CPU)."""
    if device and name in DEVICE_ONLY:
        return DEVICE_ONLY[name]
    return BUILTIN.get(name) or DEVICE_ONLY[name]


def _exc_name(e):
    return type(e).__name__


def _split(spec):
    """(built-in name, its options) of a built-in spec; (None, None) for any other spec. ref and
    pyref take `fault=NAME` (a built-in fault) and `role=producer|consumer` (the target offers
    that role alone: a fault's checks of its own side), joined by commas:
    `ref:fault=NAME,role=consumer`. `ref@cuda`, `pyref@cuda`: the reference on a CUDA device (option device="cuda")."""
    name, _, rest = spec.partition(":")
    name, at, device = name.partition("@")
    if name in DEVICE_ONLY and name not in BUILTIN and not at:
        return None, None  # plain `cupy`: the generic target
    if (name not in BUILTIN and name not in DEVICE_ONLY) or (rest and name not in WITH_FAULTS):
        return None, None
    if at and device not in DEVICES.get(name, ()):
        raise TargetError("%s has no device %r (%s)" % (
            name, device, "its devices: " + ", ".join(DEVICES[name]) if name in DEVICES else
            "built-in targets with a device: " + ", ".join("%s@%s" % (n, d) for n in sorted(DEVICES)
                                                            for d in DEVICES[n])))
    options = {"device": device} if at else {}
    for part in filter(None, rest.split(",")):
        key, eq, value = part.partition("=")
        if key not in ("fault", "role") or not eq or not value or key in options or (
                key == "role" and value not in ROLES):
            raise TargetError("bad %s spec %r (expected %s, %s:fault=NAME or %s:fault=NAME,role=producer|consumer)"
                              % (name, spec, name, name, name))
        options[key] = value
    return name, options


def _generic_device(spec):
    """Whether spec is a generic target's device variant, `MODULE@DEVICE` (not a built-in name,
    no options); a bad device is generic_cuda.split()'s TargetError when the spec is loaded."""
    return ":" not in spec and "@" in spec


def construction(spec):
    """(import lines, expression) that give the target of `spec` in a reproducer script."""
    name, options = _split(spec)
    if name is not None:
        module, cls, _ = _registered(name, options.get("device"))
        args = ", ".join("%s=%r" % kv for kv in sorted(options.items()))
        return ("from %s import %s" % (module, cls),), "%s(%s)" % (cls, args)
    if _generic_device(spec):
        return ("from dlconform.targets.generic_cuda import GenericCudaTarget",), "GenericCudaTarget(%r)" % spec
    if ":" not in spec:
        return ("from dlconform.targets.generic import GenericTarget",), "GenericTarget(%r)" % spec
    return ("from dlconform.targets.loader import load",), "load(%r)" % spec


def _load_file(path, attr):
    if not os.path.isfile(path):
        raise TargetError("no adapter file %r" % path)
    modname = "dlconform_adapter_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(path))
    try:
        spec = importlib.util.spec_from_file_location(modname, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[modname] = module
        spec.loader.exec_module(module)
    except BaseException as e:  # SystemExit and friends from user code too
        sys.modules.pop(modname, None)
        raise TargetError("cannot load adapter file %r (%s: %s)"
                          % (path, _exc_name(e), str(e).splitlines()[0] if str(e) else ""))
    return module


def _instantiate(obj, spec):
    try:
        if isinstance(obj, Target):
            inst = obj
        elif isinstance(obj, type) and issubclass(obj, Target):
            inst = obj()
        elif callable(obj):
            inst = obj()
        else:
            raise TargetError("adapter %r is not a Target subclass or factory" % spec)
    except TargetError:
        raise
    except BaseException as e:
        raise TargetError("adapter %r failed to start (%s: %s)" % (spec, _exc_name(e), e))
    if not hasattr(inst, "roles") or not hasattr(inst, "make"):
        raise TargetError("adapter %r did not give a Target (got %s)" % (spec, type(inst).__name__))
    return inst


def load(spec, check_available=True):
    """The Target for spec; TargetError with a one-line reason otherwise."""
    if not spec or not isinstance(spec, str):
        raise TargetError("empty target spec")
    name, options = _split(spec)
    if name is not None:
        module, cls, _ = _registered(name, options.get("device"))
        target = getattr(importlib.import_module(module), cls)(**options)
    elif ":" in spec:
        left, attr = spec.rsplit(":", 1)
        if not left or not attr:
            raise TargetError("bad target spec %r (expected module:attr or file.py:attr)" % spec)
        if left.endswith(".py") or os.sep in left:
            module = _load_file(left, attr)
        else:
            module = _import(left)
        if not hasattr(module, attr):
            raise TargetError("%r has no attribute %r" % (left, attr))
        target = _instantiate(getattr(module, attr), spec)
    elif _generic_device(spec):
        from .generic_cuda import GenericCudaTarget, split

        target = GenericCudaTarget(spec, _import(split(spec)[0]))
    else:
        from .generic import GenericTarget

        target = GenericTarget(spec, _import(spec))
    target.spec = spec  # what load() needs to give this target again (the reproducers' `T`)
    if check_available:
        try:
            ok, reason = target.available()
        except BaseException as e:
            ok, reason = False, "available() raised %s: %s" % (_exc_name(e), e)
        if not ok:
            raise TargetError(reason or "not available")
    return target


def _import(name):
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError) as e:
        raise TargetError("cannot import module %r (%s)" % (name, _exc_name(e)))
    if found is None:
        raise TargetError("cannot import module %r (ModuleNotFoundError)" % name)
    try:
        return importlib.import_module(name)
    except BaseException as e:
        raise TargetError("cannot import module %r (%s: %s)"
                          % (name, _exc_name(e), str(e).splitlines()[0] if str(e) else ""))


def library_module(spec):
    """The module a run of `spec` imports first (the library, or ref's and pyref's own), for the
    runner's warm parent to import once; None where the spec names a file."""
    name = spec.partition(":")[0].partition("@")[0]
    if name in BUILTIN or name in DEVICE_ONLY:
        return _registered(name)[2] or _registered(name)[0]
    if os.sep in spec or name.endswith(".py"):
        return None
    return name


def describe_status(returncode):
    """'killed by SIGSEGV' / 'exit status 3' for a child's return code."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return "killed by %s" % signal.Signals(-returncode).name
        except ValueError:
            return "killed by signal %d" % -returncode
    return "exit status %d" % returncode


def info(spec):
    """What probe() reports, computed in this process."""
    try:
        t = load(spec)
        versions = t.versions()
        return {"ok": True, "reason": "", "roles": sorted(t.roles),
                "versions": {k: str(v) for k, v in (versions or {}).items()}}
    except TargetError as e:
        return {"ok": False, "reason": str(e) or "unavailable", "roles": [], "versions": {}}
    except BaseException as e:
        return {"ok": False, "reason": "%s: %s" % (_exc_name(e), e), "roles": [], "versions": {}}


def quick_check(spec, python=None):
    """A reason when spec certainly cannot load (decided without importing), else None."""
    if python not in (None, sys.executable):
        return None
    try:
        builtin = _split(spec)[0] is not None
    except TargetError as e:  # a built-in spec with a bad option or device: its own line
        return str(e)
    if builtin or ":" in spec:
        mod = BUILTIN[spec][2] if spec in BUILTIN else None
        return None if mod is None else _not_found(mod, mod)
    if _generic_device(spec):
        from .generic_cuda import split

        try:
            spec = split(spec)[0]
        except TargetError as e:
            return str(e)
    return _not_found(spec.split(".")[0], spec)


def _not_found(module, name):
    """Why `module` cannot be imported (told as module `name`) when find_spec says so, else None.
    The caller's folder counts: the children have it on their path (runner.child_env), as
    `python -m dlconform` has, though the `dlconform` command's own path does not."""
    try:
        if importlib.util.find_spec(module) is None and (
                "." in module or importlib.machinery.PathFinder.find_spec(module, [os.getcwd()]) is None):
            return "cannot import module %r (ModuleNotFoundError)" % name
    except (ImportError, ValueError) as e:
        return "cannot import module %r (%s)" % (name, _exc_name(e))
    return None


def probe(spec, python=None, env=None, timeout=120, cwd=None, warm=None):
    """Load spec in a subprocess; {"ok", "reason", "roles", "versions"}. Never raises.
    warm: a function of the timeout giving (returncode, stdout, stderr) of the same probe run
    in a child of the target's warm parent (runner.SharedZygote.probe), None when it could not
    (a fresh interpreter then), False when it took longer than `timeout`."""
    reason = quick_check(spec, python)
    if reason:
        return {"ok": False, "reason": reason, "roles": [], "versions": {}}
    got = warm(timeout) if warm is not None else None
    if got is False:
        return {"ok": False, "reason": "loading took longer than %ds" % timeout, "roles": [], "versions": {}}
    if got is not None:
        return answer(*got)
    python = python or sys.executable
    try:
        proc = subprocess.run(
            [python, "-m", "dlconform.targets.loader", spec],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd,
            timeout=timeout, check=False, start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        return {"ok": False, "reason": "loading took longer than %ds" % timeout, "roles": [], "versions": {}}
    except OSError as e:
        return {"ok": False, "reason": "cannot run %s (%s)" % (python, e), "roles": [], "versions": {}}
    return answer(proc.returncode, proc.stdout.decode(errors="replace"), proc.stderr.decode(errors="replace"))


def answer(returncode, stdout, stderr):
    """probe()'s answer from how `python -m dlconform.targets.loader SPEC` ended."""
    for line in reversed(stdout.splitlines()):
        if line.startswith("{"):
            try:
                data = json.loads(line)
                if isinstance(data, dict) and "ok" in data:
                    return data
            except ValueError:
                pass
    tail = stderr.strip().splitlines()
    why = describe_status(returncode)
    return {"ok": False, "reason": "loading the target crashed (%s)%s" % (why, (": " + tail[-1][:200]) if tail else ""),
            "roles": [], "versions": {}}


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m dlconform.targets.loader SPEC", file=sys.stderr)
        return 2
    sys.stdout.flush()
    print(json.dumps(info(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
