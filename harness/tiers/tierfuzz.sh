# shellcheck shell=sh disable=SC2154  # out, env_in: set by tier.sh's abs_out and prepare_tree
# Sourced by tier.sh: `tier.sh fuzz-ci TIER` and `tier.sh fuzz-plan TIER` (fuzz/README.md,
# "In a Debian tier"). Uses tier.sh's helpers and globals (TIER, DIR, REPO, IN_TREE, phase).
#
# The fuzz toolchain is an optional layer on top of a complete tier, with a stamp of its own.
# Why not add clang to packages() or let validation ignore dpkg: the base stamp (.dlconform-tier)
# records the versions of the tier's packages and `check` must keep meaning "the suite runs on
# exactly what was built". Packages outside that list are not compared by design, so adding
# packages is tolerated as long as nothing the tier already has changes. The layer therefore
#   - only adds packages: apt's simulation runs first, and an install that would upgrade or
#     remove any installed package (a dependency of torch, say) is refused, so every package of
#     the base stamp, and every library they load, stays as built;
#   - records itself in DIR/.dlconform-fuzz (format, packages, versions, compiler; written last,
#     after a libFuzzer+ASan+UBSan probe builds and runs), which only fuzz-ci reads: a tier
#     without the layer is complete, and deleting the tier deletes the layer with it;
#   - never leaves a half state: a failed or interrupted install purges what it brought in and
#     re-checks the base stamp; when that cannot be made good the base stamp is removed, so the
#     next build rebuilds the tier instead of using it.

FUZZ_STAMP_NAME=.dlconform-fuzz
FUZZ_STAMP_FORMAT=1
FUZZ_CC_IN=clang                               # /usr/bin/clang of the `clang` package
FUZZ_CORPUS_STORE=/var/cache/dlconform/fuzz    # working corpora, kept in the tier across runs
fuzz_new=""                                    # packages an install in progress brings in

fuzz_packages() { # the tier's default clang, its compiler-rt (libFuzzer, ASan, UBSan) and llvm
  echo "clang libclang-rt-dev llvm"   # for llvm-symbolizer: stack keys name functions, as on the host
}

in_tier() { # runs "$@" inside tier $1 with a clean environment
  _it=$1; shift
  chroot "$_it" /usr/bin/env -i PATH="$CHROOT_PATH" HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

fuzz_problem() { # why tier $1 has no usable fuzz layer; prints nothing when it has one
  fs=$1/$FUZZ_STAMP_NAME
  [ -f "$fs" ] || { echo "not installed"; return; }
  [ "$(head -n1 "$fs")" = "dlconform-fuzz=$FUZZ_STAMP_FORMAT" ] || { echo "fuzz stamp has an unknown format"; return; }
  [ "$(tail -n1 "$fs")" = "complete=yes" ] || { echo "fuzz stamp is truncated"; return; }
  [ "$(stamp_value "$fs" packages)" = "$(fuzz_packages)" ] || { echo "fuzz package list changed"; return; }
  for fp in $(fuzz_packages); do
    fwant=$(stamp_value "$fs" "pkg $fp")
    [ -n "$fwant" ] || { echo "fuzz stamp lacks $fp"; return; }
    fhave=$(dpkg_version "$1" "$fp")
    [ "$fhave" = "$fwant" ] || { echo "$fp is ${fhave:-not installed}, fuzz stamp says $fwant"; return; }
  done
  [ -x "$1/usr/bin/$FUZZ_CC_IN" ] || { echo "no /usr/bin/$FUZZ_CC_IN"; return; }
}

fuzz_known() { # the known-findings list of TARGET in this tier, relative to the tree; empty: none
  [ ! -f "$REPO/fuzz/known/$TIER/$TARGET.txt" ] || echo "fuzz/known/$TIER/$TARGET.txt"
}

fuzz_usage() { # TARGET and the numbers fuzz-ci passes to make: checked before anything runs
  case ${TARGET:-} in
    '') die "TARGET= is required: validator, a consumer module (numpy, torch, tvm_ffi, ...) or producer-NAME" 2 ;;
    *[!A-Za-z0-9_.-]*|[.-]*) die "TARGET '$TARGET' is not a module or target name" 2 ;;
  esac
  for _v in "FUZZ_SECONDS=${FUZZ_SECONDS:-60}" "FUZZ_MIN_SECONDS=${FUZZ_MIN_SECONDS:-10}"; do
    case ${_v#*=} in ''|*[!0-9]*) die "${_v%%=*} must be a whole number of seconds, not '${_v#*=}'" 2 ;; esac
  done
}

fuzz_plan() { # what fuzz-ci would do, one "what: how" line each
  abs_out
  fpl=$(plan "$DIR" "$TIER")
  echo "tier: $fpl"
  if [ "$fpl" != reuse ]; then
    echo "toolchain: install $(fuzz_packages): after the tier is built"
  else
    fwhy=$(fuzz_problem "$DIR")
    if [ -z "$fwhy" ]; then echo "toolchain: reuse ($(stamp_value "$DIR/$FUZZ_STAMP_NAME" cc))"
    else echo "toolchain: install $(fuzz_packages): $fwhy"; fi
  fi
  fk=$(fuzz_known)
  echo "known: ${fk:-none}"
  echo "run: make fuzz-ci TARGET=$TARGET FUZZ_SECONDS=${FUZZ_SECONDS:-60} FUZZ_CC=$FUZZ_CC_IN in $DIR$IN_TREE"
  echo "out: $out/$TIER/fuzz"
}

fuzz_rollback() { # purges what a failed install brought in; prints the outcome
  fr=ok
  # shellcheck disable=SC2086  # one argument per package
  [ -z "$fuzz_new" ] || in_tier "$DIR" dpkg --purge --force-depends $fuzz_new >>"$flog" 2>&1 || fr=partial
  in_tier "$DIR" dpkg --configure -a >>"$flog" 2>&1 || fr=partial
  for fp in $fuzz_new; do
    case $(dpkg-query --admindir="$DIR/var/lib/dpkg" -W -f='${Status}' "$fp" 2>/dev/null) in
      ''|*not-installed) ;;
      *) fr=partial ;;
    esac
  done
  [ -z "$(stamp_problem "$DIR" "$TIER")" ] || fr=partial
  fuzz_new=""
  if [ "$fr" = ok ]; then echo "rolled back, the tier is as it was"; return; fi
  rm -f "$DIR/$STAMP_NAME" "$DIR/$FUZZ_STAMP_NAME"
  echo "rolled back only in part, so the tier's stamp is removed and the next run rebuilds it"
}

fuzz_fail() { # one line: what failed, the rollback's outcome, the log
  fmsg=$1
  if [ "${phase:-}" = toolchain ]; then phase=""; fmsg="$fmsg; $(fuzz_rollback)"; fi
  die "fuzz toolchain ($(fuzz_packages)) not installed: $fmsg; log $flog" 2
}

fuzz_toolchain() { # installs the fuzz layer into tier $1 unless its stamp is valid
  fwhy=$(fuzz_problem "$1")
  if [ -z "$fwhy" ]; then say "fuzz toolchain: reusing $(stamp_value "$1/$FUZZ_STAMP_NAME" cc)"; return 0; fi
  flog=${TIER_DIR%/}/.$TIER-fuzz-install.log
  say "fuzz toolchain: $fwhy; installing $(fuzz_packages) (log $flog)"
  rm -f "$1/$FUZZ_STAMP_NAME"
  : > "$flog"
  in_tier "$1" dpkg --configure -a >>"$flog" 2>&1 || true   # an install cut short earlier
  in_tier "$1" apt-get -q update >>"$flog" 2>&1 || fuzz_fail "apt-get update failed inside the tier"
  # shellcheck disable=SC2046  # one argument per package
  fsim=$(in_tier "$1" apt-get -s -q install --no-install-recommends $(fuzz_packages) 2>>"$flog") \
    || fuzz_fail "apt cannot resolve them in this tier"
  printf '%s\n' "$fsim" >>"$flog"
  # "Inst P [OLD] (NEW ...)" upgrades P; only packages the tier does not have may come in.
  fchanged=$(printf '%s\n' "$fsim" | awk '($1 == "Inst" && $3 ~ /^\[/) || $1 == "Remv" { printf "%s ", $2 }')
  [ -z "$fchanged" ] || fuzz_fail "apt would upgrade or remove ${fchanged% } of the tier; rebuild it (make tier-clean tier TIER=$TIER)"
  fuzz_new=$(printf '%s\n' "$fsim" | awk '$1 == "Inst" { printf "%s ", $2 }')
  phase=toolchain   # from here on, any way out rolls back (fuzz_fail, on_exit)
  # shellcheck disable=SC2046
  in_tier "$1" apt-get install -y -q --no-install-recommends $(fuzz_packages) >>"$flog" 2>&1 \
    || fuzz_fail "apt-get install failed ($(grep -E '^(E|W):' "$flog" | tail -n1))"
  in_tier "$1" apt-get clean >>"$flog" 2>&1 || true
  # The layer counts only when what fuzz.mk uses works: libFuzzer with ASan and UBSan.
  mkdir -p "$1/tmp"
  printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return n > 0 && d[0] == 1; }' \
    > "$1/tmp/dlc-fuzz-probe.c"
  { in_tier "$1" "$FUZZ_CC_IN" -fsanitize=fuzzer,address,undefined -o /tmp/dlc-fuzz-probe /tmp/dlc-fuzz-probe.c \
      && in_tier "$1" /tmp/dlc-fuzz-probe -runs=10; } >>"$flog" 2>&1 \
    || fuzz_fail "$FUZZ_CC_IN -fsanitize=fuzzer,address,undefined does not build a working fuzz target"
  rm -f "$1/tmp/dlc-fuzz-probe" "$1/tmp/dlc-fuzz-probe.c"
  fbase=$(stamp_problem "$1" "$TIER")
  [ -z "$fbase" ] || fuzz_fail "the tier no longer matches its stamp ($fbase)"
  fcc=$(in_tier "$1" "$FUZZ_CC_IN" --version | head -n1)
  {
    echo "dlconform-fuzz=$FUZZ_STAMP_FORMAT"
    echo "installed=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "packages=$(fuzz_packages)"
    for fp in $(fuzz_packages); do echo "pkg $fp=$(dpkg_version "$1" "$fp")"; done
    echo "added=${fuzz_new% }"
    echo "cc=$fcc"
    echo "complete=yes"
  } > "$1/$FUZZ_STAMP_NAME.tmp"
  mv "$1/$FUZZ_STAMP_NAME.tmp" "$1/$FUZZ_STAMP_NAME"
  phase="" fuzz_new=""
  say "fuzz toolchain: installed $fcc"
}

copy_fuzz_reports() { # this target's fuzz outputs to $OUT/TIER/fuzz, results.* to $OUT/TIER
  fdest=$out/$t/fuzz
  mkdir -p "$fdest"
  rm -f "$fdest/$TARGET"-* "$fdest/$TARGET".*   # the previous run of this target only
  if [ -d "$d$IN_TREE/reports/out/fuzz" ]; then cp -R "$d$IN_TREE/reports/out/fuzz/." "$fdest/"; fi
  for fr in results.json results.md results.junit.xml; do
    [ ! -f "$d$IN_TREE/reports/out/$fr" ] || cp "$d$IN_TREE/reports/out/$fr" "$out/$t/$fr"
  done
  echo "$1" > "$fdest/$TARGET.exit-status"
  say "fuzz-ci $TARGET exit status $1; outputs in $fdest"
}

fuzz_ci() {
  t=$1 d=$2
  need_root
  abs_out
  build "$t" "$d"
  mount_api "$d"
  fuzz_toolchain "$d"
  prepare_tree "$d"
  known=$(fuzz_known)
  # The crash records merge into the tier's results.json, as a host run's do into $OUT's.
  mkdir -p "$d$IN_TREE/reports/out" "$d$FUZZ_CORPUS_STORE"
  [ ! -f "$out/$t/results.json" ] || cp "$out/$t/results.json" "$d$IN_TREE/reports/out/"
  say "fuzz-ci $TARGET for ${FUZZ_SECONDS:-60} s; known findings: ${known:-none}"
  phase=fuzz   # from here on, any way out (Ctrl-C included) still copies what fuzz-ci wrote
  rc=0
  # FUZZ_TOOLS is empty: the layer above is the toolchain, fuzz.mk installs nothing in a tier.
  # shellcheck disable=SC2086  # $env_in splits
  chroot "$d" $env_in make -C "$IN_TREE" --no-print-directory fuzz-ci PYTHON=/usr/bin/python3 \
    FUZZ_CC="$FUZZ_CC_IN" FUZZ_TOOLS= TARGET="$TARGET" FUZZ_SECONDS="${FUZZ_SECONDS:-60}" \
    FUZZ_MIN_SECONDS="${FUZZ_MIN_SECONDS:-10}" FUZZ_KNOWN="$known" \
    FUZZ_CI_ARGS="--corpus $FUZZ_CORPUS_STORE/corpus-$TARGET ${FUZZ_CI_ARGS:-}" || rc=$?
  # make exits 2 for any failed recipe; fuzz.mk keeps fuzz-ci's own status (1: a new finding).
  fst=$d$IN_TREE/reports/out/fuzz/$TARGET.exit-status
  [ ! -s "$fst" ] || rc=$(cat "$fst")
  phase=finished
  copy_fuzz_reports "$rc"
  exit "$rc"
}
