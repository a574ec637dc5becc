#!/usr/bin/env bash
# Creates or updates the virtualenv at DIR that the ctest labels "python" and "jax" run in,
# with Debian's python3 -m venv (package python3-venv), from PyPI: the CPU JAX the jax tests
# are pinned to (jax==0.10.2, with its jaxlib, numpy and ml_dtypes), pytest and hypothesis,
# the package's build requirements (nanobind, scikit-build-core), and then the rpa package
# itself from this checkout (`pip install .`, built incrementally in build/pip/). A failed
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
dir=$1
shift
jax_version=0.10.2
python=/usr/bin/python3
requirements=("jax==$jax_version" "pytest>=7" "hypothesis>=6.100" "nanobind>=2.4"
              "scikit-build-core>=0.10")

has_requirements() {
  [ -x "$dir/bin/python" ] &&
    "$dir/bin/python" - "${requirements[@]}" >/dev/null 2>&1 <<'PY'
import sys
from importlib.metadata import version, PackageNotFoundError
for req in sys.argv[1:]:
    name = req.split("=")[0].split(">")[0]
    try:
        have = version(name)
    except PackageNotFoundError:
        sys.exit(1)
    if "==" in req and have != req.split("==")[1]:
        sys.exit(1)
PY
}

if ! has_requirements; then
  if ! "$python" -c "import venv, ensurepip" >/dev/null 2>&1; then
    echo "python_venv: $python -m venv is unavailable (install Debian's python3-venv)" >&2
    exit 1
  fi
  echo "python_venv: installing ${requirements[*]} into $dir" >&2
  [ -x "$dir/bin/python" ] || "$python" -m venv "$dir" >&2 ||
    { echo "python_venv: $python -m venv $dir failed" >&2; exit 1; }
  "$dir/bin/pip" install --disable-pip-version-check --quiet "${requirements[@]}" >&2 ||
    { echo "python_venv: pip install ${requirements[*]} into $dir failed" >&2; exit 1; }
  has_requirements || { echo "python_venv: $dir lacks ${requirements[*]} after the install" >&2; exit 1; }
fi

# The package, from this checkout: no build isolation (the build requirements are above, and
# build/pip/ keeps the CMake build between installs), no dependencies (numpy and ml_dtypes
# came with jax).
"$dir/bin/pip" install --disable-pip-version-check --quiet --no-build-isolation --no-deps \
  "$@" . >&2 || { echo "python_venv: pip install . into $dir failed" >&2; exit 1; }
"$dir/bin/python" -c "import rpa" >&2 ||
  { echo "python_venv: $dir/bin/python cannot import rpa after the install" >&2; exit 1; }
echo "$(cd "$dir" && pwd)/bin/python"
