#!/bin/sh
# .ci/library/check/cflite.sh [DIR]: tries .ci/library/clusterfuzzlite on this machine, where
# Docker cannot run. The builder is this Debian host with a virtualenv for the library (what
# the Dockerfile's image is to ClusterFuzzLite); the runner is a minbase Debian bookworm made
# with mmdebstrap, which has no Python at all (base-runner has none of the builder's). With
# ClusterFuzzLite's environment (address sanitizer, libFuzzer: CC, CXX, CFLAGS, CXXFLAGS,
# LIB_FUZZING_ENGINE, SRC, OUT) it:
#   1. builds the stand-in library's targets with its .clusterfuzzlite/build.sh, with the
#      known file of its old bug (.dlconform/fuzz-known/mylib.txt: CAP-04);
#   2. runs OSS-Fuzz's bad_build_check checks on each target, in the runner: it starts and
#      runs 4 inputs (check_startup_crash), it is instrumented (check_engine: no "no
#      interesting inputs", 100 edges or more), it runs its seed corpus (check_seed_corpus);
#      on the host: x86-64 (check_architecture), ASan calls >= 1000 and UBSan <= 200
#      (check_mixed_sanitizers); and ldd in the runner finds every library it needs;
#   3. fuzzes each for FUZZ_SECONDS (10) in the runner: nothing is found, and without the
#      known file baked into $OUT the old bug is (within 120 s);
#   4. plants the bug of standin.sh, rebuilds: the consumer target finds VER-08 (within 300 s);
#   5. builds dlconform's numpy targets (consumer and producer) with fuzz/oss-fuzz/build.sh
#      and runs the same checks on them: a library with shared dependencies (BLAS, gfortran)
#      and known findings (fuzz/known/numpy.txt, baked in as dlconform_consumer_numpy.known).
# Exit 0 when every check holds, 1 otherwise, 2 when it cannot run. Needs root, clang-14,
# python3-venv, mmdebstrap (the runner is kept in DIR/runner between runs).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
DIR=${1:-/tmp/dlconform-cflite-check}
FUZZ_SECONDS=${FUZZ_SECONDS:-10}
RUNNER=$DIR/runner
[ "$(id -u)" -eq 0 ] || { echo "cflite check: needs root (mmdebstrap, chroot)"; exit 2; }
for t in clang-14 clang++-14 mmdebstrap objdump file unzip; do
  command -v $t >/dev/null || { echo "cflite check: $t is missing"; exit 2; }
done

export CC=clang-14 CXX=clang++-14 SANITIZER=address FUZZING_ENGINE=libfuzzer ARCHITECTURE=x86_64
export CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION \
-fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link"
export CXXFLAGS="$CFLAGS" LIB_FUZZING_ENGINE=-fsanitize=fuzzer
rc=0
fail() { echo "cflite check: FAIL: $*"; rc=1; }
say() { echo "cflite check: $*"; }

if [ ! -x "$RUNNER/bin/sh" ]; then
  say "making the runner (minbase bookworm) in $RUNNER"
  mkdir -p "$DIR"
  mmdebstrap --quiet --variant=minbase bookworm "$RUNNER" >/dev/null
fi
if ls "$RUNNER"/usr/bin/python3* "$RUNNER"/usr/lib/x86_64-linux-gnu/libpython3* >/dev/null 2>&1; then
  say "the runner has a Python: it proves nothing"; exit 2
fi
find "$DIR" -mindepth 1 -maxdepth 1 ! -name runner -exec rm -rf {} +
mkdir -p "$DIR/src" "$DIR/tmp"
git clone -q "$REPO" "$DIR/src/dlconform"
sh "$HERE/standin.sh" new "$DIR/src/mylib"
mkdir -p "$DIR/src/mylib/.clusterfuzzlite" "$DIR/src/mylib/.dlconform/fuzz-known"
echo CAP-04 >"$DIR/src/mylib/.dlconform/fuzz-known/mylib.txt"
cp "$REPO"/.ci/library/clusterfuzzlite/* "$DIR/src/mylib/.clusterfuzzlite/"
cp "$DIR/src/mylib/.clusterfuzzlite/build.sh" "$DIR/src/build.sh"   # the Dockerfile's COPY

in_runner() { # OUT CMD...: CMD run in the runner with OUT at /out, no environment, cwd /out
  o=$1; shift
  unshare --mount --fork sh -c 'r=$1 o=$2; shift 2; mount --make-rprivate /;
    mkdir -p "$r/out"; mount --bind "$o" "$r/out"; mount -t proc proc "$r/proc"; mount --rbind /dev "$r/dev";
    exec chroot "$r" /usr/bin/env -i PATH=/usr/bin:/bin /bin/sh -c "cd /out && exec \"\$@\"" sh "$@"' \
    sh "$RUNNER" "$o" "$@"
}

options() { # T: the libFuzzer flags of T.options, as run_fuzzer passes them
  sed -n 's/^\([a-z_]*\) = \(.*\)$/-\1=\2/p' "$1.options" | tr '\n' ' '
}

build() { # NAME: a fresh builder venv, the library installed by its build.sh; targets in DIR/NAME
  rm -rf "$DIR/venv-$1" "$DIR/$1"; mkdir -p "$DIR/$1"
  /usr/bin/python3 -m venv --system-site-packages "$DIR/venv-$1"
  say "$1: building (log $DIR/$1.log)"
  (cd "$DIR/src/mylib" && PATH=$DIR/venv-$1/bin:$PATH SRC=$DIR/src OUT=$DIR/$1 bash "$DIR/src/build.sh") \
    >"$DIR/$1.log" 2>&1 || { fail "$1: the build failed"; tail -5 "$DIR/$1.log"; return 1; }
  grep '^bundle:' "$DIR/$1.log" | sed "s/^/cflite check: $1: /"
}

bad_build_check() { # OUT T: OSS-Fuzz's checks of one target
  o=$1 t=$2 log=$DIR/tmp/$2.check before=$rc
  rc=0
  file "$o/$t" | grep -q x86-64 || fail "$t: not x86-64"
  asan=$(objdump -d "$o/$t" | grep -cE 'callq?\s+[0-9a-f]+\s+<__asan') || true
  ubsan=$(objdump -d "$o/$t" | grep -cE 'callq?\s+[0-9a-f]+\s+<__ubsan') || true
  [ "$asan" -ge 1000 ] || fail "$t: $asan ASan calls (< 1000): not an ASan build"
  [ "$ubsan" -le 200 ] || fail "$t: $ubsan UBSan calls (> 200) in an ASan build"
  if in_runner "$o" ldd "./$t" | grep 'not found'; then fail "$t: the runner lacks a library"; fi
  in_runner "$o" "./$t" $(options "$o/$t") -seed=1337 -runs=4 >"$log" 2>&1 || true
  grep -q "Done 4 runs" "$log" || { fail "$t: startup crash or exit"; tail -5 "$log"; }
  if grep -q "no interesting inputs were found" "$log"; then fail "$t: no coverage instrumentation"; fi
  edges=$(grep -oE 'INFO: Loaded [0-9]+ module.*\(.*(counters|guards)\): *[0-9]+' "$log" | grep -oE '[0-9]+$' | head -1)
  [ "${edges:-0}" -ge 100 ] || fail "$t: ${edges:-0} edges (< 100)"
  rm -rf "$o/seeds-$t"; mkdir "$o/seeds-$t"; unzip -q "$o/${t}_seed_corpus.zip" -d "$o/seeds-$t"
  in_runner "$o" "./$t" $(options "$o/$t") -rss_limit_mb=2560 -timeout=25 -runs=0 "seeds-$t" >"$log.seeds" 2>&1 \
    || { fail "$t: a seed input crashes it"; grep -m3 'dlconform-oracle\|ERROR' "$log.seeds"; }
  [ $rc -eq 0 ] && say "$t: starts in the runner, $edges edges, $asan ASan calls, seed corpus runs"
  [ $before -eq 0 ] || rc=$before
}

fuzz() { # OUT T SECONDS [VAR=VALUE]: fuzz in the runner; prints the oracle line or sanitizer error, if any
  o=$1 t=$2
  rm -rf "$o/corpus-$t"; mkdir "$o/corpus-$t"
  in_runner "$o" env ${4:-} "./$t" $(options "$o/$t") -max_total_time="$3" -artifact_prefix="/out/$t-" "corpus-$t" \
    "seeds-$t" >"$DIR/tmp/$t.fuzz" 2>&1 || true
  grep -m1 -E '^dlconform-oracle:|^==[0-9]+==ERROR' "$DIR/tmp/$t.fuzz" || true
}

build clean || exit 1
for t in dlconform_consumer_mylib; do
  [ -x "$DIR/clean/$t" ] || { fail "clean: no $t"; continue; }
  bad_build_check "$DIR/clean" "$t"
  found=$(fuzz "$DIR/clean" "$t" "$FUZZ_SECONDS")
  [ -z "$found" ] && say "clean: $t: nothing found in $FUZZ_SECONDS s" || fail "clean: $t found: $found"
done
[ -f "$DIR/clean/dlconform_consumer_mylib.known" ] || fail "clean: no dlconform_consumer_mylib.known"
found=$(fuzz "$DIR/clean" dlconform_consumer_mylib 120 DLCONFORM_FUZZ_IGNORE_FILE=)
case $found in
  "dlconform-oracle: CAP-04"*) say "clean: without its .known file, dlconform_consumer_mylib finds the old bug: $found" ;;
  *) fail "clean: without its .known file, dlconform_consumer_mylib did not find CAP-04 (${found:-nothing})" ;;
esac
built=$(cd "$DIR/clean" && find . -maxdepth 1 -name 'dlconform_*' -type f -perm -u+x | sort | tr '\n' ' ')
[ "$built" = "./dlconform_consumer_mylib " ] || fail "clean: built $built, not the one target of build.sh"

sh "$HERE/standin.sh" plant "$DIR/src/mylib"
build planted || exit 1
mkdir -p "$DIR/planted/seeds-dlconform_consumer_mylib"
unzip -q "$DIR/planted/dlconform_consumer_mylib_seed_corpus.zip" -d "$DIR/planted/seeds-dlconform_consumer_mylib"
found=$(fuzz "$DIR/planted" dlconform_consumer_mylib 300)
case $found in
  "dlconform-oracle: VER-08"*) say "planted: dlconform_consumer_mylib found: $found" ;;
  *) fail "planted: dlconform_consumer_mylib did not find VER-08 (${found:-nothing})" ;;
esac

say "numpy: building dlconform's numpy targets (log $DIR/numpy.log)"
mkdir -p "$DIR/numpy"
(SRC=$DIR/src OUT=$DIR/numpy PYTHON=/usr/bin/python3 DLCONFORM_CONSUMERS="ref numpy" DLCONFORM_PRODUCERS="ref numpy" \
  bash "$DIR/src/dlconform/fuzz/oss-fuzz/build.sh") >"$DIR/numpy.log" 2>&1 || fail "numpy: the build failed"
grep '^bundle:' "$DIR/numpy.log" | sed 's/^/cflite check: numpy: /'
for t in dlconform_validator dlconform_consumer_ref dlconform_producer_ref dlconform_consumer_numpy dlconform_producer_numpy; do
  [ -x "$DIR/numpy/$t" ] || { fail "numpy: no $t"; continue; }
  bad_build_check "$DIR/numpy" "$t"
done
# numpy 1.24's known findings (fuzz/known/numpy.txt) are what let its consumer target start:
# without them, the first input already breaks an oracle (EXC: RuntimeError for a device)
[ -f "$DIR/numpy/dlconform_consumer_numpy.known" ] || fail "numpy: no dlconform_consumer_numpy.known"
in_runner "$DIR/numpy" env DLCONFORM_FUZZ_IGNORE_FILE= ./dlconform_consumer_numpy -runs=4 >"$DIR/tmp/unknown" 2>&1 || true
grep -q '^dlconform-oracle: ' "$DIR/tmp/unknown" && say "numpy: without its .known file, dlconform_consumer_numpy stops at once" \
  || fail "numpy: dlconform_consumer_numpy starts without its known findings: the .known check proves nothing"
for t in dlconform_consumer_ref dlconform_producer_ref dlconform_validator; do
  found=$(fuzz "$DIR/numpy" "$t" "$FUZZ_SECONDS")
  [ -z "$found" ] && say "numpy build: $t: nothing found in $FUZZ_SECONDS s" || fail "numpy build: $t found: $found"
done

[ $rc -eq 0 ] && say "ok: the targets run in a runner without Python, find nothing but the known bug (set aside), find the planted one"
exit $rc
