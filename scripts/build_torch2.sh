#!/usr/bin/env bash
# Builds recall against the LibTorch inside PyPI's torch wheel (2.x, with or without CUDA) instead
# of Debian's libtorch-dev, into build-torch2/, then runs the quick tests (ctest -LE slow).
#
#   RECALL_TORCH_VENV  the Python venv holding torch (default ~/.cache/recall/torch2-venv), made or
#                      completed by scripts/torch2_venv.sh; the tests that run Python run under it
#   RECALL_TORCH_PIP   what pip installs there (default: torch transformers safetensors)
#   RECALL_BUILD_DIR   the build folder (default build-torch2 in the repository)
#   RECALL_JOBS        parallel compile jobs (default: all cores)
#   RECALL_PREFIX_PATH more CMake prefixes (;-separated) where the other dependencies are found
#   RECALL_CUDA        ON links LibTorch's CUDA library, OFF its CPU library alone (about 400 MB
#                      less resident memory per run); default ON where nvidia-smi sees a GPU
# Extra arguments go to cmake's configure step (e.g. -DCMAKE_PREFIX_PATH=... for the other
# dependencies). A CUDA torch needs CUDA's compiler to configure (nvcc on PATH or in
# /usr/local/cuda), and its libraries to link with RECALL_CUDA=ON; nothing CUDA has to run for the
# build and the CPU tests.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${RECALL_BUILD_DIR:-$root/build-torch2}
jobs=${RECALL_JOBS:-$(nproc)}

python=$("$root/scripts/torch2_venv.sh")
prefix=$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)' 2>/dev/null)
version=$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)
echo "build_torch2: torch $version from $prefix" >&2

cuda_args=()
if [ -e "$prefix/../../lib/libtorch_cuda.so" ]; then
  cuda=${RECALL_CUDA:-$(nvidia-smi -L >/dev/null 2>&1 && echo ON || echo OFF)}
  echo "build_torch2: a CUDA torch; RECALL_CUDA=$cuda" >&2
  cuda_args+=(-DRECALL_CUDA="$cuda")
  # Configuring a CUDA LibTorch finds the CUDA toolkit even when only its CPU library is linked.
  nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
  [ -x "$nvcc" ] || { echo "build_torch2: this torch is built with CUDA; nvcc is needed" >&2; exit 2; }
  cuda_args+=(-DCUDAToolkit_ROOT="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"
    -DCMAKE_CUDA_COMPILER="$nvcc")
  # The wheel's CUDA libraries (cuDNN, cuBLAS, NCCL ...) live in the venv's nvidia/ packages; the
  # linker follows libtorch_cuda's needs there.
  link_dirs=$(find "$prefix/../../../nvidia" -maxdepth 3 -type d -name lib 2>/dev/null | paste -sd: || true)
  [ -n "$link_dirs" ] && cuda_args+=(-DCMAKE_EXE_LINKER_FLAGS="-Wl,-rpath-link,$link_dirs"
    -DCMAKE_SHARED_LINKER_FLAGS="-Wl,-rpath-link,$link_dirs")
fi

# The wheel's folder goes first in the prefix path: torch's config finds its libraries with
# find_library, which would otherwise take a system LibTorch (Debian's) over the wheel's.
torch_root=$(dirname "$(dirname "$prefix")")
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_root${RECALL_PREFIX_PATH:+;$RECALL_PREFIX_PATH}" \
  "${cuda_args[@]}" "$@"
start=$(date +%s)
cmake --build "$build" -j"$jobs"
echo "build_torch2: built in $(($(date +%s) - start)) s" >&2
start=$(date +%s)
RECALL_PYTHON=$python ctest --test-dir "$build" -LE slow -j"$jobs" --output-on-failure
echo "build_torch2: quick tests passed in $(($(date +%s) - start)) s (torch $version)" >&2
