#!/usr/bin/env bash
# The main job on the bundled default, run by `make run`. It grows with the
# project: today it optimises an example decoder layer with tx-opt and
# prints the result.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."

example=examples/llama-decoder-layer.mlir
echo "txc: optimising ${example} (one Llama decoder layer, stories260K shape)"
"${build}/bin/tx-opt" --tx-fuse-swiglu --canonicalize --verify-each "${example}"
