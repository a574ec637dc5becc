#!/usr/bin/env bash
# Builds rpa (release, warnings as errors) and runs it with the given arguments, e.g.
#   scripts/rpa.sh validate corpus/modes/soft_cap_negative_zero.npz --mode jax
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

"$root/scripts/install_deps.sh"
cmake -S "$root" -B "$root/build/release" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DRPA_WERROR=ON -DCMAKE_CXX_COMPILER=g++ >&2
cmake --build "$root/build/release" -j "$(nproc)" --target rpa >&2
exec "$root/build/release/rpa" "$@"
