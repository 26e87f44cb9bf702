#!/bin/sh
# fuzz/ci/smoke.sh: the fuzz smoke run of .ci/run (issue 4, at most 5 minutes).
#   1. every fuzz target for SMOKE_SECONDS (20) against ref: must find nothing
#      (make fuzz-ci: validator, consumer, producer);
#   2. every consumer-side built-in fault of dlconform._ref (FAULT_SIDES == "consumer"): the
#      consumer target against ref with that fault active must crash within FAULT_SECONDS
#      (20), and an oracle line must name the fault's clause (a plain crash counts for a
#      fault that crashes by design). Faults listed in fuzz/ci/unfuzzable.txt are skipped
#      with the reason given there (the consumer target cannot reach them).
# Exit 0 when all of that holds; 1 otherwise. Logs under reports/out/fuzz/smoke/.
set -u
cd "$(dirname "$0")/../.."
PY=${PYTHON:-/usr/bin/python3}
S=${SMOKE_SECONDS:-20}
FS=${FAULT_SECONDS:-20}
OUT=${OUT:-reports/out}
LOG=$OUT/fuzz/smoke
mkdir -p "$LOG"
rc=0
make --no-print-directory fuzz-tools build >/dev/null &&
  make --no-print-directory build/fuzz/validator.asan build/fuzz/consumer.asan \
    build/fuzz/producer.asan >/dev/null || { echo "fuzz smoke: build failed"; exit 1; }
for t in validator ref producer-ref; do
  if make --no-print-directory fuzz-ci TARGET=$t FUZZ_SECONDS=$S OUT="$OUT" \
      FUZZ_CI_ARGS="--known /dev/null --no-merge" >"$LOG/$t.out" 2>&1; then
    echo "fuzz smoke: $t: ${S} s, nothing found"
  else
    echo "fuzz smoke: $t: FOUND something (must find nothing):"; tail -n 5 "$LOG/$t.out"; rc=1
  fi
done
faults=$(PYTHONPATH=harness $PY -c 'from dlconform import _ref
for k, v in _ref.FAULT_SIDES.items():
    if v == "consumer": print(k, _ref.FAULTS[k][0])')
echo "$faults" | while read -r fault clause; do
  [ -n "$fault" ] || continue
  why=$(grep "^$fault " fuzz/ci/unfuzzable.txt 2>/dev/null | cut -d' ' -f2-)
  if [ -n "$why" ]; then echo "fuzz smoke: $fault ($clause): skipped: $why"; continue; fi
  d=$LOG/$fault; rm -rf "$d"; mkdir -p "$d/corpus"
  start=$(date +%s.%N)
  ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 DLCONFORM_FUZZ_CONSUMER=ref \
    DLCONFORM_REF_FAULT=$fault timeout $((FS + 30)) build/fuzz/consumer.asan -rss_limit_mb=2048 \
    -max_len=2200 -timeout=20 -dict=fuzz/dlpack.dict -max_total_time=$FS \
    -artifact_prefix="$d/" "$d/corpus" fuzz/corpus/seeds >"$d.log" 2>&1
  secs=$($PY -c "import time; print('%.1f' % (time.time() - $start))")
  got=$(sed -n 's/^dlconform-oracle: \([^:]*\):.*/\1/p' "$d.log" | head -n 1)
  [ -n "$got" ] || got=$(grep -o -m1 'AddressSanitizer: [A-Za-z-]*\|deadly signal' "$d.log")
  if ! ls "$d"/crash-* >/dev/null 2>&1; then
    echo "fuzz smoke: $fault ($clause): NOT FOUND in $FS s"; echo 1 >"$LOG/failed"
  elif [ "$got" = "$clause" ] || { [ "${got#AddressSanitizer}" != "$got" ] && \
      grep -q "crash" "$d.log" && $PY -c "
import sys; sys.path.insert(0, 'harness'); from dlconform import _ref
sys.exit(0 if 'crash' in _ref.FAULTS['$fault'][1] else 1)"; }; then
    echo "fuzz smoke: $fault ($clause): found in $secs s ($got)"
  else
    echo "fuzz smoke: $fault ($clause): found in $secs s, but as $got"; echo 1 >"$LOG/failed"
  fi
done
if [ -f "$LOG/failed" ]; then rm -f "$LOG/failed"; rc=1; fi
exit $rc
