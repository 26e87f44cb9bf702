#!/bin/sh
# Puts a DLPack >= 1.3 header at $1/dlpack/dlpack.h (default build/include).
# Uses the system header when it is already 1.3 or newer; otherwise downloads Debian
# sid's libdlpack-dev with a private apt state, so the host's apt setup is untouched.
# dlpack.h is never committed: it always comes from Debian's package at build time.
set -eu
dest=${1:-build/include}
want_minor=3
hdr_version() { # prints "major minor" of a dlpack.h
  awk '/#define DLPACK_MAJOR_VERSION/{ma=$3} /#define DLPACK_MINOR_VERSION/{mi=$3} END{print ma+0, mi+0}' "$1"
}
new_enough() { set -- $(hdr_version "$1"); [ "$1" -gt 1 ] || { [ "$1" -eq 1 ] && [ "$2" -ge $want_minor ]; }; }

[ -f "$dest/dlpack/dlpack.h" ] && new_enough "$dest/dlpack/dlpack.h" && exit 0
mkdir -p "$dest/dlpack"
if [ -f /usr/include/dlpack/dlpack.h ] && new_enough /usr/include/dlpack/dlpack.h; then
  cp /usr/include/dlpack/dlpack.h "$dest/dlpack/dlpack.h"
  echo "dlpack.h: using the system header ($(hdr_version /usr/include/dlpack/dlpack.h | tr ' ' .))"
  exit 0
fi
command -v apt-get >/dev/null || { echo "dlpack.h: need DLPack >= 1.$want_minor; install libdlpack-dev 1.3 or put dlpack.h at $dest/dlpack/" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/dlc-dlpack.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The mirror the host's own apt sources name (deb822 or one-line form).
mirror=$(grep -rhoE '(URIs:|^deb)[[:space:]]+[^[:space:]]+debian/?' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null \
         | grep -v security | head -n1 | awk '{print $2}')
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
mkdir -p "$work/lists/partial" "$work/cache/archives/partial"
echo "deb $mirror sid main" > "$work/sources.list"
O="-o Dir::Etc::sourcelist=$work/sources.list -o Dir::Etc::sourceparts=- -o Dir::State::Lists=$work/lists -o Dir::Cache=$work/cache -o Debug::NoLocking=1 -o APT::Sandbox::User=root"
apt-get $O -qq update
(cd "$work" && apt-get $O -qq download libdlpack-dev)
dpkg -x "$work"/libdlpack-dev_*.deb "$work/x"
new_enough "$work/x/usr/include/dlpack/dlpack.h" || { echo "dlpack.h: sid's libdlpack-dev is older than 1.$want_minor" >&2; exit 1; }
cp "$work/x/usr/include/dlpack/dlpack.h" "$dest/dlpack/dlpack.h"
echo "dlpack.h: fetched Debian sid libdlpack-dev ($(hdr_version "$dest/dlpack/dlpack.h" | tr ' ' .))"
