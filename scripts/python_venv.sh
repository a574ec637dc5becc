#!/usr/bin/env bash
# Creates or updates the virtualenv at DIR that the ctest labels "python", "jax" and "cluster"
# run in, with Debian's python3 -m venv (package python3-venv), from PyPI: the CPU JAX the jax
# tests are pinned to (jax==0.10.2, with its jaxlib, numpy and ml_dtypes), pytest, hypothesis,
# Ray (campaigns on a cluster), the package's build requirements (nanobind, scikit-build-core), and then the rpa package
# itself from this checkout (`pip install .`, built incrementally in build/pip-shared/). A failed
# install or build fails (exit 1), never skips. Idempotent: what is installed already is not
# fetched again. Extra arguments go to pip install . (e.g. -C cmake.define.RPA_WERROR=ON).
# Prints DIR/bin/python (absolute) on stdout; pip's output goes to stderr.
# Usage: scripts/python_venv.sh DIR [pip install options]
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
  echo "usage: scripts/python_venv.sh DIR [pip install options]" >&2
  exit 64
fi
name=python_venv
dir=$1
shift
jax_version=0.10.2
ray_version=2.60.0  # the ctest label "cluster" (campaigns on a local Ray cluster)
python=/usr/bin/python3
requirements=("jax==$jax_version" "pytest>=7" "hypothesis>=6.100" "nanobind>=2.4"
              "scikit-build-core>=0.10" "ray==$ray_version")

# shellcheck source=scripts/venv_lib.sh
source scripts/venv_lib.sh
install_requirements "${requirements[@]}"
install_rpa "$@"
