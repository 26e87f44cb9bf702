"""Python, platform, library and dlpack header versions.

`python3 -m dlconform.environment [spec ...]` prints the environment of that interpreter as JSON;
the runner calls it in a subprocess so that the parent never imports a framework.
"""
import json
import platform
import subprocess
import sys

from . import REPO_DIR, __version__

KNOWN_LIBRARIES = ("numpy", "torch", "tvm_ffi", "pyarrow", "mpi4py")


def _library_version(name):
    import importlib.util

    try:
        if importlib.util.find_spec(name) is None:
            return None
    except (ImportError, ValueError):
        return None
    try:
        from importlib import metadata

        return metadata.version(name)
    except Exception:
        pass
    try:
        mod = __import__(name)
        return str(getattr(mod, "__version__", "unknown"))
    except BaseException as e:  # a broken install must not end the probe
        return "unimportable (%s)" % type(e).__name__


def header_version():
    try:
        from . import _probe

        v = getattr(_probe, "HEADER_VERSION", None)
        return list(v) if v is not None else None
    except Exception:
        return None


def git_revision(repo=REPO_DIR):
    try:
        out = subprocess.run(
            ["git", "-C", repo, "rev-parse", "HEAD"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10, check=False,
        )
        rev = out.stdout.decode().strip()
        if out.returncode != 0 or not rev:
            return None
        dirty = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=10, check=False,
        )
        return rev + ("-dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return None


def local(libraries=KNOWN_LIBRARIES, header=True):
    """The environment of this interpreter. Reading library versions and the header version
    imports modules, so the harness parent calls this only through collect() (a subprocess)."""
    return {
        "python": {
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "executable": sys.executable,
        },
        "platform": platform.platform(),
        "machine": platform.machine(),
        "libraries": {name: _library_version(name) for name in libraries},
        "dlpack_header": header_version() if header else None,
        "dlconform": {"version": __version__, "git": git_revision()},
    }


def collect(python=None, libraries=KNOWN_LIBRARIES, env=None, timeout=120):
    """The environment of interpreter `python`, read in a subprocess; never raises."""
    python = python or sys.executable
    try:
        proc = subprocess.run(
            [python, "-m", "dlconform.environment"] + list(libraries),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout, check=False,
        )
        if proc.returncode == 0:
            data = json.loads(proc.stdout.decode().strip().splitlines()[-1])
            data["dlconform"]["git"] = data["dlconform"].get("git") or git_revision()
            return data
        reason = "exit status %d: %s" % (proc.returncode, proc.stderr.decode(errors="replace").strip()[-300:])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError, KeyError) as e:
        reason = "%s: %s" % (type(e).__name__, e)
    data = local(libraries=(), header=False)  # never import _probe or a framework in the parent
    data["python"] = {"executable": python, "error": reason}
    return data


if __name__ == "__main__":
    print(json.dumps(local(tuple(sys.argv[1:]) or KNOWN_LIBRARIES)))
