#!/bin/sh
# .ci/library/check/workflow.sh [DIR]: tries .ci/library/dlpack.yml as a library's CI runs
# it, on this machine: each run is the workflow's job in a fresh Debian bookworm (gha.py over
# the tier `make tier TIER=bookworm` builds), against the stand-in library of standin.sh, with
# dlconform checked out from this repository's committed HEAD. Three runs:
#   main       the library, with its old bug (CAP-04), and no known files: the job fails,
#              conformance and fuzz report CAP-04 and nothing else; the reports start the
#              known files
#   main-known the same with the known files of `main`: the job succeeds
#   pr         a pull request that plants a bug (VER-08): the job fails, conformance and fuzz
#              each report the bug as new, and nothing else is new
# Also checked: the JUnit file is uploaded, and the reports name dlconform's revision.
# Exit 0 when all of that holds, 1 otherwise, 2 when it cannot run (no tier, not root).
# Environment: TIER_DIR (as tier.sh), FUZZ_SECONDS (default 60). Logs: DIR/NAME.log.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
DIR=${1:-/tmp/dlconform-workflow-check}
TIER_DIR=${TIER_DIR:-$HOME/.cache/dlconform/tiers}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
PY=/usr/bin/python3
export TIER_DIR

TIER_DIR=$TIER_DIR sh "$REPO/harness/tiers/tier.sh" check bookworm >/dev/null 2>&1 \
  || { echo "workflow check: no complete bookworm tier in $TIER_DIR (make tier TIER=bookworm)"; exit 2; }
rm -rf "$DIR"; mkdir -p "$DIR"
git clone -q --bare "$REPO" "$DIR/dlconform.git"
want_rev=$(git -C "$DIR/dlconform.git" rev-parse HEAD)
sh "$HERE/standin.sh" new "$DIR/lib"
rc=0
fail() { echo "workflow check: FAIL: $*"; rc=1; }

run() { # NAME: the workflow's job on the stand-in's HEAD; its exit status
  echo "workflow check: $1: running the job (log $DIR/$1.log)"
  s=0
  $PY "$HERE/gha.py" "$REPO/.ci/library/dlpack.yml" --root "$TIER_DIR/bookworm" --self "$DIR/lib" \
    --repo "dlconform/dlconform=$DIR/dlconform.git" --out "$DIR/$1" --apt-cache "$DIR/apt-cache" \
    --env FUZZ_SECONDS="$FUZZ_SECONDS" >"$DIR/$1.log" 2>&1 || s=$?
  grep '^gha: step .*: \(success\|failure\|skipped\)$' "$DIR/$1.log" | sed "s/^/workflow check: $1: /"
  return $s
}

# What a run's reports hold: "job STATUS", "step NAME OUTCOME", "new CLAUSE" (each new
# finding of conformance, then of the fuzzer), "junit yes|no", "revision REV".
facts() { # NAME STATUS
  $PY - "$DIR/$1" "$2" <<'EOF'
import json, os, sys
d, status = sys.argv[1], sys.argv[2]
print("job", status)
for s in json.load(open(os.path.join(d, "steps.json"))):
    print("step", s["name"].split()[0], s["outcome"])
r = os.path.join(d, "artifacts", "dlpack-reports")
doc = json.load(open(os.path.join(r, "results.json"))) if os.path.exists(os.path.join(r, "results.json")) else {}
for rec in doc.get("results", []):
    if rec["verdict"] in ("fail", "crash", "timeout") and not rec.get("known") and not rec["test"].startswith("fuzz:"):
        print("new", rec["clause"], "conformance")
fz = os.path.join(r, "fuzz", "mylib-summary.json")
for f in json.load(open(fz))["findings"] if os.path.exists(fz) else []:
    if f["new"]:
        print("new", f["clause"], "fuzz")
print("junit", "yes" if os.path.exists(os.path.join(r, "results.junit.xml")) else "no")
print("revision", os.environ["WANT_REV"] in json.dumps({k: v for k, v in doc.items() if k != "results"}))
EOF
}

s=0; run main || s=$?
WANT_REV=$want_rev facts main $s >"$DIR/main.facts" || fail "main: no reports"
cat "$DIR/main.facts" | sed 's/^/workflow check: main: /'
grep -q '^junit yes' "$DIR/main.facts" || fail "main: no results.junit.xml uploaded"
[ "$s" -eq 1 ] || fail "main: the job did not fail on the library's old bug"
grep -q '^new CAP-04 conformance' "$DIR/main.facts" || fail "main: conformance did not report CAP-04"
grep -q '^new CAP-04 fuzz' "$DIR/main.facts" || fail "main: the fuzzer did not report CAP-04"
if grep '^new ' "$DIR/main.facts" | grep -v '^new CAP-04 '; then fail "main: findings other than CAP-04"; fi
grep -q '^revision True' "$DIR/main.facts" || fail "main: the reports do not name dlconform's revision $want_rev"
[ -f "$DIR/main/artifacts/dlpack-reports/known-now.txt" ] || fail "main: no known-now.txt"
sh "$HERE/standin.sh" known "$DIR/lib" "$DIR/main/artifacts/dlpack-reports"
grep -q CAP-04 "$DIR/lib/.dlconform/known.txt" && grep -q CAP-04 "$DIR/lib/.dlconform/fuzz-known/mylib.txt" \
  || fail "main: the known files do not list CAP-04"

s=0; run main-known || s=$?
WANT_REV=$want_rev facts main-known $s >"$DIR/main-known.facts" || fail "main-known: no reports"
sed 's/^/workflow check: main-known: /' "$DIR/main-known.facts"
[ "$s" -eq 0 ] || fail "main-known: the job failed with the known files of main"

sh "$HERE/standin.sh" plant "$DIR/lib"
s=0; run pr || s=$?
WANT_REV=$want_rev facts pr $s >"$DIR/pr.facts" || fail "pr: no reports"
sed 's/^/workflow check: pr: /' "$DIR/pr.facts"
[ "$s" -eq 1 ] || fail "pr: the job did not fail on the planted bug"
grep -q '^new VER-08 conformance' "$DIR/pr.facts" || fail "pr: conformance did not report VER-08 as new"
grep -q '^new VER-08 fuzz' "$DIR/pr.facts" || fail "pr: the fuzzer did not report VER-08 as new"
if grep '^new ' "$DIR/pr.facts" | grep -v '^new VER-08 '; then fail "pr: findings other than the planted one are new"; fi
grep -q '^step conformance failure' "$DIR/pr.facts" || fail "pr: the conformance step did not fail"
grep -q '^step fuzz failure' "$DIR/pr.facts" || fail "pr: the fuzz step did not fail (or did not run)"

[ $rc -eq 0 ] && echo "workflow check: ok: main fails on its old bug and starts the known files, main-known passes, pr fails on the planted bug only"
exit $rc
