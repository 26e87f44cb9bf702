#!/bin/bash -eu
# fuzz/oss-fuzz/build.sh: OSS-Fuzz / ClusterFuzzLite build of the dlconform fuzz targets.
# Uses what those services set: $CC, $CXX, $CFLAGS, $CXXFLAGS (sanitizer and coverage flags),
# $LIB_FUZZING_ENGINE (the engine's link flags) and $OUT; $SRC is where the Dockerfile put
# dlconform (default: this checkout). C files are compiled with $CC and linked with $CXX
# (the AFL++ and honggfuzz drivers are C++). Local test, as in fuzz/README.md:
#   CC=clang-14 CXX=clang++-14 CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only \
#     -fsanitize=address -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link" \
#     CXXFLAGS="$CFLAGS" LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/tmp/ossout bash fuzz/oss-fuzz/build.sh
# Choices (environment):
#   PYTHON                 the interpreter the Python targets embed, with the libraries under
#                          test installed (default python3; it needs a shared libpython)
#   DLCONFORM_CONSUMERS    modules whose from_dlpack the consumer target fuzzes (default: ref,
#                          and numpy when it imports)
#   DLCONFORM_PRODUCERS    libraries the producer target fuzzes: numpy, torch, ref, or any module
#                          whose from_dlpack gives arrays with __dlpack__ (default ref)
#   DLCONFORM_VALIDATOR    0: no validator target (it fuzzes dlconform's own C; default 1)
#   DLCONFORM_KNOWN_DIR    known findings, TARGET.txt as in fuzz/known/ (NAME.txt for a
#                          consumer, producer-NAME.txt for a producer; default fuzz/known):
#                          each target sets its own aside (dlconform_T.known, fixed_env.c)
# Produces in $OUT:
#   dlconform_validator (no Python; unless DLCONFORM_VALIDATOR=0), dlconform_consumer_NAME,
#   dlconform_producer_NAME, each with .dict, .options (max_len, rss limit) and
#   _seed_corpus.zip, the Python ones with .known when DLCONFORM_KNOWN_DIR has their file;
#   harness/   dlconform's Python package, _ref and _probe built with plain flags (the
#              engine's sanitizers live in the executables);
#   python/    the runtime the Python targets run on where the builder's Python is absent
#              (bundle.py): libpython, the standard library, the libraries under test with
#              what they import, and their shared libraries.
# The Python targets find python/ next to themselves (fuzz/pyhost.h) and python/lib through
# their DT_RPATH $ORIGIN/python/lib; none needs an environment variable.
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=${SRC:-$(cd "$HERE/../.." && pwd)}
[ -d "$REPO/dlconform" ] && REPO=$REPO/dlconform
cd "$REPO"
INC=${DLCONFORM_INCLUDE:-build/include}
[ -f "$INC/dlpack/dlpack.h" ] || sh probes/build-tools/dlpack_header.sh "$INC"
W="-std=c11 -D_GNU_SOURCE -Wall -Wextra -I$INC -Iprobes -Ifuzz"
CORE="fuzz/record.c fuzz/layout.c fuzz/oracle.c $(echo probes/check_*.c)"
MUT="fuzz/mutate.c fuzz/mutator.c"
OBJ=$(mktemp -d)
trap 'rm -rf "$OBJ"' EXIT
mkdir -p "$OUT"

extras() { # T: dictionary, options, seed corpus
  cp fuzz/dlpack.dict "$OUT/dlconform_$1.dict"
  printf '[libfuzzer]\nmax_len = 2200\nrss_limit_mb = 2560\ntimeout = 20\ndict = dlconform_%s.dict\n' \
    "$1" >"$OUT/dlconform_$1.options"
  rm -f "$OUT/dlconform_$1_seed_corpus.zip"
  (cd fuzz/corpus/seeds && zip -q -j "$OUT/dlconform_$1_seed_corpus.zip" ./*)
}

compile() { # DIR EXTRA_FLAGS FILE...: objects of FILEs in $OBJ/DIR
  local dir=$OBJ/$1 extra=$2 f
  shift 2
  mkdir -p "$dir"
  for f in "$@"; do
    # shellcheck disable=SC2086
    $CC $CFLAGS $W $extra -DDLC_ENGINE_LIBFUZZER -c "$f" -o "$dir/$(basename "$f" .c).o"
  done
}

if [ "${DLCONFORM_VALIDATOR:-1}" != 0 ]; then
  # shellcheck disable=SC2086
  compile validator "" fuzz/target_validator.c $CORE $MUT
  # shellcheck disable=SC2086
  $CXX $CXXFLAGS -o "$OUT/dlconform_validator" "$OBJ"/validator/*.o $LIB_FUZZING_ENGINE
  extras validator
fi

PY=${PYTHON:-python3}
PYINC=-I$($PY -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
PYLIB=$($PY -c 'import sysconfig as s; v = s.get_config_var; print("-L%s -lpython%s %s %s" % (v("LIBDIR"), v("LDVERSION"), v("LIBS"), v("SYSLIBS")))')
EXT=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
CONSUMERS=${DLCONFORM_CONSUMERS-ref $($PY -c 'import numpy' 2>/dev/null && echo numpy)}
PRODUCERS=${DLCONFORM_PRODUCERS-ref}
KNOWN_DIR=${DLCONFORM_KNOWN_DIR:-fuzz/known}

rm -rf "$OUT/harness"; mkdir -p "$OUT/harness"
cp -r harness/dlconform "$OUT/harness/"
find "$OUT/harness" \( -name '*.so' -o -name __pycache__ \) -prune -exec rm -rf {} +
# the extensions the targets import, without the engine's instrumentation
for m in ref:probes/ref probe:probes/probe; do
  cc -std=c11 -O2 -D_GNU_SOURCE -I"$INC" -Iprobes "$PYINC" -fPIC -shared \
    -o "$OUT/harness/dlconform/_${m%%:*}$EXT" "${m#*:}"/*.c probes/check_*.c -lpthread
done

# what the consumer names import (torch's consumer is torch.utils.dlpack), and the producers
mods=""
for c in $CONSUMERS; do [ "$c" = ref ] || mods="$mods $([ "$c" = torch ] && echo torch.utils.dlpack || echo "$c")"; done
for p in $PRODUCERS; do [ "$p" = ref ] || case " $mods " in *" $p "*) ;; *) mods="$mods $p" ;; esac; done
# shellcheck disable=SC2086
$PY fuzz/oss-fuzz/bundle.py "$OUT" "$OUT/harness" $mods

PYT="-DDLC_HARNESS_DIR=\"/nonexistent\" $PYINC"
# shellcheck disable=SC2086
compile consumer "$PYT" fuzz/target_consumer.c fuzz/pyhost.c fuzz/producer.c fuzz/forge.c fuzz/exchange.c \
  fuzz/consumer_oracles.c fuzz/devices.c fuzz/devmem.c fuzz/copy_values.c fuzz/result_view.c fuzz/xapi_offer.c \
  fuzz/plain_import.c fuzz/xapi_guard.c \
  $CORE $MUT
# shellcheck disable=SC2086
compile producer "$PYT" fuzz/target_producer.c fuzz/pyhost.c fuzz/producer_cuda.c fuzz/devmem.c $CORE $MUT
# One executable per (kind, library): the services pass no environment of ours, so the name
# is baked in (fixed_env.c).
targets=""
for c in $CONSUMERS; do targets="$targets consumer_$c"; done
for p in $PRODUCERS; do targets="$targets producer_$p"; done
for t in $targets; do
  kind=${t%%_*} lib=${t#*_}
  var=DLCONFORM_FUZZ_CONSUMER; [ "$kind" = producer ] && var=DLCONFORM_FUZZ_PRODUCER
  $CC $CFLAGS -DDLC_FIXED_ENV_NAME="\"$var\"" -DDLC_FIXED_ENV_VALUE="\"$lib\"" \
    -c fuzz/oss-fuzz/fixed_env.c -o "$OBJ/fixed_env_$t.o"
  # shellcheck disable=SC2086,SC2016  # $ORIGIN is for the loader
  $CXX $CXXFLAGS -o "$OUT/dlconform_$t" "$OBJ/$kind"/*.o "$OBJ/fixed_env_$t.o" $LIB_FUZZING_ENGINE \
    $PYLIB -Wl,--disable-new-dtags,-rpath,'$ORIGIN/python/lib'
  extras "$t"
  known=$KNOWN_DIR/$lib.txt; [ "$kind" = producer ] && known=$KNOWN_DIR/producer-$lib.txt
  rm -f "$OUT/dlconform_$t.known"
  [ ! -f "$known" ] || cp "$known" "$OUT/dlconform_$t.known"
done
