#!/bin/bash -eu
# ClusterFuzzLite build (.clusterfuzzlite/build.sh): the pull request's library into the
# Python the targets embed, then dlconform's targets for it. DLCONFORM_CONSUMERS names the
# modules whose from_dlpack is fuzzed; DLCONFORM_PRODUCERS the producers (numpy, torch, ref, or
# "mylib" itself when its arrays have __dlpack__: fuzz/README.md, "A library's own producer");
# DLCONFORM_VALIDATOR=0 leaves out the target of dlconform's own validators;
# DLCONFORM_KNOWN_DIR holds the known findings (mylib.txt), as for .ci/library/dlpack.yml.
# $CFLAGS stay set: a C extension of the library is built with the sanitizers' flags.
python3 -m pip install --no-build-isolation "$SRC/mylib"
DLCONFORM_CONSUMERS="mylib" DLCONFORM_PRODUCERS="" DLCONFORM_VALIDATOR=0 \
  DLCONFORM_KNOWN_DIR="$SRC/mylib/.dlconform/fuzz-known" bash "$SRC/dlconform/fuzz/oss-fuzz/build.sh"
