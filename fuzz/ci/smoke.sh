#!/bin/sh
# fuzz/ci/smoke.sh: the fuzz smoke run of .ci/run (issue 4, at most 5 minutes).
#   1. every fuzz target for SMOKE_SECONDS (20) against ref: must find nothing
#      (make fuzz-ci: validator, consumer, producer, and the consumer and the producer in the
#      CUDA mode);
#   2. every consumer-side built-in fault of dlconform._ref (FAULT_SIDES == "consumer"): the
#      consumer target against ref with that fault active must find it within FAULT_SECONDS
#      (20), as dlconform.fuzz.time_to_bug judges it (one run each): an oracle line names the
#      fault's clause, or a plain crash for a fault that crashes by design. Faults listed in
#      fuzz/ci/unfuzzable.txt are skipped with the reason given there.
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
# ref@cuda: ref's import of CUDA memory in the CUDA mode (fuzz/devmem.h); producer-ref@cuda:
# ref's CudaTensor exports in the producer target's CUDA mode (fuzz/producer_cuda.h); both on
# the simulated runtime unless DLCONFORM_CUDART names another
SIM=$PWD/build/cuda/sim/libcudart.so
for t in validator ref producer-ref ref@cuda producer-ref@cuda; do
  if DLCONFORM_CUDART=${DLCONFORM_CUDART:-$SIM} make --no-print-directory fuzz-ci TARGET=$t FUZZ_SECONDS=$S OUT="$OUT" \
      FUZZ_CI_ARGS="--known /dev/null --no-merge" >"$LOG/$t.out" 2>&1; then
    echo "fuzz smoke: $t: ${S} s, nothing found"
  else
    echo "fuzz smoke: $t: FOUND something (must find nothing):"; tail -n 5 "$LOG/$t.out"; rc=1
  fi
done
# dlconform.fuzz.time_to_bug decides "found on the fault's own clause", for the benchmark and here
PYTHONPATH=harness $PY -m dlconform.fuzz.time_to_bug --runs 1 --limit "$FS" --log-dir "$LOG/faults" \
  >"$LOG/faults.out" 2>&1 || rc=1
sed 's/^/fuzz smoke: /' "$LOG/faults.out"
exit $rc
