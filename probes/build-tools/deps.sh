#!/bin/sh
# Installs what a step needs, and only what is missing.
#   deps.sh build   what `make conformance` needs: a compiler, Python headers, pytest, hypothesis
#   deps.sh test    the same plus what `make test` checks with: the frameworks (numpy, torch),
#                   packaging (version order in the matrix), flake8 (make lint) and, for the matrix page's browser
#                   test, Debian's chromium and nodejs/npm and playwright-core from npm under
#                   reports/.browser (never a downloaded browser)
# Without root it prints the exact apt-get line and stops with status 1.
set -eu
cd "$(dirname "$0")/../.."
build="gcc make python3-dev python3-pytest python3-hypothesis"
case "${1:-build}" in
  build) pkgs=$build ;;
  test)  pkgs="$build python3-numpy python3-torch python3-packaging python3-flake8 chromium"
         # npm from Debian only where none is on PATH: a machine's own Node.js (nodesource's
         # bundles npm) conflicts with Debian's npm package
         command -v npm >/dev/null 2>&1 || pkgs="$pkgs nodejs npm" ;;
  *) echo "deps.sh: unknown set '$1' (build or test)" >&2; exit 2 ;;
esac
command -v dpkg-query >/dev/null 2>&1 || exit 0   # not Debian: the user provides the tools
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
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
if [ "${1:-build}" = test ] && [ ! -d reports/.browser/node_modules/playwright-core ]; then
  echo "dlconform: installing playwright-core under reports/.browser"
  npm install --prefix reports/.browser --no-audit --no-fund --silent playwright-core
fi
