#!/usr/bin/env bash
# Creates or updates the virtualenv at DIR that the ctest label "jax_v3" runs in (DESIGN.md
# section 16): tpu-inference 0.32.0's v3 kernels need jax==0.11.2, and jax 0.11 needs
# Python >= 3.12, so this venv is made with a Python 3.12 or 3.13 (pyenv's versions under
# $(pyenv root)/versions/3.12*, 3.13*, else python3.12 / python3.13 on PATH; none found: exit 1,
# naming what was searched). From PyPI: jax==0.11.2 and jaxlib==0.11.2 (the pins of
# tpu-inference 0.32.0's metadata, with numpy and ml_dtypes), pytest, hypothesis, Ray (the v3
# cross-check's --ray), nanobind, scikit-build-core; then tpu-inference==0.32.0 without its dependencies (vllm, torch, libtpu:
# rpa.jax.tpu_inference loads only its kernel modules), then the rpa package from this checkout
# (built in build/pip-shared, as scripts/python_venv.sh builds it: scripts/venv_lib.sh).
# A failed install or build fails (exit 1), never skips. Idempotent. Extra arguments go to
# pip install . (e.g. --config-settings=cmake.define.RPA_WERROR=ON).
# Prints DIR/bin/python (absolute) on stdout; pip's output goes to stderr.
# Usage: scripts/python_v3_venv.sh DIR [pip install options]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
  echo "usage: scripts/python_v3_venv.sh DIR [pip install options]" >&2
  exit 64
fi
name=python_v3_venv
dir=$1
shift
jax_version=0.11.2
tpu_inference_version=0.32.0
ray_version=2.60.0  # as scripts/python_venv.sh's
requirements=("jax==$jax_version" "jaxlib==$jax_version" "pytest>=7" "hypothesis>=6.100"
              "nanobind>=2.4" "scikit-build-core>=0.10" "ray==$ray_version")
# shellcheck source=scripts/venv_lib.sh
source scripts/venv_lib.sh

# A Python >= 3.12: an existing venv's own, else pyenv's newest 3.12 / 3.13, else PATH's.
find_python() {
  local searched=() candidates=() root c
  if [ -x "$dir/bin/python" ]; then candidates+=("$dir/bin/python"); fi
  if command -v pyenv >/dev/null 2>&1 && root=$(pyenv root 2>/dev/null); then
    searched+=("$root/versions/3.12*/bin/python" "$root/versions/3.13*/bin/python")
    for c in $(ls -d "$root"/versions/3.12* "$root"/versions/3.13* 2>/dev/null | sort -V); do
      candidates+=("$c/bin/python")
    done
  else
    searched+=("pyenv (not on PATH)")
  fi
  searched+=("python3.12 and python3.13 on PATH")
  for c in python3.12 python3.13; do
    if command -v "$c" >/dev/null 2>&1; then candidates+=("$(command -v "$c")"); fi
  done
  for c in "${candidates[@]}"; do
    if [ -x "$c" ] && "$c" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      echo "$c"
      return 0
    fi
  done
  echo "$name: jax==$jax_version needs Python >= 3.12 and none was found (searched:" \
       "${searched[*]})" >&2
  return 1
}
python=$(find_python) || exit 1

install_requirements "${requirements[@]}"
# tpu-inference's declared dependencies (vllm, torch, libtpu) are neither wanted nor
# installable here: only its kernel sources are read.
install_requirements "tpu-inference==$tpu_inference_version" -- --no-deps
install_rpa "$@"
