#!/usr/bin/env bash
# Installs what the sanitized fuzzing build needs (scripts/fuzz.sh) when it is missing (Debian 12):
# clang and its runtime (libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer).
set -euo pipefail
pkgs=(clang-14 libclang-rt-14-dev llvm-14)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup_fuzz: installing ${missing[*]}" >&2
  sudo_cmd=(); [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
