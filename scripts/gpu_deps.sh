#!/usr/bin/env bash
# Prepares what scripts/gpu_check.sh needs on a GPU machine that cannot download anything: the
# Debian 12 packages of recall's dependencies other than LibTorch (fmt, CLI11, toml++, nlohmann-json,
# GoogleTest, gloo's headers), fetched here with apt-get download into DIR (default .gpu-deps in
# the repository, ignored by git). gpu_check.sh unpacks them there with dpkg -x.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/.gpu-deps}
packages=(libfmt-dev libfmt9 libcli11-dev libtomlplusplus-dev libtomlplusplus3 nlohmann-json3-dev
  libgtest-dev libgloo-dev libgloo0)
mkdir -p "$dir"
rm -f "$dir"/*.deb
# apt-get download writes into the current folder; as root it warns that it is not sandboxed.
(cd "$dir" && apt-get download -q "${packages[@]}" 2>&1 | grep -v "unsandboxed" || true)
n=$(ls "$dir"/*.deb 2>/dev/null | wc -l)
[ "$n" -eq "${#packages[@]}" ] || { echo "gpu_deps: $n of ${#packages[@]} packages in $dir" >&2; exit 1; }
echo "gpu_deps: ${#packages[@]} packages, $(du -sh "$dir" | cut -f1), in $dir" >&2
