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

# The package, from this checkout: no build isolation (the build requirements are installed,
# and build/pip/{wheel_tag} keeps the CMake build between installs, one per Python), no
# dependencies (numpy and ml_dtypes came with jax). Arguments: pip install options.
install_rpa() {
  "$dir/bin/pip" install --disable-pip-version-check --quiet --no-build-isolation --no-deps \
    "$@" . >&2 || { echo "$name: pip install . into $dir failed" >&2; exit 1; }
  "$dir/bin/python" -c "import rpa" >&2 ||
    { echo "$name: $dir/bin/python cannot import rpa after the install" >&2; exit 1; }
  echo "$(cd "$dir" && pwd)/bin/python"
}
