#!/usr/bin/env bash
# What the committed corpus covers: a clang source-based coverage build of the fuzz targets
# (-fprofile-instr-generate -fcoverage-mapping) that links the replay main
# (fuzz/replay_main.cc, no engine), in build/fuzz-coverage; each target replays its whole
# corpus (corpus/fuzz/TARGET/ and its EXTRA_CORPUS directories, fuzz/CMakeLists.txt) once,
# then llvm-cov reports per source file of the repository and sums up the core files.
#   fuzz/coverage.sh [TARGET...]     default: every target
# CXX picks the compiler (default clang++); llvm-profdata/llvm-cov of the same major
# version are used. The report is kept in build/fuzz-coverage/report.txt.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
log() { echo "fuzz/coverage.sh: $*" >&2; }
die() {
  log "error: $*"
  exit 2
}

mapfile -t all < <("$here/build.sh" --targets)
if (($#)); then
  targets=("$@")
  for t in "${targets[@]}"; do
    printf '%s\n' "${all[@]}" | grep -qxF -- "$t" || die "unknown target '$t' (targets: ${all[*]})"
  done
else
  targets=("${all[@]}")
fi

cxx=${CXX:-clang++}
major=$("$cxx" -dumpversion | cut -d. -f1)
tool() {
  if command -v "$1-$major" >/dev/null; then
    echo "$1-$major"
  elif command -v "$1" >/dev/null; then
    echo "$1"
  else
    die "neither $1-$major nor $1 is installed (apt-get install llvm-$major)"
  fi
}
profdata=$(tool llvm-profdata)
cov=$(tool llvm-cov)

build=$repo/build/fuzz-coverage
flags="-O1 -g -fprofile-instr-generate -fcoverage-mapping"
log "configuring $build ($cxx)"
cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG= \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fprofile-instr-generate" \
  -DRPA_FUZZ_ONLY=ON -DRPA_FUZZ_ENGINE= -DRPA_NATIVE=OFF -DRPA_SANITIZE=OFF >&2
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >&2

profiles=$build/profiles
rm -rf "$profiles"
mkdir -p "$profiles"
objects=()
replay_failed=()
for t in "${targets[@]}"; do
  dirs=()
  while read -r dir; do
    [[ -d $dir ]] && dirs+=("$dir")
  done < <("$here/build.sh" --seed-dirs "$t")
  if ((${#dirs[@]} == 0)); then
    log "warning: $t has no corpus directory"
    continue
  fi
  log "replaying ${dirs[*]#"$repo/"} through $t"
  if ! LLVM_PROFILE_FILE="$profiles/$t.profraw" "$build/fuzz/$t" "${dirs[@]}" \
    >"$profiles/$t.log" 2>&1; then
    replay_failed+=("$t")
    log "warning: $t failed on its corpus (the profile is partial or missing): $profiles/$t.log"
  fi
  objects+=(-object "$build/fuzz/$t")
done
shopt -s nullglob
raw=("$profiles"/*.profraw)
((${#raw[@]})) || die "no profile was written"
"$profdata" merge -sparse "${raw[@]}" -o "$profiles/merged.profdata"

# The repository's own sources: not the system's headers (Eigen, the standard library).
report_args=("${objects[@]:1}" -instr-profile="$profiles/merged.profdata"
  -ignore-filename-regex='^/usr/')
"$cov" report "${report_args[@]}" | tee "$build/report.txt"

core=(validation/jax_validate.cc kernel/jax_kernel.cc kernel/default_schedule.cc kernel/block_math.h
  reference/jax_reference.cc casefile/case_file.cc
  casefile/npy.cc casefile/zip_archive.cc)
"$cov" export -summary-only "${report_args[@]}" >"$profiles/summary.json"
python3 - "$repo" "$profiles/summary.json" "${core[@]}" <<'EOF'
import json, os, sys

repo, summary, core = sys.argv[1], sys.argv[2], sys.argv[3:]
files = {os.path.relpath(f["filename"], repo): f["summary"]["lines"]
         for f in json.load(open(summary))["data"][0]["files"]}
parts = []
for name in core:
    lines = files.get(name)
    parts.append(f"{name} {lines['percent']:.1f}% ({lines['covered']}/{lines['count']})"
                 if lines else f"{name} no data (not linked into the targets)")
print("line coverage: " + ", ".join(parts))
EOF
if ((${#replay_failed[@]})); then
  echo "replay failed for: ${replay_failed[*]} (see $profiles/TARGET.log)"
  exit 1
fi
