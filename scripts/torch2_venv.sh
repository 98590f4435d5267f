#!/usr/bin/env bash
# The Python venv with PyPI's torch 2.x, transformers and safetensors that the interop tests run
# under beside Debian's torch 1.13 (tests/python_test_util.h). Made once, then reused: a venv that
# lacks a package gets it. Prints the venv's python3 on stdout.
#
#   RECALL_TORCH_VENV  where (default ~/.cache/recall/torch2-venv)
#   RECALL_TORCH_PIP   what pip installs (default: torch transformers safetensors; the plain torch
#                      wheel is its CUDA build, which the CPU tests use as well)
set -euo pipefail
venv=${RECALL_TORCH_VENV:-$HOME/.cache/recall/torch2-venv}
pip_args=${RECALL_TORCH_PIP:-torch transformers safetensors}
modules=$(for p in $pip_args; do case $p in -*|*=*|*/*) ;; *) echo "$p";; esac; done | paste -sd,)
if [ ! -x "$venv/bin/python3" ]; then
  echo "torch2_venv: creating $venv" >&2
  /usr/bin/python3 -m venv "$venv" >&2
fi
if ! "$venv/bin/python3" -c "import ${modules:-torch}" >/dev/null 2>&1; then
  start=$(date +%s)
  echo "torch2_venv: pip install $pip_args into $venv" >&2
  # shellcheck disable=SC2086  # the list is words
  "$venv/bin/python3" -m pip install --quiet $pip_args >&2
  echo "torch2_venv: installed in $(($(date +%s) - start)) s" >&2
fi
"$venv/bin/python3" -c 'import torch, sys; print(f"torch2_venv: torch {torch.__version__}", file=sys.stderr)'
echo "$venv/bin/python3"
