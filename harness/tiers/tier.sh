#!/bin/sh
# Debian tiers: a chroot per Debian suite with that suite's own frameworks, built with mmdebstrap.
#
#   tier.sh build TIER         build $TIER_DIR/TIER, or reuse it when its stamp is valid
#   tier.sh conformance TIER   build if needed, then build the probes and run the suite inside;
#                              reports land in $OUT/TIER (exit status: the runner's)
#   tier.sh bench TIER         the same for `dlconform bench` (REPEATS, TARGETS); reports in $OUT/TIER
#   tier.sh fuzz-ci TIER       build if needed, add the fuzz toolchain layer when missing, build the
#                              fuzz targets with the tier's python3 and run `make fuzz-ci` inside
#                              (TARGET, FUZZ_SECONDS, FUZZ_MIN_SECONDS, FUZZ_CI_ARGS); outputs in
#                              $OUT/TIER/fuzz, crash records merged into $OUT/TIER/results.json
#                              (exit status: fuzz-ci's; 2 for a usage, toolchain or build error)
#   tier.sh fuzz-plan TIER     print what fuzz-ci would do (tier, toolchain, known list, outputs)
#   tier.sh plan TIER          print what `build` would do: reuse, build, or rebuild: REASON
#   tier.sh check TIER         exit 0 when the tier is complete (valid stamp), 1 otherwise
#   tier.sh clean TIER         unmount what is mounted under the tier and delete it
#   tier.sh packages TIER      print the package list of the tier
#
# Environment: TIER_DIR (default ~/.cache/dlconform/tiers), MIRROR (default: the Debian mirror
# the host's apt sources name), OUT (default reports/out), TARGETS, CLAUSE (as for the host run).
# fuzz-ci: TARGET (required: validator, a consumer module, producer-NAME), FUZZ_SECONDS (60),
# FUZZ_MIN_SECONDS (10), FUZZ_CI_ARGS (extra `dlconform fuzz-ci` arguments).
#
# A tier is complete only when DIR/.dlconform-tier exists: written last, after a smoke test
# inside the chroot, it records the package versions, and it must still agree with the tier's
# dpkg database. Anything else under DIR (an interrupted build, a broken install) is unmounted,
# deleted and rebuilt, never used.
set -eu

TIERS="bookworm trixie sid"
STAMP_NAME=.dlconform-tier
STAMP_FORMAT=1
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
IN_TREE=/opt/dlconform            # where the sources go inside the tier
HEADER_STORE=/usr/local/share/dlconform/include   # a DLPack >= 1.3 header fetched by the host
CHROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { echo "tier${TIER:+ $TIER}: $*"; }
die() { echo "tier${TIER:+ $TIER}: $1" >&2; exit "${2:-1}"; }

usage_tier() {
  [ -n "${1:-}" ] || die "TIER= is required: one of $TIERS" 2
  for t in $TIERS; do [ "$1" = "$t" ] && return 0; done
  echo "tier: unknown TIER '$1' (one of: $TIERS)" >&2
  exit 2
}

packages() { # the Debian packages of a tier
  p="python3-numpy python3-torch python3-mpi4py python3-pytest python3-hypothesis python3-dev gcc make libdlpack-dev"
  # sid: nanobind-dev and g++ build the nanobind glue module (probes/nanobind) like the probes
  [ "$1" = sid ] && p="$p python3-tvm-ffi python3-pyarrow nanobind-dev python3-nanobind g++ python3-onnxruntime"
  echo "$p"
}

modules() { # the Python modules the smoke test imports, and whose versions the stamp records
  m="numpy torch mpi4py pytest hypothesis"
  [ "$1" = sid ] && m="$m tvm_ffi pyarrow nanobind onnxruntime"
  echo "$m"
}

host_mirror() { # the Debian mirror the host's own apt sources name (deb822 or one-line form)
  if [ -n "${MIRROR:-}" ]; then echo "$MIRROR"; return; fi
  m=$(grep -rhoE '(URIs:|^deb)[[:space:]]+[^[:space:]]+debian/?' /etc/apt/sources.list /etc/apt/sources.list.d 2>/dev/null \
      | grep -v security | head -n1 | awk '{print $2}') || true
  echo "${m:-http://deb.debian.org/debian}"
}

hdr_version() { # "major minor" of a dlpack.h
  awk '/#define DLPACK_MAJOR_VERSION/{ma=$3} /#define DLPACK_MINOR_VERSION/{mi=$3} END{print ma+0, mi+0}' "$1"
}
hdr_new_enough() { # DLPack >= 1.3
  [ -f "$1" ] || return 1
  # shellcheck disable=SC2046  # "major minor" splits into $1 $2
  set -- $(hdr_version "$1")
  [ "$1" -gt 1 ] || { [ "$1" -eq 1 ] && [ "$2" -ge 3 ]; }
}

# ---- mounts ------------------------------------------------------------------------------
mounts_under() { # mount points at or under $1, deepest first
  awk -v d="$1" '{ m = $2; gsub(/\\040/, " ", m); if (m == d || index(m, d "/") == 1) print m }' /proc/self/mounts | sort -r
}

unmount_all() { # unmounts everything at or under $1; fails if anything stays mounted
  [ -d "$1" ] || return 0
  _ud=$(readlink -f "$1")
  mounts_under "$_ud" | while IFS= read -r _m; do
    umount "$_m" 2>/dev/null || umount -l "$_m" 2>/dev/null || echo "tier: cannot unmount $_m" >&2
  done
  [ -z "$(mounts_under "$_ud")" ]
}

mount_api() { # /proc, /sys, /dev (unless the tier has its own device nodes) and /dev/shm
  _md=$1
  mountpoint -q "$_md/proc" || mount -t proc proc "$_md/proc"
  mountpoint -q "$_md/sys" || mount -t sysfs sysfs "$_md/sys"
  if [ ! -c "$_md/dev/null" ] && ! mountpoint -q "$_md/dev"; then
    mkdir -p "$_md/dev"; mount --bind /dev "$_md/dev"
  fi
  if ! mountpoint -q "$_md/dev/shm"; then
    mkdir -p "$_md/dev/shm"; mount -t tmpfs -o mode=1777,nosuid,nodev shm "$_md/dev/shm"
  fi
}

delete_tier() {
  _dd=$1
  [ -e "$_dd" ] || return 0
  unmount_all "$_dd" || die "something is still mounted under $_dd; not deleting it"
  rm -rf --one-file-system "$_dd"
}

# ---- stamp -------------------------------------------------------------------------------
stamp_value() { # value of KEY in stamp file $1
  awk -v k="$2" 'index($0, k "=") == 1 { print substr($0, length(k) + 2); exit }' "$1"
}

dpkg_version() { # version of package $2 installed in tier $1, empty if not installed
  dpkg-query --admindir="$1/var/lib/dpkg" -W -f='${Status}\t${Version}\n' "$2" 2>/dev/null \
    | awk -F '\t' '$1 == "install ok installed" { print $2 }'
}

stamp_problem() { # prints why tier $2 in $1 is not complete; prints nothing when it is
  d=$1 t=$2 s=$1/$STAMP_NAME
  [ -f "$s" ] || { echo "no stamp (half-built or interrupted)"; return; }
  [ "$(head -n1 "$s")" = "dlconform-tier=$STAMP_FORMAT" ] || { echo "stamp has an unknown format"; return; }
  [ "$(tail -n1 "$s")" = "complete=yes" ] || { echo "stamp is truncated"; return; }
  [ "$(stamp_value "$s" tier)" = "$t" ] || { echo "stamp is for another tier"; return; }
  [ "$(stamp_value "$s" packages)" = "$(packages "$t")" ] || { echo "package list changed"; return; }
  [ -x "$d/usr/bin/python3" ] || { echo "no /usr/bin/python3"; return; }
  hdr_new_enough "$d/usr/include/dlpack/dlpack.h" || hdr_new_enough "$d$HEADER_STORE/dlpack/dlpack.h" \
    || { echo "no DLPack >= 1.3 header"; return; }
  for p in $(packages "$t"); do
    want=$(stamp_value "$s" "pkg $p")
    [ -n "$want" ] || { echo "stamp lacks $p"; return; }
    have=$(dpkg_version "$d" "$p")
    [ "$have" = "$want" ] || { echo "$p is ${have:-not installed}, stamp says $want"; return; }
  done
}

plan() { # reuse | build | rebuild: REASON
  d=$1 t=$2
  if [ ! -e "$d" ]; then echo build; return; fi
  why=$(stamp_problem "$d" "$t")
  if [ -z "$why" ]; then echo reuse; else echo "rebuild: $why"; fi
}

write_stamp() { # $1 dir, $2 tier, $3 header source, $4 smoke-test output
  d=$1 t=$2 tmp=$1/$STAMP_NAME.tmp
  {
    echo "dlconform-tier=$STAMP_FORMAT"
    echo "tier=$t"
    echo "mirror=$(host_mirror)"
    echo "built=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "packages=$(packages "$t")"
    echo "header=$3"
    for p in $(packages "$t"); do
      v=$(dpkg_version "$d" "$p")
      [ -n "$v" ] || die "$p is not installed in $d"
      echo "pkg $p=$v"
    done
    printf '%s\n' "$4"
    echo "complete=yes"
  } > "$tmp"
  sync "$tmp" 2>/dev/null || true
  mv "$tmp" "$d/$STAMP_NAME"
}

# ---- build -------------------------------------------------------------------------------
need_root() {
  [ "$(id -u)" -eq 0 ] || die "building and entering a tier needs root (mmdebstrap, chroot, mount)"
}

ensure_mmdebstrap() {
  command -v mmdebstrap >/dev/null 2>&1 && return 0
  command -v apt-get >/dev/null 2>&1 || die "mmdebstrap is missing and there is no apt-get to install it"
  say "installing mmdebstrap"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq mmdebstrap >/dev/null 2>&1 \
    || { apt-get update -qq && apt-get install -y -qq mmdebstrap >/dev/null; } \
    || die "could not install mmdebstrap"
}

smoke() { # imports the tier's frameworks with its own python3; prints "py MODULE=VERSION" lines
  d=$1 t=$2
  # shellcheck disable=SC2046  # one argument per module
  chroot "$d" /usr/bin/env -i PATH=$CHROOT_PATH HOME=/root LANG=C.UTF-8 \
    /usr/bin/python3 - $(modules "$t") <<'EOF'
import importlib, platform, sys
print("py python=%s" % platform.python_version())
for name in sys.argv[1:]:
    mod = importlib.import_module(name)
    print("py %s=%s" % (name, getattr(mod, "__version__", "unknown")))
EOF
}

build() {
  t=$1 d=$2
  need_root
  mkdir -p "$(dirname "$d")"
  p=$(plan "$d" "$t")
  case $p in
    reuse) say "reusing $d ($(stamp_value "$d/$STAMP_NAME" built))"; return 0 ;;
    build) ;;
    *) say "$d is not a complete tier (${p#rebuild: }): deleting it and rebuilding"; delete_tier "$d" ;;
  esac
  ensure_mmdebstrap
  mirror=$(host_mirror)
  say "building into $d from $mirror"
  start=$(date +%s)
  # force-unsafe-io: dpkg skips its per-file fsync (a crash mid-build is caught by the stamp).
  mmdebstrap "$([ -n "${TIER_VERBOSE:-}" ] && echo --verbose || echo --quiet)" --variant=apt \
    --aptopt='Acquire::Check-Valid-Until "false"' --aptopt='Acquire::Languages "none"' \
    --dpkgopt=force-unsafe-io --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --include="$(packages "$t" | tr ' ' ',')" "$t" "$d" "$mirror" \
    || die "mmdebstrap failed; $d is left without a stamp and will be rebuilt next time"
  if hdr_new_enough "$d/usr/include/dlpack/dlpack.h"; then
    header="tier libdlpack-dev $(hdr_version "$d/usr/include/dlpack/dlpack.h" | tr ' ' .)"
  else # bookworm has 0.6 and trixie 1.0: the host fetches sid's 1.3 header for the probes
    sh "$REPO/probes/build-tools/dlpack_header.sh" "$d$HEADER_STORE" >/dev/null \
      || die "could not fetch a DLPack >= 1.3 header on the host"
    header="host-fetched $(hdr_version "$d$HEADER_STORE/dlpack/dlpack.h" | tr ' ' .) at $HEADER_STORE"
  fi
  mount_api "$d"
  if ! versions=$(smoke "$d" "$t"); then
    unmount_all "$d" || true
    die "smoke test failed: the tier's python3 cannot import $(modules "$t")"
  fi
  unmount_all "$d" || die "cannot unmount under $d"
  write_stamp "$d" "$t" "$header" "$versions"
  say "built in $(( $(date +%s) - start )) s, $(du -sh --one-file-system "$d" | cut -f1): $(echo "$versions" | sed 's/^py //' | tr '\n' ' ')"
}

# ---- conformance ---------------------------------------------------------------------------
copy_sources() { # the working tree's sources (tracked and untracked, not ignored) into $1
  dest=$1
  rm -rf --one-file-system "$dest"
  mkdir -p "$dest"
  if git -c safe.directory='*' -C "$REPO" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    # Files deleted from the working tree but still tracked are skipped (--ignore-failed-read).
    (cd "$REPO" && git -c safe.directory='*' ls-files -z --cached --others --exclude-standard \
       | tar --null --no-recursion --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$dest"
  else
    (cd "$REPO" && tar --exclude=./.git --exclude=./build --exclude=./reports/out --exclude='*.so' \
       --exclude='*.o' --exclude=__pycache__ --exclude=.hypothesis --exclude=.pytest_cache -cf - .) \
      | tar -xf - -C "$dest"
  fi
}

copy_reports() { # the reports of the run inside the tier, to $OUT/TIER on the host
  rm -rf "${out:?}/${t:?}"
  mkdir -p "$out/$t"
  if [ -d "$d$IN_TREE/reports/out" ]; then cp -R "$d$IN_TREE/reports/out/." "$out/$t/"; fi
  echo "$1" > "$out/$t/exit-status"
  say "runner exit status $1; reports in $out/$t"
}

abs_out() { # $OUT as an absolute path
  out=${OUT:-reports/out}
  case $out in /*) ;; *) out=$PWD/$out ;; esac
}

prepare_tree() { # sources and the DLPack >= 1.3 header into tier $1, then the probes built there
  say "copying sources to $1$IN_TREE"
  copy_sources "$1$IN_TREE"
  inc=$1$IN_TREE/build/include/dlpack
  mkdir -p "$inc"
  if hdr_new_enough "$1/usr/include/dlpack/dlpack.h"; then
    cp "$1/usr/include/dlpack/dlpack.h" "$inc/dlpack.h"
  else
    cp "$1$HEADER_STORE/dlpack/dlpack.h" "$inc/dlpack.h"
  fi
  mount_api "$1"
  env_in="/usr/bin/env -i PATH=$CHROOT_PATH HOME=/root LANG=C.UTF-8 TERM=${TERM:-dumb}"
  say "building the probes with the tier's python3"
  # shellcheck disable=SC2086
  chroot "$1" $env_in make -C "$IN_TREE" --no-print-directory build PYTHON=/usr/bin/python3 \
    || die "building the probes inside the tier failed" 2
}

conformance() {
  t=$1 d=$2
  need_root
  abs_out
  build "$t" "$d"
  prepare_tree "$d"
  say "running the suite"
  phase=suite   # from here on, any way out (Ctrl-C included) still copies what the runner wrote
  rc=0
  # shellcheck disable=SC2086,SC2016  # $env_in splits; the script is expanded inside the tier
  chroot "$d" $env_in TARGETS="${TARGETS:-}" CLAUSE="${CLAUSE:-}" PYTHONPATH="$IN_TREE/harness" \
    MODE="$cmd" REPEATS="${REPEATS:-5}" /bin/sh -c '
    cd "$1" || exit 2
    set -- --out reports/out
    for t in $TARGETS; do set -- "$@" --target "$t"; done
    mkdir -p reports/out
    [ "$MODE" != bench ] || exec /usr/bin/python3 -m dlconform bench "$@" --repeats "$REPEATS"
    [ -z "$CLAUSE" ] || set -- "$@" --clause "$CLAUSE"
    exec /usr/bin/python3 -m dlconform run "$@"' sh "$IN_TREE" || rc=$?
  phase=finished
  copy_reports "$rc"
  exit "$rc"
}

on_exit() { # every way out of build, conformance and fuzz-ci: keep partial reports, roll back
  trap - EXIT INT TERM HUP   # a toolchain install cut short (tierfuzz.sh), unmount the tier
  [ "${phase:-}" != suite ] || copy_reports "$1" || true
  [ "${phase:-}" != fuzz ] || copy_fuzz_reports "$1" || true
  [ "${phase:-}" != toolchain ] || echo "tier $TIER: fuzz toolchain install interrupted: $(fuzz_rollback)" >&2 || true
  unmount_all "$DIR" || echo "tier: some mounts under $DIR remain" >&2
}

# ---- fuzz-ci: harness/tiers/tierfuzz.sh --------------------------------------------------
# shellcheck source=harness/tiers/tierfuzz.sh
. "$HERE/tierfuzz.sh"

# ---- main --------------------------------------------------------------------------------
cmd=${1:-}
TIER=${2:-}
case $cmd in
  build|conformance|bench|fuzz-ci|fuzz-plan|plan|check|clean|packages) ;;
  *) echo "usage: tier.sh build|conformance|bench|fuzz-ci|fuzz-plan|plan|check|clean|packages TIER (one of: $TIERS)" >&2; exit 2 ;;
esac
usage_tier "$TIER"
case $cmd in fuzz-ci|fuzz-plan) fuzz_usage ;; esac
TIER_DIR=${TIER_DIR:-${HOME:-/root}/.cache/dlconform/tiers}
case $TIER_DIR in /*) ;; *) TIER_DIR=$PWD/$TIER_DIR ;; esac
DIR=${TIER_DIR%/}/$TIER

case $cmd in
  packages) packages "$TIER" ;;
  plan) plan "$DIR" "$TIER" ;;
  fuzz-plan) fuzz_plan ;;
  check) why=$(stamp_problem "$DIR" "$TIER"); [ -z "$why" ] || { echo "tier $TIER: $why" >&2; exit 1; } ;;
  clean) need_root; delete_tier "$DIR" ;;
  build|conformance|bench|fuzz-ci)
    mkdir -p "$TIER_DIR"
    # One build or run per tier at a time.
    exec 9>"$TIER_DIR/.$TIER.lock"
    flock -n 9 || { say "another build or run holds $TIER_DIR/.$TIER.lock; waiting"; flock 9; }
    # Whatever happens (failure, Ctrl-C), nothing stays mounted under the tier.
    trap 'on_exit $?' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    trap 'exit 129' HUP
    case $cmd in
      build) build "$TIER" "$DIR" ;;
      fuzz-ci) fuzz_ci "$TIER" "$DIR" ;;
      *) conformance "$TIER" "$DIR" ;;
    esac ;;
esac
