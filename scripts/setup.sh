#!/usr/bin/env bash
# Installs recall's build dependencies from Debian's archive when they are missing (Debian 12),
# and any further packages named as arguments (scripts/setup_fuzz.sh).
set -euo pipefail
pkgs=(cmake g++ ninja-build libtorch-dev libopenblas0-openmp libgtest-dev libfmt-dev libcli11-dev
      libtomlplusplus-dev nlohmann-json3-dev libbenchmark-dev gnuplot-nox python3-torch python3-venv libgloo-dev
      iproute2 fortunes ccache "$@")  # fortunes: the text task's default corpus (/usr/share/games/fortunes)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
