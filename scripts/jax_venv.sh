#!/usr/bin/env bash
# Creates a virtualenv at DIR holding the CPU JAX the jax tests are pinned to (jax==0.10.2,
# with its jaxlib, numpy and ml_dtypes), from PyPI, with Debian's python3 -m venv
# (package python3-venv). Idempotent: when DIR/bin/python already imports that JAX it
# installs nothing and needs no network. Prints DIR/bin/python (absolute) on stdout.
# Usage: scripts/jax_venv.sh DIR
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: scripts/jax_venv.sh DIR" >&2
  exit 64
fi
dir=$1
version=0.10.2
python=/usr/bin/python3

has_jax() {
  [ -x "$dir/bin/python" ] &&
    "$dir/bin/python" -c "import sys, jax; sys.exit(jax.__version__ != '$version')" \
      >/dev/null 2>&1
}

if ! has_jax; then
  if ! "$python" -c "import venv, ensurepip" >/dev/null 2>&1; then
    echo "jax_venv: $python -m venv is unavailable (install Debian's python3-venv)" >&2
    exit 1
  fi
  echo "jax_venv: installing jax==$version into $dir" >&2
  "$python" -m venv "$dir" >&2 || { echo "jax_venv: $python -m venv $dir failed" >&2; exit 1; }
  "$dir/bin/pip" install --disable-pip-version-check --quiet "jax==$version" >&2 ||
    { echo "jax_venv: pip install jax==$version into $dir failed" >&2; exit 1; }
  if ! has_jax; then
    echo "jax_venv: $dir/bin/python does not import jax $version after the install:" >&2
    "$dir/bin/python" -c "import jax; print(jax.__version__)" >&2 || true
    exit 1
  fi
fi
echo "$(cd "$dir" && pwd)/bin/python"
