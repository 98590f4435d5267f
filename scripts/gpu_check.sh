#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU, a Python whose torch has CUDA, and no network:
#   1. unpacks the Debian packages that scripts/gpu_deps.sh fetched (fmt, CLI11, toml++,
#      nlohmann-json, GoogleTest, gloo) into a folder with dpkg -x;
#   2. builds recall against that torch's LibTorch with them and runs the quick tests with
#      RECALL_TEST_DEVICE=cuda (scripts/build_torch2.sh);
#   3. runs every command once on --device cuda (train, eval on cuda and on the CPU, sample,
#      inspect, extrapolate, fit, probe);
#   4. prints one JSON line each for recall bench train beside the PyTorch peer
#      (scripts/peer_gpt.py), in fp32 and with bf16 products (--precision bf16 beside the peer's
#      autocast), and recall bench probe, on the GPU.
# Without a GPU it does the same on the CPU and says so. It takes about 5 minutes on 16 cores.
#   RECALL_GPU_DEPS    the packages' folder (default .gpu-deps in the repository)
#   RECALL_DEPS_PREFIX where they are unpacked (default /tmp/recall-deps)
#   RECALL_TORCH_VENV  the venv holding torch (default: python3's, when it imports torch)
#   RECALL_BUILD_DIR   the build folder (default build-gpu in the repository)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
t0=$(date +%s)
say() { echo "gpu_check [$(($(date +%s) - t0)) s]: $*" >&2; }
deps=${RECALL_GPU_DEPS:-$root/.gpu-deps}
prefix=${RECALL_DEPS_PREFIX:-/tmp/recall-deps}
ls "$deps"/*.deb >/dev/null 2>&1 || { echo "gpu_check: no .deb in $deps; run scripts/gpu_deps.sh where apt works" >&2; exit 2; }
rm -rf "$prefix"
mkdir -p "$prefix"
for f in "$deps"/*.deb; do dpkg -x "$f" "$prefix"; done
say "unpacked $(ls "$deps"/*.deb | wc -l) packages into $prefix"

if [ -z "${RECALL_TORCH_VENV:-}" ]; then
  RECALL_TORCH_VENV=$(python3 -c 'import sys, torch; print(sys.prefix)')
fi
# Nothing can be downloaded there: the venv's torch is taken as it is (the tests that need
# transformers skip).
export RECALL_TORCH_VENV RECALL_TORCH_PIP=${RECALL_TORCH_PIP:-torch}
py="$RECALL_TORCH_VENV/bin/python3"
device=cpu
if "$py" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  device=cuda
  export RECALL_CUDA=ON  # link LibTorch's CUDA library
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2 || true
else
  say "no CUDA device visible to torch: everything runs on the CPU"
fi

build=${RECALL_BUILD_DIR:-$root/build-gpu}
export RECALL_BUILD_DIR=$build RECALL_PREFIX_PATH="$prefix/usr" RECALL_TEST_DEVICE=$device
"$root/scripts/build_torch2.sh"
say "built and tested (RECALL_TEST_DEVICE=$device)"

recall="$build/recall"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$recall" train --config mqar-tiny --set steps=300 --out "$work/run" --device $device >/dev/null
"$recall" eval --checkpoint "$work/run" --device $device
"$recall" eval --checkpoint "$work/run" --device cpu  # the same checkpoint read on the CPU
"$recall" sample --checkpoint "$work/run" --prompt "1 2 3" --tokens 8 --temperature 0 --device $device
"$recall" inspect --checkpoint "$work/run" --lengths 1,2 --rules none,su --device $device | tail -4
"$recall" extrapolate --checkpoints "$work/run" --lengths 1,2 --device $device
"$recall" fit --kind mlp-relu2 --width 8 --dk 16 --steps 300 --device $device | tail -2
"$recall" probe --stores softmax,exp3,least_squares --m 64,256,1024 --no-rules --device $device --quiet | tail -5
say "every command ran on $device"

threads=$(nproc)
"$recall" bench train --config bench-gpt --device $device --threads "$threads"
"$py" "$root/scripts/peer_gpt.py" --device $device --threads "$threads" --steps 30
# bf16 products beside the peer under torch.autocast(bfloat16)
"$recall" bench train --config bench-gpt --device $device --threads "$threads" --precision bf16
"$py" "$root/scripts/peer_gpt.py" --device $device --threads "$threads" --steps 30 --bf16
"$recall" bench probe --device $device --threads "$threads"
say "done"
