# Shared by scripts/python_venv.sh and scripts/python_v3_venv.sh (sourced, not run): the
# requirement check, the pinned install and the rpa package's install from this checkout.
# The caller sets `name` (its script's name, for messages), `dir` (the virtualenv),
# `python` (the interpreter that makes it) and `requirements` (pip requirement strings,
# pinned with == where the version matters).

# True when DIR/bin/python has every requirement (at the pinned version where one is pinned).
has_requirements() {
  [ -x "$dir/bin/python" ] &&
    "$dir/bin/python" - "$@" >/dev/null 2>&1 <<'PY'
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

# Makes the virtualenv with $python (if it is not there) and installs the requirements into
# it unless it has them all; pip install options may follow the requirements after `--`.
install_requirements() {
  local reqs=() opts=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do reqs+=("$1"); shift; done
  [ $# -gt 0 ] && shift
  opts=("$@")
  has_requirements "${reqs[@]}" && return 0
  if ! "$python" -c "import venv, ensurepip" >/dev/null 2>&1; then
    echo "$name: $python -m venv is unavailable (install Debian's python3-venv)" >&2
    exit 1
  fi
  echo "$name: installing ${reqs[*]} into $dir" >&2
  [ -x "$dir/bin/python" ] || "$python" -m venv "$dir" >&2 ||
    { echo "$name: $python -m venv $dir failed" >&2; exit 1; }
  "$dir/bin/pip" install --disable-pip-version-check --quiet "${opts[@]}" "${reqs[@]}" >&2 ||
    { echo "$name: pip install ${opts[*]} ${reqs[*]} into $dir failed" >&2; exit 1; }
  has_requirements "${reqs[@]}" ||
    { echo "$name: $dir lacks ${reqs[*]} after the install" >&2; exit 1; }
}

# The package, from this checkout: no build isolation (the build requirements are installed),
# no dependencies (numpy and ml_dtypes came with jax). Both scripts build in one CMake
# directory, build/pip-shared, with one compiler named (g++; Debian's Python 3.11 would pick
# x86_64-linux-gnu-g++ and pyenv's 3.12 g++, and a changed compiler empties the CMake cache):
# the libraries compile once, and the other Python rebuilds only nanobind and the module
# (pyproject.toml's build/pip/{wheel_tag} stays the default of a plain `pip install .`).
# Through ccache where there is one (scripts/test.sh: the release build reuses the objects).
# Arguments: pip install options. With RPA_VENV_REQUIREMENTS_ONLY=1 (scripts/test.sh installs
# the second virtualenv's requirements while the first builds) it returns before the package.
install_rpa() {
  [ "${RPA_VENV_REQUIREMENTS_ONLY:-}" = 1 ] && return 0
  local launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(--config-settings=cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  "$dir/bin/pip" install --disable-pip-version-check --quiet --no-build-isolation --no-deps \
    --config-settings=build-dir=build/pip-shared \
    --config-settings=cmake.define.CMAKE_CXX_COMPILER=g++ "${launcher[@]}" \
    "$@" . >&2 || { echo "$name: pip install . into $dir failed" >&2; exit 1; }
  "$dir/bin/python" -c "import rpa" >&2 ||
    { echo "$name: $dir/bin/python cannot import rpa after the install" >&2; exit 1; }
  echo "$(cd "$dir" && pwd)/bin/python"
}
