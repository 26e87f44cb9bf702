#!/bin/sh
# Installs the Debian packages a step needs, and only the missing ones.
#   deps.sh build   what `make conformance` needs: a compiler, Python headers, pytest, hypothesis
#   deps.sh test    the same plus the frameworks `make test` checks against (numpy, torch)
# Without root it prints the exact apt-get line and stops with status 1.
set -eu
case "${1:-build}" in
  build) pkgs="gcc make python3-dev python3-pytest python3-hypothesis" ;;
  test)  pkgs="gcc make python3-dev python3-pytest python3-hypothesis python3-numpy python3-torch" ;;
  *) echo "deps.sh: unknown set '$1' (build or test)" >&2; exit 2 ;;
esac
command -v dpkg-query >/dev/null 2>&1 || exit 0   # not Debian: the user provides the tools
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
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
