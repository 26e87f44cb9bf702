"""Builds dlconform's two C extensions and maps the suites into the package.

The project's metadata is in pyproject.toml. This file says what only code can say:
- the extensions dlconform._probe (probes/probe) and dlconform._ref (probes/ref), both with
  probes/check*.c, compiled as C11;
- where DLPack's dlpack.h (1.3 or newer) comes from, in this order:
  1. DLCONFORM_INCLUDE: a folder holding dlpack/dlpack.h;
  2. the system's /usr/include/dlpack/dlpack.h (Debian's libdlpack-dev) when it is 1.3 or newer;
  3. probes/build-tools/dlpack_header.sh, which fetches Debian sid's libdlpack-dev into
     build/include (as `make` does).
  Each stops the build with one line saying what was wrong;
- the repository's suites/ installed as the package dlconform.suites, with the catalogue.
"""
import glob
import os
import re
import subprocess
import sys

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
WANT = (1, 3)


def header_version(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    found = [re.search(r"#define\s+DLPACK_%s_VERSION\s+(\d+)" % part, text) for part in ("MAJOR", "MINOR")]
    return tuple(int(m.group(1)) for m in found) if all(found) else None


def fail(message):
    sys.exit("dlconform: %s" % message)


def dlpack_include():
    """The include folder that holds dlpack/dlpack.h, 1.3 or newer."""
    given = os.environ.get("DLCONFORM_INCLUDE")
    if given:
        path = os.path.join(given, "dlpack", "dlpack.h")
        if not os.path.isfile(path):
            fail("DLCONFORM_INCLUDE=%s has no dlpack/dlpack.h" % given)
        version = header_version(path)
        if version is None or version < WANT:
            fail("DLCONFORM_INCLUDE=%s: dlpack.h is %s, dlconform needs 1.3 or newer" % (given, version))
        return given
    system = "/usr/include/dlpack/dlpack.h"
    if os.path.isfile(system) and (header_version(system) or (0, 0)) >= WANT:
        return "/usr/include"
    fetched = os.path.join(HERE, "build", "include")
    script = os.path.join(HERE, "probes", "build-tools", "dlpack_header.sh")
    if not os.path.isfile(script):
        fail("no dlpack.h 1.3: set DLCONFORM_INCLUDE to a folder holding dlpack/dlpack.h")
    if subprocess.run(["sh", script, fetched], cwd=HERE).returncode != 0:
        fail("no dlpack.h 1.3: install libdlpack-dev 1.3 or set DLCONFORM_INCLUDE "
             "(fetching Debian's package failed; see above)")
    return fetched


class BuildPy(build_py):
    """Ships the fuzzer's shared seeds (fuzz/corpus/seeds) in the package as
    dlconform/suites/seeds: suites/test_fuzz_seeds.py judges them wherever the suites run."""

    def run(self):
        super().run()
        target = os.path.join(self.build_lib, "dlconform", "suites", "seeds")
        os.makedirs(target, exist_ok=True)
        for path in sorted(glob.glob(os.path.join("fuzz", "corpus", "seeds", "*"))):
            self.copy_file(path, os.path.join(target, os.path.basename(path)))


class BuildExt(build_ext):
    """Finds dlpack.h when the extensions are built, not when setup.py is read."""

    def build_extensions(self):
        include = dlpack_include()
        for ext in self.extensions:
            ext.include_dirs.insert(0, include)
        super().build_extensions()


def extension(name, folder):
    sources = sorted(glob.glob(os.path.join("probes", folder, "*.c")) + glob.glob(os.path.join("probes", "check*.c")))
    return Extension("dlconform." + name, sources=sources, include_dirs=["probes"],
                     define_macros=[("_GNU_SOURCE", None)], libraries=["pthread"],
                     extra_compile_args=["-std=c11", "-O2", "-fvisibility=hidden"])


packages = find_packages("harness") + ["dlconform.suites"]
packages += ["dlconform.suites." + p for p in find_packages("suites")]
setup(
    packages=packages,
    package_dir={"": "harness", "dlconform.suites": "suites"},
    package_data={"dlconform.suites": ["clauses.json", "clauses.md"]},
    ext_modules=[extension("_probe", "probe"), extension("_ref", "ref")],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
