#!/usr/bin/env bash
# Builds and runs every test: a release build with warnings as errors (g++), then the same
# tests under AddressSanitizer + UndefinedBehaviorSanitizer (clang, so both compilers'
# warnings are checked), where the label "fuzz" also builds the libFuzzer targets with
# fuzz/build.sh as OSS-Fuzz calls it and fuzzes each for RPA_FUZZ_SECONDS (default 60).
# RPA_INTERPRET_BUDGET=full runs jax_v3's sweeps with all their calls (tests/CMakeLists.txt;
# the default, ci, sends fewer calls that reach the same features).
# Usage: scripts/test.sh [extra ctest arguments, e.g. -L unit, or -LE fuzz to skip fuzzing]
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_deps.sh
jobs=$(nproc)
# ccache, its cache in build/ccache (a fresh clone starts empty): the package builds and the
# release build compile the libraries with the same flags (position-independent, as the
# Python module needs them, and the same compiler, g++), in build directories two levels
# below the checkout (build/pip-shared, build/release), so with CCACHE_BASEDIR making the
# paths relative the release build takes their objects from the cache instead of compiling
# them a third time.
export CCACHE_DIR="$PWD/build/ccache" CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=true

echo "== the Python package (pip install . into build/venv and build/v3venv, -Werror)"
# The virtualenv of the ctest label "jax_v3" (release build only): Python >= 3.12, the JAX
# tpu-inference 0.32.0 pins (jax==0.11.2), tpu-inference without its dependencies, and the
# rpa package built from this checkout for that Python. Its requirements install in the
# background while the first virtualenv's install and package build run (pip waits on the
# disk and the index, the build on the cores); the package then builds for it in the same
# CMake directory (scripts/venv_lib.sh), which recompiles only its module.
RPA_VENV_REQUIREMENTS_ONLY=1 scripts/python_v3_venv.sh build/v3venv &
v3_requirements=$!
# The virtualenv of the ctest labels "python" and "jax" (release build only): the pinned CPU
# JAX, pytest, hypothesis, and the rpa package built from this checkout. A failed install or
# build stops here.
python=$(scripts/python_venv.sh build/venv --config-settings=cmake.define.RPA_WERROR=ON) ||
  { wait "$v3_requirements" || true; exit 1; }
wait "$v3_requirements"
v3_python=$(scripts/python_v3_venv.sh build/v3venv --config-settings=cmake.define.RPA_WERROR=ON)

echo "== release build (g++, -Werror)"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DRPA_WERROR=ON \
  -DCMAKE_CXX_COMPILER=g++ -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DRPA_JAX_PYTHON="$python" \
  -DRPA_INTERPRET_BUDGET="${RPA_INTERPRET_BUDGET:-ci}" \
  -DRPA_PACKAGE_PYTHON="$python" -DRPA_V3_PYTHON="$v3_python" >/dev/null
cmake --build build/release -j "$jobs"

echo "== ASan + UBSan build (clang, -Werror), at nice 19 beside the release tests"
# -O1 (with Debug's assertions, Eigen's included): at -O0 the property suite's Eigen code
# runs ~10x slower and the sanitizers find nothing more. -gline-tables-only, as OSS-Fuzz
# builds: a sanitizer's report names each frame's function (without its parameter types),
# file, line and inlined frames from the line tables alone; full debug info (-g) adds the
# variables a debugger shows, at 6-15% more compile time per file here.
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug \
  -DCMAKE_CXX_FLAGS_DEBUG="-gline-tables-only -O1" \
  -DRPA_WERROR=ON -DRPA_SANITIZE=ON -DRPA_FUZZ_TESTS=ON -DCMAKE_CXX_COMPILER=clang++ \
  -DRPA_PACKAGE_PYTHON="$python" >/dev/null
# The build runs while the release tests do, at the lowest priority: it takes the cores they
# leave idle (a Ray cluster's test waiting on its workers, a test's subprocess starting, the
# last long test alone) and yields them whenever a test wants them. Its own session and
# process group (setsid), so that a failing release stage stops all of it; its output follows
# the tests'. Where the kernel schedules each session as a group (autogroup, Linux's default),
# a new session's group competes with the tests' as an equal whatever its processes' nice, so
# the group's own nice is set to 19 as well (/proc/self/autogroup): with the processes' nice
# alone, jax.pallas ran past its 540 s limit (377 s in the last CI), and with both a 6-call v3
# sweep took 19.2-19.5 s beside the build and 19.6-20.4 s alone.
# shellcheck disable=SC2016  # $1 is the inner shell's: the job count passed after "_"
setsid -w bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null || true
  exec nice -n 19 cmake --build build/asan -j "$1"' _ "$jobs" >build/asan/build.log 2>&1 &
asan_build=$!
trap 'kill -- -"$asan_build" 2>/dev/null || true' EXIT

echo "== release tests"
ctest --test-dir build/release --output-on-failure -j "$jobs" "$@"

echo "== ASan + UBSan build: its output (if not done, it has the cores to itself now)"
waited=$SECONDS
asan_status=0
wait "$asan_build" || asan_status=$?
trap - EXIT
cat build/asan/build.log
if ((asan_status != 0)); then
  echo "ASan + UBSan build failed (exit $asan_status)" >&2
  exit 1
fi
echo "== ASan + UBSan build done, $((SECONDS - waited)) s after the release tests"
# The properties search at a third of the release stage's budget here (100 cases each, unless
# RC_PARAMS says otherwise): the sanitizers look for memory and undefined behaviour on the paths
# the cases take, which 100 cases of each property already walk; the release stage's 300 search
# for wrong answers. That leaves CI's time for the jax_v3 label's interpret-mode kernel runs.
# For the same reason the long-context members keep to a quarter of the length there
# (properties/sanitized.h) and cli.bench times one run (RPA_BENCH_RUNS=1, tests/CMakeLists.txt).
RC_PARAMS=${RC_PARAMS:-max_success=100} \
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  ctest --test-dir build/asan --output-on-failure -j "$jobs" "$@"
