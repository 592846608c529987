#!/bin/sh
# Creates a virtual environment with the peers `uopkit bench` compares against:
#   benches/setup-venv.sh [DIR]      (default .venv in the repository root)
# then `uopkit bench` finds DIR/bin/python by default (or pass --python DIR/bin/python, or set
# UOPKIT_BENCH_PYTHON). tinygrad's CPU device needs clang (e.g. apt-get install -y clang); without it
# `uopkit bench` prints why tinygrad gives no figures (under "peers:").
set -eu
dir=${1:-"$(dirname "$0")/../.venv"}
python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --upgrade pip
"$dir/bin/python" -m pip install --quiet numpy "tinygrad==0.14.0"
"$dir/bin/python" -c 'import numpy, tinygrad; print("numpy", numpy.__version__, "tinygrad", tinygrad.__version__ if hasattr(tinygrad, "__version__") else "0.14.0")'
command -v clang >/dev/null 2>&1 || echo "setup-venv.sh: note: no clang on PATH: tinygrad's CPU device cannot compile (apt-get install -y clang)" >&2
