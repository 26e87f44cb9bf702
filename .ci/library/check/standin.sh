#!/bin/sh
# .ci/library/check/standin.sh new DIR | plant DIR | known DIR REPORTS
# A stand-in for a library's repository, for trying the recipes of .ci/library: `mylib`, a
# copy of dlconform's pyref (a pure-Python ctypes DLPack library that imports nothing of
# dlconform) with a pyproject.toml, as a git repository. Its bugs are edits of the source,
# each as one of pyref's faults does it:
#   new DIR      the library, one commit, with an old bug its maintainers know: a capsule
#                already named used_* is imported again (CAP-04, consumer_accepts_used)
#   plant DIR    a commit with a new bug: the DLPack major version of a versioned capsule
#                goes unchecked (VER-08, consumer_reads_major2)
#   known DIR REPORTS   a commit adding the known files a run wrote to REPORTS:
#                .dlconform/known.txt from REPORTS/known-now.txt, .dlconform/fuzz-known/mylib.txt
#                with the clause of each finding in REPORTS/fuzz/mylib-summary.json (a bare
#                clause sets all its keys aside: one run need not have met them all)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)

commit() { git -C "$1" add -A && git -C "$1" -c user.name=standin -c user.email=standin@invalid commit -qm "$2"; }

case ${1:-} in
  new)
    d=$2
    rm -rf "$d"; mkdir -p "$d/mylib"
    (cd "$REPO/harness/dlconform/pyref" && tar --exclude=__pycache__ -cf - .) | tar -xf - -C "$d/mylib"
    cat > "$d/pyproject.toml" <<'EOF'
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "mylib"
version = "1.0"

[tool.setuptools]
packages = ["mylib"]
EOF
    f=$d/mylib/_consumer.py
    grep -q 'if name in _USED and _faults.active("consumer_accepts_used"):' "$f"
    sed -i 's/if name in _USED and _faults.active("consumer_accepts_used"):/if name in _USED:/' "$f"
    git init -q -b main "$d"
    commit "$d" "mylib 1.0"
    ;;
  plant)
    d=$2
    f=$d/mylib/_consumer.py
    grep -q 'if major != DLPACK_MAJOR_VERSION and not _faults.active("consumer_reads_major2"):' "$f"
    sed -i 's/if major != DLPACK_MAJOR_VERSION and not _faults.active("consumer_reads_major2"):/if major > DLPACK_MAJOR_VERSION + 1:/' "$f"
    commit "$d" "consumer: accept the next major version too"
    ;;
  known)
    d=$2 r=$3
    mkdir -p "$d/.dlconform/fuzz-known"
    cp "$r/known-now.txt" "$d/.dlconform/known.txt"
    python3 - "$r/fuzz/mylib-summary.json" "$d/.dlconform/fuzz-known/mylib.txt" <<'EOF'
import json, sys
clauses = sorted({f["clause"] for f in json.load(open(sys.argv[1]))["findings"]})
with open(sys.argv[2], "w") as f:
    f.write("# fuzz findings mylib knows (fuzz-ci keys, or bare clauses)\n" + "".join(c + "\n" for c in clauses))
EOF
    commit "$d" "dlconform: known findings"
    ;;
  *) echo "usage: standin.sh new DIR | plant DIR | known DIR REPORTS" >&2; exit 2 ;;
esac
