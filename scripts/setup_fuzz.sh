#!/usr/bin/env bash
# Installs what the sanitized fuzzing build needs (scripts/fuzz.sh) when it is missing (Debian 12):
# clang and its runtime (libFuzzer, AddressSanitizer, UndefinedBehaviorSanitizer).
set -euo pipefail
exec "$(dirname "$0")/setup.sh" clang-14 libclang-rt-14-dev llvm-14
