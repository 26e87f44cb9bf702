"""Bundles the Python runtime of the embedded-CPython fuzz targets into OUT/python.

    python3 bundle.py OUT HARNESS MODULE...

OSS-Fuzz and ClusterFuzzLite build in one image and run in another (base-runner), which has
none of the builder's Python. fuzz/pyhost.c takes OUT/python as the interpreter's home when
it is there (fuzz/pyhost.h), so the targets carry, under OUT/python:
- lib/libpythonX.Y.so.1.0: the interpreter this python3 runs on (built --enable-shared; the
  targets find it through their DT_RPATH $ORIGIN/python/lib, see build.sh);
- lib/pythonX.Y/: its standard library and lib-dynload, less the test suites, IDLE, tkinter
  and ensurepip;
- site/: the top-level packages the named MODULEs import, with everything they import in
  turn that is not the standard library or dlconform (HARNESS is shipped beside, as OUT/harness);
  a package is copied whole, with the `NAME.libs` folder auditwheel puts beside it, so that
  what it imports later (a submodule, a lazy import) is there too;
- lib/: every shared library those extension modules and libpython need (ldd), except
  glibc's own, which the runner has. The targets' DT_RPATH covers them: it is searched for
  the dependencies of any object without a RUNPATH of its own.
Prints one line per part with its size. Exit status 1, with one line, when a module cannot
be imported or the interpreter has no shared libpython.
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig

# the C library's own objects: the runner has them, and they must match its loader
GLIBC = ("linux-vdso.so", "ld-linux", "libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so",
         "libutil.so", "libresolv.so", "libanl.so", "libmvec.so")
SKIP_STDLIB = {"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages",
               "dist-packages", "__pycache__", "pydoc_data"}

WHAT_IMPORTS = r"""
import importlib, json, sys
for m in sys.argv[1:]:
    importlib.import_module(m)
print(json.dumps({"files": [getattr(m, "__file__", None) for m in list(sys.modules.values())],
                  "path": sys.path}))
"""


def size(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files
                     if not os.path.islink(os.path.join(root, f)))
    return "%.1f MB" % (total / 1e6)


def copy_stdlib(dest):
    src = sysconfig.get_paths()["stdlib"]
    shutil.copytree(src, dest, symlinks=False, ignore=lambda d, names: [
        n for n in names if n in SKIP_STDLIB or n.startswith("config-") and d == src])
    dynload = os.path.join(sysconfig.get_paths()["platstdlib"], "lib-dynload")
    if os.path.isdir(dynload) and not os.path.isdir(os.path.join(dest, "lib-dynload")):
        shutil.copytree(dynload, os.path.join(dest, "lib-dynload"))


def imported(modules, harness):
    """(files of every module the MODULEs import, the sys.path they were found on)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([harness] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    p = subprocess.run([sys.executable, "-c", WHAT_IMPORTS] + modules, env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if p.returncode != 0:
        last = (p.stderr.decode(errors="replace").strip().splitlines() or ["?"])[-1]
        sys.exit("bundle: cannot import %s: %s" % (" ".join(modules), last))
    doc = json.loads(p.stdout.decode().strip().splitlines()[-1])
    return [f for f in doc["files"] if f], [os.path.realpath(e) for e in doc["path"] if e]


def top_levels(files, path, harness):
    """{sys.path entry: {top-level name}} of the imported files outside the stdlib and harness."""
    stdlib = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}
    harness = os.path.realpath(harness)
    tops = {}
    for f in map(os.path.realpath, files):
        entry = max((e for e in path if f.startswith(e + os.sep)), key=len, default=None)
        if entry is None or entry == harness or entry.startswith(harness + os.sep):
            continue
        if any(entry == s or entry.startswith(s + os.sep) for s in stdlib) and "-packages" not in entry:
            continue  # the stdlib, lib-dynload: copied with the stdlib; not its site-packages
        tops.setdefault(entry, set()).add(os.path.relpath(f, entry).split(os.sep)[0])
    return tops


def copy_site(tops, dest):
    os.makedirs(dest, exist_ok=True)
    for entry, names in sorted(tops.items()):
        for name in sorted(names):
            for n in (name, os.path.splitext(name)[0] + ".libs"):
                src = os.path.join(entry, n)
                if os.path.isdir(src) and not os.path.exists(os.path.join(dest, n)):
                    shutil.copytree(src, os.path.join(dest, n), ignore=shutil.ignore_patterns("__pycache__"))
                elif os.path.isfile(src):
                    shutil.copy2(src, dest)


def needed(objects):
    """{soname: path} of the shared libraries the objects need, glibc's own left out."""
    found = {}
    for obj in objects:
        out = subprocess.run(["ldd", obj], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout.decode()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[1] == "=>" and parts[2].startswith("/"):
                if not parts[0].startswith(GLIBC):
                    found.setdefault(parts[0], parts[2])
            elif len(parts) >= 3 and "not found" in line:
                sys.exit("bundle: %s needs %s, which is not found" % (obj, parts[0]))
    return found


def shared_objects(root):
    for d, _, files in os.walk(root):
        for f in files:
            if ".so" in f and not os.path.islink(os.path.join(d, f)):
                yield os.path.join(d, f)


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: bundle.py OUT HARNESS MODULE...")
    out, harness, modules = argv[0], argv[1], argv[2:]
    v = sysconfig.get_config_var
    if not v("Py_ENABLE_SHARED"):
        sys.exit("bundle: %s has no shared libpython (configure --enable-shared): the targets link it" % sys.executable)
    home = os.path.join(out, "python")
    lib = os.path.join(home, "lib")
    shutil.rmtree(home, ignore_errors=True)
    os.makedirs(lib)
    libpython = os.path.join(v("LIBDIR"), v("INSTSONAME"))
    shutil.copy2(os.path.realpath(libpython), os.path.join(lib, v("INSTSONAME")))
    stdlib = os.path.join(lib, "python%d.%d" % sys.version_info[:2])
    copy_stdlib(stdlib)
    print("bundle: python %s standard library: %s" % (sys.version.split()[0], size(stdlib)))
    files, path = imported(modules, harness)
    site = os.path.join(home, "site")
    copy_site(top_levels(files, path, harness), site)
    print("bundle: %s and what they import: %s in %s" % (" ".join(modules), size(site), sorted(os.listdir(site))))
    libs = needed([os.path.join(lib, v("INSTSONAME"))] + list(shared_objects(stdlib)) + list(shared_objects(site)))
    for soname, src in sorted(libs.items()):
        if not os.path.exists(os.path.join(lib, soname)):
            shutil.copy2(os.path.realpath(src), os.path.join(lib, soname))
    print("bundle: shared libraries: %s" % " ".join(sorted(libs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
