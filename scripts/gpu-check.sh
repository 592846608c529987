#!/usr/bin/env bash
# The GPU check: one prepared run (under 8 minutes) on a machine with an NVIDIA GPU.
#
#   scripts/gpu-check.sh            build here (needs cargo), then check
#   scripts/gpu-check.sh --prebuilt DIR
#                                   use DIR/uopkit and DIR/gpu_bench built elsewhere (a GPU
#                                   machine without Rust: `scripts/gpu-check.sh --stage DIR`
#                                   on the build machine copies them there)
#
# It prints the device, runs every `cuda::` and `cuda-cpu::` trial of the corpus (every case
# on CUDA devices, judged against the oracle under manifests/allowances/cuda.json, and the
# seeds' CPU<->GPU pair), the `nvrtc::` compile trials with this machine's NVRTC, then the
# benchmark (examples/gpu_bench.rs): elementwise and sum against the device's own
# device-to-device copy bandwidth, as ratios. Output also goes to $OUT (or ./gpu-check-out).
set -euo pipefail
# Paths given on the command line are taken from where the script was started.
abs() { case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
[ "${1:-}" = "--stage" ] || [ "${1:-}" = "--prebuilt" ] && [ -n "${2:-}" ] && set -- "$1" "$(abs "$2")"
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--stage" ]; then
  dir="${2:?usage: scripts/gpu-check.sh --stage DIR}"
  cargo build --release --bin uopkit --example gpu_bench
  mkdir -p "$dir"
  cp target/release/uopkit target/release/examples/gpu_bench "$dir/"
  echo "staged into $dir"
  exit 0
fi

if [ "${1:-}" = "--prebuilt" ]; then
  bin="${2:?usage: scripts/gpu-check.sh --prebuilt DIR}"
else
  cargo build --release --bin uopkit --example gpu_bench
  bin=target/release
  cp target/release/examples/gpu_bench target/release/gpu_bench
fi

out="${OUT:-gpu-check-out}"
mkdir -p "$out"

# NVRTC: the CUDA toolkit's, else a pip wheel's (nvidia-cuda-nvrtc-cu12 / nvidia-cuda-nvrtc).
# cudarc looks for libnvrtc.so, libnvrtc.so.12, .11, ...: a newer major (libnvrtc.so.13) is
# linked under the plain name in a private directory put first on the loader's path.
# Where: the toolkit (beside nvcc, /usr/local/cuda), the loader's cache, and every pip wheel's
# nvidia/*/lib (cu12: nvidia/cuda_nvrtc/lib; cu13: nvidia/cu13/lib).
nvrtc_dirs="/usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib"
if command -v nvcc >/dev/null; then nvrtc_dirs="$(dirname "$(command -v nvcc)")/../lib64 $nvrtc_dirs"; fi
for p in $( (/sbin/ldconfig -p 2>/dev/null || true) | awk '/libnvrtc\.so/ {print $NF}'); do
  nvrtc_dirs="$nvrtc_dirs $(dirname "$p")"
done
py_dirs="$(python3 -c 'import nvidia; print(*nvidia.__path__)' 2>/dev/null || true)"
for d in $py_dirs; do nvrtc_dirs="$nvrtc_dirs $(ls -d "$d"/*/lib 2>/dev/null | tr '\n' ' ')"; done
nvrtc_lib=""
for d in $nvrtc_dirs; do
  for f in "$d"/libnvrtc.so "$d"/libnvrtc.so.*; do
    case "$f" in *builtins*|*alt*) continue ;; esac
    if [ -e "$f" ] && [ -z "$nvrtc_lib" ]; then nvrtc_lib="$f"; fi
  done
done
if [ -n "$nvrtc_lib" ]; then
  link_dir="$(mktemp -d)"
  trap 'rm -rf "$link_dir"' EXIT
  ln -s "$nvrtc_lib" "$link_dir/libnvrtc.so"
  export LD_LIBRARY_PATH="$link_dir:$(dirname "$nvrtc_lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
else
  echo "NVRTC not found in: $nvrtc_dirs (the nvrtc and cuda trials will fail)" >&2
fi

{
  echo "== device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  echo "NVRTC: ${nvrtc_lib:-not found}"
} 2>&1 | tee "$out/device.txt"

# Trials: a failure is reported, then the benchmark still runs.
status=0
echo "== trials" | tee "$out/trials.txt"
# A one-GPU machine skips the cases that need CUDA:1 and up (with the count).
UOPKIT_REQUIRE_BACKENDS=cuda,cuda-cpu,nvrtc timeout 300 \
  "$bin/uopkit" check --backend oracle,cuda,cuda-cpu,nvrtc --verbose 2>&1 | tee -a "$out/trials.txt" || status=$?

echo "== benchmark" | tee "$out/bench.txt"
timeout 120 "$bin/gpu_bench" 2>&1 | tee -a "$out/bench.txt" || status=$?
exit "$status"
