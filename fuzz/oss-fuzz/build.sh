#!/bin/bash -eu
# fuzz/oss-fuzz/build.sh: OSS-Fuzz / ClusterFuzzLite build of the dlconform fuzz targets.
# Uses only what those services set: $CC, $CFLAGS (sanitizer and coverage flags),
# $LIB_FUZZING_ENGINE (the engine's link flags) and $OUT; $SRC is where the Dockerfile put
# the repository (default: this checkout). Local test, as in fuzz/README.md:
#   CC=clang-14 CFLAGS="-O1 -fno-omit-frame-pointer -gline-tables-only -fsanitize=address \
#     -fsanitize-address-use-after-scope -fsanitize=fuzzer-no-link" \
#     LIB_FUZZING_ENGINE=-fsanitize=fuzzer OUT=/tmp/ossout bash fuzz/oss-fuzz/build.sh
# Produces in $OUT, for T in validator (no Python) and, when python3 with its embedding flags
# is there, consumer_ref, producer_ref (dlconform._ref as consumer/producer) and
# consumer_numpy when numpy imports:
#   dlconform_T, dlconform_T.dict, dlconform_T.options (max_len, rss limit),
#   dlconform_T_seed_corpus.zip; harness/ (the Python package, _ref built with plain flags:
#   the engine's sanitizers live in the executables).
REPO=${SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
[ -d "$REPO/dlconform" ] && REPO=$REPO/dlconform
cd "$REPO"
INC=${DLCONFORM_INCLUDE:-build/include}
[ -f "$INC/dlpack/dlpack.h" ] || sh probes/build-tools/dlpack_header.sh "$INC"
W="-std=c11 -D_GNU_SOURCE -Wall -Wextra -I$INC -Iprobes -Ifuzz"
CORE="fuzz/record.c fuzz/layout.c fuzz/oracle.c probes/check_*.c"
MUT="fuzz/mutate.c fuzz/mutator.c -DDLC_ENGINE_LIBFUZZER"
mkdir -p "$OUT"

extras() { # T: dictionary, options, seed corpus
  cp fuzz/dlpack.dict "$OUT/dlconform_$1.dict"
  printf '[libfuzzer]\nmax_len = 2200\nrss_limit_mb = 2560\ntimeout = 20\ndict = dlconform_%s.dict\n' \
    "$1" >"$OUT/dlconform_$1.options"
  (cd fuzz/corpus/seeds && zip -q -j "$OUT/dlconform_$1_seed_corpus.zip" ./*)
}

# shellcheck disable=SC2086
$CC $CFLAGS $W $MUT -o "$OUT/dlconform_validator" fuzz/target_validator.c $CORE $LIB_FUZZING_ENGINE
extras validator

PY=${PYTHON:-python3}
if command -v "$PY-config" >/dev/null 2>&1 || command -v python3-config >/dev/null 2>&1; then
  PYCFG=$(command -v "$PY-config" || command -v python3-config)  # must match $PY
  PYINC=$($PYCFG --includes)
  PYLIBS=$($PYCFG --ldflags --embed)
  EXT=$($PY -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  rm -rf "$OUT/harness"; mkdir -p "$OUT/harness"
  cp -r harness/dlconform "$OUT/harness/"
  rm -f "$OUT"/harness/dlconform/*.so
  # the extensions the targets import, without the engine's instrumentation
  cc -std=c11 -O2 -D_GNU_SOURCE -I"$INC" -Iprobes $PYINC -fPIC -shared \
    -o "$OUT/harness/dlconform/_ref$EXT" probes/ref/*.c probes/check_*.c -lpthread
  cc -std=c11 -O2 -D_GNU_SOURCE -I"$INC" -Iprobes $PYINC -fPIC -shared \
    -o "$OUT/harness/dlconform/_probe$EXT" probes/probe/*.c probes/check_*.c -lpthread
  PYT="fuzz/pyhost.c -DDLC_HARNESS_DIR=\"/nonexistent\" $PYINC"
  # one executable per (kind, library): the services pass no environment, so a tiny
  # wrapper binary name selects it (argv[0] is read by pyhost via the env set below)
  for t in consumer_ref producer_ref consumer_numpy; do
    [ $t = consumer_numpy ] && ! $PY -c 'import numpy' 2>/dev/null && continue
    kind=${t%%_*}; lib=${t#*_}
    var=DLCONFORM_FUZZ_CONSUMER; [ $kind = producer ] && var=DLCONFORM_FUZZ_PRODUCER
    # shellcheck disable=SC2086
    $CC $CFLAGS $W -DDLC_FIXED_ENV_NAME="\"$var\"" -DDLC_FIXED_ENV_VALUE="\"$lib\"" \
      $MUT $PYT -o "$OUT/dlconform_$t" fuzz/target_$kind.c fuzz/oss-fuzz/fixed_env.c \
      $( [ $kind = consumer ] && echo fuzz/producer.c fuzz/forge.c fuzz/exchange.c fuzz/consumer_oracles.c fuzz/xapi_offer.c fuzz/xapi_guard.c ) \
      $CORE $PYLIBS $LIB_FUZZING_ENGINE
    extras "$t"
  done
fi
