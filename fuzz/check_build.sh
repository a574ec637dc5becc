#!/usr/bin/env bash
# The ctest check fuzz.build (label fuzz, RPA_FUZZ_TESTS): runs fuzz/build.sh as OSS-Fuzz
# and ClusterFuzzLite call it, with their variables set explicitly (clang, ASan + UBSan
# flags as in OSS-Fuzz's base-builder image, -fsanitize=fuzzer-no-link, libFuzzer as the
# engine, warnings as errors), then checks what it left in $OUT the way OSS-Fuzz's
# check_build would use it: every target of fuzz/CMakeLists.txt is a libFuzzer binary with
# its seed corpus zip (one entry per seed file of at most max_len), .dict and .options, and
# runs its unzipped seed corpus cleanly (-runs=0).
#   fuzz/check_build.sh BUILD_DIR   -> BUILD_DIR/oss-fuzz/{out,work,seeds}
# One line per check, then "N passed, M failed"; exit 1 on any failure.
# Differences from OSS-Fuzz: libstdc++ instead of libc++ and the machine's clang and libzip
# (no $SRC/libzip here, so no static build of it).
# shellcheck disable=SC2317  # the check functions below are called through check()
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")
(($# == 1)) || {
  echo "usage: fuzz/check_build.sh BUILD_DIR" >&2
  exit 2
}
mkdir -p "$1"
base=$(cd "$1" && pwd)/oss-fuzz
out=$base/out

passed=0
failed=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# check DESCRIPTION COMMAND...: one line, with the command's last output lines on failure.
check() {
  local what=$1
  shift
  if "$@" >"$tmp/check.log" 2>&1; then
    passed=$((passed + 1))
    echo "ok   $what"
  else
    failed=$((failed + 1))
    echo "FAIL $what"
    tail -n 20 "$tmp/check.log" | sed 's/^/     /'
  fi
}
finish() {
  echo "$passed passed, $failed failed"
  ((failed == 0)) && exit 0
  exit 1
}

# OSS-Fuzz's base-clang CFLAGS (less its -Wno-error=... for legacy C, which would hide
# what RPA_WERROR is here to catch), then SANITIZER_FLAGS_address, SANITIZER_FLAGS_undefined
# and COVERAGE_FLAGS of base-builder, combined as one ASan + UBSan build.
ubsan_checks=array-bounds,bool,builtin,enum,function,integer-divide-by-zero,null,object-size,return,returns-nonnull-attribute,shift,signed-integer-overflow,unreachable,vla-bound,vptr
flags="-O1 -fno-omit-frame-pointer -gline-tables-only -DFUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION"
flags+=" -fsanitize=address -fsanitize-address-use-after-scope"
flags+=" -fsanitize=$ubsan_checks,unsigned-integer-overflow -fno-sanitize-recover=$ubsan_checks"
flags+=" -fsanitize=fuzzer-no-link"
# $SRC as OSS-Fuzz lays it out: the project's checkout under it, and nothing else.
mkdir -p "$base/src"
ln -sfn "$repo" "$base/src/rpa"
rm -rf "$out"
started=$SECONDS
build() {
  env CC=clang CXX=clang++ CFLAGS="$flags" CXXFLAGS="$flags" LIB_FUZZING_ENGINE=-fsanitize=fuzzer \
    SRC="$base/src" OUT="$out" WORK="$base/work" RPA_WERROR=ON "$repo/fuzz/build.sh"
}
check "fuzz/build.sh as OSS-Fuzz calls it (OUT=$out)" build
echo "     ($((SECONDS - started)) s)"
((failed == 0)) || finish

# As OSS-Fuzz runs the targets: unsigned overflow is instrumented for coverage only.
export UBSAN_OPTIONS=print_stacktrace=1:silence_unsigned_overflow=1
mapfile -t targets < <("$repo/fuzz/build.sh" --targets)
only_targets() {
  diff <(printf '%s\n' "${targets[@]}" | LC_ALL=C sort) \
    <(find "$out" -maxdepth 1 -type f -executable -printf '%f\n' | LC_ALL=C sort)
}
check "\$OUT holds exactly the executables of fuzz/CMakeLists.txt: ${targets[*]}" only_targets

# The replay main (fuzz/replay_main.cc) exits 1 on -help=1: it skips flags and runs nothing.
is_libfuzzer() {
  local help
  help=$("$out/$1" -help=1 2>&1) && grep -q 'max_len' <<<"$help"
}
zip_entries() {
  local zip=$1 expected=$2 entries
  [[ -s $zip ]] || {
    echo "$zip is missing or empty"
    return 1
  }
  entries=$(unzip -Z1 "$zip" | grep -vc '/$' || true)
  echo "$zip: $entries entries, $expected seed files"
  ((entries == expected && entries > 0))
}
# The seed files ctest replays (all but *.tsv and *.md) that fit in the target's max_len.
count_seeds() {
  local target=$1 max_len dir count=0 size=()
  max_len=$("$repo/fuzz/build.sh" --flags "$target" | sed -n 's/^-max_len=//p')
  [[ -n $max_len ]] && size=(-size "-$((max_len + 1))c")
  while read -r dir; do
    [[ -d $dir ]] || continue
    count=$((count + $(find "$dir" -maxdepth 1 -type f ! -name '*.tsv' ! -name '*.md' "${size[@]}" | wc -l)))
  done < <("$repo/fuzz/build.sh" --seed-dirs "$target")
  echo "$count"
}
runs_seeds() {
  local target=$1 seeds=$base/seeds/$1 artifacts=$base/artifacts/$1 flags nonempty
  rm -rf "$seeds"
  mkdir -p "$seeds" "$artifacts"
  unzip -q "$out/${target}_seed_corpus.zip" -d "$seeds"
  mapfile -t flags < <("$repo/fuzz/build.sh" --flags "$target")
  "$out/$target" "${flags[@]}" -runs=0 -artifact_prefix="$artifacts/" "$seeds" 2>&1 | tee "$tmp/runs.log"
  ((PIPESTATUS[0] == 0)) || return 1
  # All of them read: "INFO:       N files found in DIR", empty files left out (libFuzzer
  # runs the empty input anyway).
  nonempty=$(find "$seeds" -type f -size +0 | wc -l)
  grep -Eq "INFO: +$nonempty files found in " "$tmp/runs.log"
}
for target in "${targets[@]}"; do
  check "$target: a libFuzzer binary (-help=1)" is_libfuzzer "$target"
  expected=$(count_seeds "$target")
  check "$target: ${target}_seed_corpus.zip has its $expected seed files" \
    zip_entries "$out/${target}_seed_corpus.zip" "$expected"
  check "$target: $target.dict" test -s "$out/$target.dict"
  check "$target: $target.options as in corpus/fuzz/" cmp "$out/$target.options" \
    "$repo/corpus/fuzz/$target.options"
  check "$target: runs its unzipped seeds cleanly (-runs=0)" runs_seeds "$target"
done
echo "(fuzz/check_build.sh: $((SECONDS - started)) s in all)"
finish
