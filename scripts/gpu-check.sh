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
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
py_nvrtc="$(python3 -c 'import nvidia.cuda_nvrtc as m; print(list(m.__path__)[0] + "/lib")' 2>/dev/null || true)"
[ -n "$py_nvrtc" ] && LD_LIBRARY_PATH="$py_nvrtc${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}"

{
  echo "== device"
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv || true
  ls "${LD_LIBRARY_PATH%%:*}" 2>/dev/null | grep -i nvrtc || true
} 2>&1 | tee "$out/device.txt"

# Trials: a failure is reported, then the benchmark still runs.
status=0
echo "== trials" | tee "$out/trials.txt"
UOPKIT_REQUIRE_BACKENDS=cuda,cuda-cpu,nvrtc timeout 300 \
  "$bin/uopkit" check --backend oracle,cuda,cuda-cpu,nvrtc --verbose 2>&1 | tee -a "$out/trials.txt" || status=$?

echo "== benchmark" | tee "$out/bench.txt"
timeout 120 "$bin/gpu_bench" 2>&1 | tee -a "$out/bench.txt" || status=$?
exit "$status"
