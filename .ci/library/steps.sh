#!/bin/sh
# .ci/library/steps.sh STEP: the steps of dlpack.yml, the workflow a library runs on its pull
# requests. Run from the workspace that holds the two checkouts (the library in $LIB_DIR,
# dlconform in $DLCONFORM_DIR), as root in a Debian container (bookworm or newer).
#   tools        Debian packages: compilers, Python with venv and pip, clang for the fuzzer,
#                and $LIB_APT; then a virtualenv ($VENV) that sees Debian's packages
#   build        the pull request's library, built and installed into the venv ($LIB_BUILD,
#                run in the library's checkout)
#   install      dlconform into the venv (pip install --no-build-isolation -e: the reports'
#                provenance then names dlconform's revision)
#   conformance  `dlconform run --target $LIB` from $REPORTS, with the library's known file
#                when it has one; results.json, results.md, results.junit.xml in $REPORTS;
#                known-now.txt there lists every finding of this run (a new known file).
#                DEVICE=cuda (a runner with a GPU): the library's CUDA variant, $LIB@cuda, on
#                the device checks (its findings listed under $LIB@cuda in the same known
#                file); EXAMPLES=N, SEED=S: a deeper search (dlconform run --examples, --seed)
#   fuzz         `make fuzz-ci TARGET=T` for each T of $FUZZ_TARGETS (default $LIB: the
#                consumer target; producer-$LIB: the library's own arrays as a producer, for a
#                library whose arrays have __dlpack__; producer-numpy and the like), each for
#                $FUZZ_SECONDS, with the library's known fuzz file $FUZZ_KNOWN/T.txt (the
#                layout of dlconform's fuzz/known/); findings, minimised inputs and
#                reproducers in $REPORTS/fuzz, crash records merged into $REPORTS/results.json;
#                DEVICE=cuda adds $LIB@cuda: the consumer target fed CUDA device memory
# Each step exits as its command does: conformance and fuzz exit non-zero for a finding that
# is not known (and for a run that could not start).
set -eu

LIB=${LIB:?LIB: the module to test (what dlconform run --target takes)}
LIB_DIR=${LIB_DIR:-lib}
LIB_BUILD=${LIB_BUILD:-pip install --no-build-isolation .}
LIB_APT=${LIB_APT:-}
DLCONFORM_DIR=${DLCONFORM_DIR:-dlconform}
KNOWN=${KNOWN:-.dlconform/known.txt}
FUZZ_KNOWN=${FUZZ_KNOWN:-.dlconform/fuzz-known}
# DEVICE=cuda adds the consumer fed CUDA memory, $LIB@cuda (fuzz/README.md, the CUDA mode)
FUZZ_TARGETS=${FUZZ_TARGETS:-$LIB${DEVICE:+ $LIB@$DEVICE}}
FUZZ_SECONDS=${FUZZ_SECONDS:-300}
WS=$(pwd)
VENV=${VENV:-$WS/.dlpack-venv}
REPORTS=${REPORTS:-$WS/reports}
case $REPORTS in /*) ;; *) REPORTS=$WS/$REPORTS ;; esac
case $LIB_DIR in /*) LIB_PATH=$LIB_DIR ;; *) LIB_PATH=$WS/$LIB_DIR ;; esac  # the checkout, absolute

say() { echo "dlpack-ci: $*"; }
venv() { # the venv as the active environment: python3, pip and dlconform are its own
  [ -x "$VENV/bin/python3" ] || { say "no virtualenv at $VENV: run the tools step first"; exit 2; }
  VIRTUAL_ENV=$VENV PATH=$VENV/bin:$PATH
  export VIRTUAL_ENV PATH
  unset PYTHONHOME
}

case ${1:-} in
  tools)
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086  # LIB_APT is a list of package names
    apt-get install -y -qq --no-install-recommends make gcc libc6-dev python3-dev python3-venv \
      python3-pip python3-setuptools python3-wheel python3-pytest python3-hypothesis \
      clang-14 libclang-rt-14-dev llvm-14 ca-certificates git $LIB_APT >/dev/null
    python3 -m venv --system-site-packages "$VENV"
    say "tools installed; virtualenv $VENV ($("$VENV/bin/python3" -V))"
    ;;
  build)
    venv
    say "building $LIB: $LIB_BUILD (in $LIB_DIR)"
    (cd "$LIB_DIR" && sh -c "$LIB_BUILD")
    # the module must import from elsewhere than its source tree: the installed build is tested
    (cd / && python3 -c "import $LIB; print('dlpack-ci: $LIB from', $LIB.__file__)")
    ;;
  install)
    venv
    pip install -q --no-build-isolation -e "$DLCONFORM_DIR"
    dlconform --version
    ;;
  conformance)
    venv
    mkdir -p "$REPORTS"
    set -- --target "$LIB" --out "$REPORTS" --write-known "$REPORTS/known-now.txt"
    [ -z "${DEVICE:-}" ] || set -- "$@" --device "$DEVICE"
    [ -z "${EXAMPLES:-}" ] || set -- "$@" --examples "$EXAMPLES"
    [ -z "${SEED:-}" ] || set -- "$@" --seed "$SEED"
    if [ -f "$LIB_PATH/$KNOWN" ]; then set -- "$@" --known "$LIB_PATH/$KNOWN"
    else say "no known file $LIB_DIR/$KNOWN: every finding counts (reports/known-now.txt starts one)"; fi
    cd "$REPORTS"   # not a checkout: dlconform and the library come from the venv
    dlconform run "$@"
    ;;
  fuzz)
    venv
    mkdir -p "$REPORTS"
    worst=0
    for t in $FUZZ_TARGETS; do
      known=
      [ -f "$LIB_PATH/$FUZZ_KNOWN/$t.txt" ] && known=$LIB_PATH/$FUZZ_KNOWN/$t.txt
      # make's own status is 2 for any failed recipe; fuzz-ci's is in fuzz/T.exit-status.
      # FUZZ_TOOLS empty: the tools step installed the engine (make would add AFL++).
      make -C "$DLCONFORM_DIR" --no-print-directory fuzz-ci TARGET="$t" FUZZ_SECONDS="$FUZZ_SECONDS" \
        FUZZ_KNOWN="$known" OUT="$REPORTS" FUZZ_TOOLS= || true
      rc=$(cat "$REPORTS/fuzz/$t.exit-status" 2>/dev/null || echo 2)
      say "fuzz-ci $t: exit status $rc (1: a new finding; 2: it could not run)"
      [ "$rc" -gt "$worst" ] && worst=$rc
    done
    exit "$worst"
    ;;
  *)
    echo "usage: LIB=module sh .ci/library/steps.sh tools|build|install|conformance|fuzz" >&2
    exit 2
    ;;
esac
