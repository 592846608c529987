#!/bin/sh
# Regenerate every tensor-graph group of corpus/imported/tinygrad/ from its script:
#   corpus/imported/tinygrad/scripts/<group>.py -> corpus/imported/tinygrad/<group>/*.json
# TINYGRAD_PYTHON: an interpreter with tinygrad==0.14.0 (default python3; not $PYTHON: tinygrad reads PYTHON as a flag); DEVICE: default CPU.
set -u
ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
PY=${TINYGRAD_PYTHON:-python3}
T=$ROOT/corpus/imported/tinygrad
rc=0
for s in "$T"/scripts/*.py; do
  g=$(basename "$s" .py)
  "$PY" "$ROOT/tools/tinygrad_export.py" "$s" --out "$T/$g" --device "${DEVICE:-CPU}" || rc=1
done
exit $rc
