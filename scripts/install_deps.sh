#!/usr/bin/env bash
# Installs, from Debian's packages, whatever the build and the tests need and this machine
# lacks. Idempotent: when everything is present it changes nothing and needs no network.
set -euo pipefail

packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev  # toolchains; clang for sanitizers, fuzzing
  libeigen3-dev                                   # the dense reference
  librapidcheck-dev                               # properties (with rapidcheck/gtest.h)
  libgtest-dev libgmock-dev                       # unit tests
  libbenchmark-dev                                # bench/
  libzip-dev                                      # .npz containers
  python3-venv                                    # scripts/python_venv.sh: JAX, the rpa package
  llvm-14                                         # llvm-cov, llvm-profdata for fuzz/coverage.sh
  zip unzip                                       # fuzz/build.sh seed zips, fuzz/check_build.sh
  ccache                                          # scripts/test.sh: one compile of the libraries
  chromium fonts-dejavu-core                      # ctest cli.report renders report.html headless
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install_deps: installing ${missing[*]}" >&2
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >&2
