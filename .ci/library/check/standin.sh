#!/bin/sh
# .ci/library/check/standin.sh new DIR | plant DIR | known DIR REPORTS
# A stand-in for a library's repository, for trying the recipes of .ci/library: `mylib`, a
# copy of dlconform's pyref (a pure-Python ctypes DLPack library that imports nothing of
# dlconform) with a pyproject.toml, as a git repository.
#   new DIR      the clean library, one commit
#   plant DIR    a commit with a bug in mylib's consumer: the DLPack major version of a
#                versioned capsule goes unchecked (VER-08), as pyref's fault
#                consumer_reads_major2 does, but in the source
#   known DIR REPORTS   a commit adding the known files a run wrote to REPORTS:
#                .dlconform/known.txt from REPORTS/known-now.txt, .dlconform/fuzz-known/mylib.txt
#                from the keys of REPORTS/fuzz/mylib-summary.json
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
keys = [f["key"] for f in json.load(open(sys.argv[1]))["findings"]]
with open(sys.argv[2], "w") as f:
    f.write("# fuzz findings mylib knows (dlconform fuzz-ci keys)\n" + "".join(k + "\n" for k in keys))
EOF
    commit "$d" "dlconform: known findings"
    ;;
  *) echo "usage: standin.sh new DIR | plant DIR | known DIR REPORTS" >&2; exit 2 ;;
esac
