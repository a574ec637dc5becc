#!/usr/bin/env bash
# Builds the libFuzzer targets (bodies in harness/<target>.cc, fuzz/entry.cc each; DESIGN.md section 10) the way OSS-Fuzz and
# ClusterFuzzLite build a project. Their build.sh (.clusterfuzzlite/build.sh) calls this
# script inside the base-builder image with $CC, $CXX, $CFLAGS, $CXXFLAGS (sanitizer and
# coverage flags included), $LIB_FUZZING_ENGINE, $SRC, $WORK and $OUT set; it leaves in $OUT,
# for every fuzz_* executable the build produced:
#   <target>                   the fuzzer
#   <target>_seed_corpus.zip   corpus/fuzz/<target>/ and the target's EXTRA_CORPUS
#                              directories (fuzz/CMakeLists.txt), files of at most max_len
#   <target>.dict              corpus/fuzz/<target>.dict
#   <target>.options           corpus/fuzz/<target>.options (max_len, timeout, ...)
# The runner image has no libzip, so when $SRC holds libzip and zlib checkouts (the
# ClusterFuzzLite Dockerfile clones them) both are built statically with $CC/$CFLAGS into
# $WORK/deps and linked in; $SRC/eigen is installed there too. Without them the system's
# libzip and Eigen are used.
#
# Locally (clang with libFuzzer; ASan + UBSan by default):
#   fuzz/build.sh                      -> build/fuzz/out, intermediate files in build/fuzz/work
#   RPA_WERROR=ON fuzz/build.sh        warnings as errors
#   CFLAGS=... CXXFLAGS=... OUT=... fuzz/build.sh   any of the variables above, as OSS-Fuzz
# Queries, so that fuzz/run.sh, fuzz/coverage.sh and fuzz/check_build.sh read the targets
# and their seeds from fuzz/CMakeLists.txt and corpus/fuzz/*.options, never from a copy:
#   fuzz/build.sh --targets            the targets, one a line
#   fuzz/build.sh --seed-dirs TARGET   its seed directories, the target's own first
#   fuzz/build.sh --flags TARGET       its .options settings as libFuzzer flags (-max_len=...)
#   fuzz/build.sh --seed-files TARGET  the seed files that go into its zip (relative to corpus/)
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { echo "fuzz/build.sh: $*" >&2; }
die() {
  log "error: $*"
  exit 1
}

# Every target is one rpa_add_fuzzer(name [MUTATOR source] [EXTRA_CORPUS dir...]) line, as
# the header of fuzz/CMakeLists.txt asks; the EXTRA_CORPUS directories are relative to corpus/.
targets() {
  sed -nE 's/^rpa_add_fuzzer\(([A-Za-z0-9_-]+).*/\1/p' "$repo/fuzz/CMakeLists.txt"
}

seed_dirs() {
  local target=$1 line dir
  line=$(grep -E "^rpa_add_fuzzer\\(${target}[ )]" "$repo/fuzz/CMakeLists.txt") ||
    die "no rpa_add_fuzzer($target) in fuzz/CMakeLists.txt"
  echo "$repo/corpus/fuzz/$target"
  if [[ $line =~ EXTRA_CORPUS[[:space:]]+([^\)]*) ]]; then
    for dir in ${BASH_REMATCH[1]}; do
      echo "$repo/corpus/$dir"
    done
  fi
}

# The [libfuzzer] section of corpus/fuzz/<target>.options ("key = value" lines; '#' and ';'
# start comments, as in the INI files OSS-Fuzz reads), one flag a line.
flags() {
  local options="$repo/corpus/fuzz/$1.options"
  [[ -f $options ]] || return 0
  awk '
    /^[[:space:]]*([#;]|$)/ { next }
    /^[[:space:]]*\[/ { section = tolower($0); gsub(/[][[:space:]]/, "", section); next }
    section == "libfuzzer" && index($0, "=") {
      key = substr($0, 1, index($0, "=") - 1); value = substr($0, index($0, "=") + 1)
      gsub(/^[[:space:]]+|[[:space:]]+$/, "", key); gsub(/^[[:space:]]+|[[:space:]]+$/, "", value)
      print "-" key "=" value
    }' "$options"
}

# The files ctest replays for the target (fuzz/CMakeLists.txt: every file of its seed
# directories but *.tsv and *.md) that fit in max_len: libFuzzer would cut longer ones.
seed_files() {
  local target=$1 max_len dir
  max_len=$(flags "$target" | sed -n 's/^-max_len=//p')
  local size=()
  [[ -n $max_len ]] && size=(-size "-$((max_len + 1))c")
  while read -r dir; do
    [[ -d $dir ]] || continue
    find "$dir" -maxdepth 1 -type f ! -name '*.tsv' ! -name '*.md' "${size[@]}" -printf '%f\n' |
      sed "s|^|${dir#"$repo/corpus/"}/|"
  done < <(seed_dirs "$target") | LC_ALL=C sort
}

case ${1:-} in
  --targets) targets; exit ;;
  --seed-dirs) seed_dirs "${2:?usage: fuzz/build.sh --seed-dirs TARGET}"; exit ;;
  --flags) flags "${2:?usage: fuzz/build.sh --flags TARGET}"; exit ;;
  --seed-files) seed_files "${2:?usage: fuzz/build.sh --seed-files TARGET}"; exit ;;
  "") ;;
  *) die "unknown argument '$1' (OSS-Fuzz passes none; see the header for the queries)" ;;
esac

local_flags="-O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=all -fsanitize=fuzzer-no-link"
CC=${CC:-clang}
CXX=${CXX:-clang++}
CFLAGS=${CFLAGS-$local_flags}
CXXFLAGS=${CXXFLAGS-$local_flags}
LIB_FUZZING_ENGINE=${LIB_FUZZING_ENGINE:--fsanitize=fuzzer}
SRC=${SRC:-}
OUT=${OUT:-$repo/build/fuzz/out}
WORK=${WORK:-$repo/build/fuzz/work}
RPA_WERROR=${RPA_WERROR:-OFF}
mkdir -p "$OUT" "$WORK"
OUT=$(cd "$OUT" && pwd)
WORK=$(cd "$WORK" && pwd)
command -v zip >/dev/null || die "zip is not installed (apt-get install zip)"
command -v ninja >/dev/null || die "ninja is not installed (apt-get install ninja-build)"

# Static dependencies, each with the same compiler and flags as the targets (sanitizers
# and coverage instrumentation included), installed into $WORK/deps.
deps=$WORK/deps
rpa_deps=()
prefix=
dep_cmake() {
  local name=$1
  shift
  log "building $name from $SRC/$name into $deps"
  cmake -S "$SRC/$name" -B "$WORK/$name" -G Ninja --no-warn-unused-cli \
    -DCMAKE_C_COMPILER="$CC" -DCMAKE_C_FLAGS="$CFLAGS" \
    -DCMAKE_CXX_COMPILER="$CXX" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
    -DCMAKE_INSTALL_PREFIX="$deps" -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_PREFIX_PATH="$deps" \
    -DBUILD_SHARED_LIBS=OFF -DBUILD_TESTING=OFF "$@" >"$WORK/$name.cmake.log" ||
    die "configuring $name failed: $WORK/$name.cmake.log"
  cmake --build "$WORK/$name" >"$WORK/$name.build.log" ||
    die "building $name failed: $WORK/$name.build.log"
  cmake --install "$WORK/$name" >/dev/null
}
if [[ -n $SRC && -d $SRC/libzip && -d $SRC/zlib ]]; then
  # zlib's CMake builds the shared library too (before 1.3.2 it has no switch for that);
  # libzip and rpa are pointed at the static one by path.
  dep_cmake zlib -DZLIB_BUILD_SHARED=OFF -DZLIB_BUILD_TESTING=OFF -DZLIB_BUILD_EXAMPLES=OFF
  libz=$deps/lib/libz.a
  [[ -f $libz ]] || die "zlib installed no $libz"
  zlib_args=(-DZLIB_INCLUDE_DIR="$deps/include" -DZLIB_LIBRARY="$libz")
  dep_cmake libzip "${zlib_args[@]}" -DENABLE_COMMONCRYPTO=OFF -DENABLE_GNUTLS=OFF \
    -DENABLE_MBEDTLS=OFF -DENABLE_OPENSSL=OFF -DENABLE_WINDOWS_CRYPTO=OFF -DENABLE_BZIP2=OFF \
    -DENABLE_LZMA=OFF -DENABLE_ZSTD=OFF -DBUILD_TOOLS=OFF -DBUILD_REGRESS=OFF \
    -DBUILD_OSSFUZZ=OFF -DBUILD_EXAMPLES=OFF -DBUILD_DOC=OFF
  [[ -f $deps/lib/libzip.a ]] || die "libzip installed no $deps/lib/libzip.a"
  rpa_deps+=(-DLIBZIP_INCLUDE_DIR="$deps/include" -DLIBZIP_LIBRARY="$deps/lib/libzip.a"
    "${zlib_args[@]}")
  prefix=$deps
elif [[ -n $SRC && (-d $SRC/libzip || -d $SRC/zlib) ]]; then
  die "static libzip needs both $SRC/libzip and $SRC/zlib"
else
  log "no \$SRC/libzip and \$SRC/zlib checkouts: linking the system's libzip"
  # Found again, not kept from an earlier run with them in the same $WORK.
  rpa_deps+=(-ULIBZIP_INCLUDE_DIR -ULIBZIP_LIBRARY -UZLIB_INCLUDE_DIR -UZLIB_LIBRARY)
fi
# Ubuntu 20.04 (OSS-Fuzz's base image) has Eigen 3.3.7: no Eigen::PropagateNaN (3.4), and
# it uses std::result_of, which libc++ leaves out in C++20. Header-only; installed for its
# CMake package files.
if [[ -n $SRC && -d $SRC/eigen ]]; then
  dep_cmake eigen -DEIGEN_BUILD_DOC=OFF -DEIGEN_BUILD_PKGCONFIG=OFF -DEIGEN_BUILD_BLAS=OFF \
    -DEIGEN_BUILD_LAPACK=OFF
  prefix=$deps
fi
rpa_deps+=(-DCMAKE_PREFIX_PATH="$prefix")

# Debug with empty per-type flags: $CXXFLAGS alone set the optimization, and assertions
# (Eigen's included) stay on, as in scripts/test.sh's sanitizer build.
build=$WORK/build
log "configuring $build (CXX=$CXX, RPA_WERROR=$RPA_WERROR)"
cmake -S "$repo" -B "$build" -G Ninja --no-warn-unused-cli \
  -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG= -DCMAKE_CXX_FLAGS_DEBUG= \
  -DCMAKE_C_COMPILER="$CC" -DCMAKE_CXX_COMPILER="$CXX" \
  -DCMAKE_C_FLAGS="$CFLAGS" -DCMAKE_CXX_FLAGS="$CXXFLAGS" \
  -DRPA_FUZZ_ONLY=ON -DRPA_NATIVE=OFF -DRPA_SANITIZE=OFF -DRPA_WERROR="$RPA_WERROR" \
  -DRPA_FUZZ_ENGINE="$LIB_FUZZING_ENGINE" "${rpa_deps[@]}" >&2
log "building"
cmake --build "$build" -j "$(nproc)" >&2

mapfile -t built < <(find "$build/fuzz" -maxdepth 1 -type f -executable -name 'fuzz_*' -printf '%f\n' | LC_ALL=C sort)
((${#built[@]})) || die "the build produced no fuzz_* executable in $build/fuzz"
for target in "${built[@]}"; do
  cp "$build/fuzz/$target" "$OUT/$target"
  zipfile=$OUT/${target}_seed_corpus.zip
  rm -f "$zipfile"
  mapfile -t seeds < <(seed_files "$target")
  if ((${#seeds[@]})); then
    (cd "$repo/corpus" && printf '%s\n' "${seeds[@]}" | zip -q -X -@ "$zipfile")
  else
    log "warning: $target has no seed files"
  fi
  for ext in dict options; do
    if [[ -f $repo/corpus/fuzz/$target.$ext ]]; then
      cp "$repo/corpus/fuzz/$target.$ext" "$OUT/$target.$ext"
    else
      log "warning: no corpus/fuzz/$target.$ext"
    fi
  done
  log "$OUT/$target (${#seeds[@]} seeds)"
done
