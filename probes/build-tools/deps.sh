#!/bin/sh
# Installs what a step needs, and only what is missing.
#   deps.sh build   what `make conformance` needs: a C compiler, make, the headers of the
#                   Python under test ($PYTHON), pytest and hypothesis importable by it
#   deps.sh test    the same plus what `make test` checks with: the frameworks (numpy, torch),
#                   packaging (version order in the matrix), flake8 (make lint) and, for the matrix page's browser
#                   test, Debian's chromium and nodejs/npm and playwright-core from npm under
#                   reports/.browser (never a downloaded browser)
# Each need is tested as a capability (`$PYTHON -c 'import pytest'`, a compiler on PATH), so a
# virtualenv's pip-installed pytest or a GPU machine's own toolchain counts; only what is
# really missing becomes a Debian package to install. Without root it prints the exact
# apt-get line and stops with status 1.
set -eu
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-python3}
set_=${1:-build}
case $set_ in build|test) ;; *) echo "deps.sh: unknown set '$set_' (build or test)" >&2; exit 2 ;; esac
missing=""
pip_missing=""
need() { # need PACKAGE TEST...: PACKAGE is missing when the test command fails
  pkg=$1; shift
  "$@" >/dev/null 2>&1 || missing="$missing $pkg"
}
# Debian's python3-* packages serve the interpreters that read Debian's dist-packages (Debian's
# Python, and virtualenvs made from it with --system-site-packages); another interpreter needs
# the module installed into it. One run of $PYTHON answers for every module (found, not
# imported: importing hypothesis alone takes 0.3 s, paid by every `make conformance`) and for
# its headers: "debian" when it reads Debian's dist-packages, "headers" when Python.h is there,
# then the names of the modules it finds.
found=$("$PYTHON" -c '
import importlib.util, os, sys, sysconfig
print("debian" if "/usr/lib/python3/dist-packages" in sys.path else "other")
print("headers" if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else "none")
for m in sys.argv[1:]:
    if importlib.util.find_spec(m) is not None:
        print(m)
' pytest hypothesis numpy torch packaging flake8 2>/dev/null) || found=""
has() { printf '%s\n' "$found" | grep -qx "$1"; }
need_module() { # need_module PACKAGE MODULE
  has "$2" && return 0
  if has debian; then missing="$missing $1"; else pip_missing="$pip_missing $2"; fi
}
has_headers() { has headers; }
need gcc sh -c 'command -v "${CC:-cc}" || command -v gcc'
need make command -v make
need python3-dev has_headers
need_module python3-pytest pytest
need_module python3-hypothesis hypothesis
if [ "$set_" = test ]; then
  need_module python3-numpy numpy
  need_module python3-torch torch
  need_module python3-packaging packaging
  need_module python3-flake8 flake8
  need chromium sh -c 'command -v chromium'
  # npm from Debian only where none is on PATH: a machine's own Node.js (nodesource's
  # bundles npm) conflicts with Debian's npm package
  command -v npm >/dev/null 2>&1 || missing="$missing nodejs npm"
fi
if [ -n "$pip_missing" ]; then
  echo "dlconform: $PYTHON lacks the modules$pip_missing; install them into it" \
       "(for a virtualenv: $PYTHON -m pip install$pip_missing)" >&2
  exit 1
fi
if [ -n "$missing" ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "dlconform needs what these Debian packages provide, and this is no Debian system:$missing" >&2
    exit 1
  fi
  line="apt-get install -y --no-install-recommends$missing"
  if [ "$(id -u)" -ne 0 ]; then
    echo "dlconform needs Debian packages that are not installed. As root, run:" >&2
    echo "  apt-get update && $line" >&2
    exit 1
  fi
  echo "dlconform: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  # Refresh the lists only when a package is unknown to them (a fresh machine has none).
  for p in $missing; do
    apt-cache show "$p" >/dev/null 2>&1 || { apt-get update -qq; break; }
  done
  $line -qq >/dev/null || { apt-get update -qq && $line -qq >/dev/null; }
fi
if [ "$set_" = test ] && [ ! -d reports/.browser/node_modules/playwright-core ]; then
  echo "dlconform: installing playwright-core under reports/.browser"
  npm install --prefix reports/.browser --no-audit --no-fund --silent playwright-core
fi
