#!/usr/bin/env bash
# Fuzzes one target here (DESIGN.md section 10):
#   fuzz/run.sh TARGET SECONDS [JOBS]
# JOBS (default: the number of cores) above 1 runs libFuzzer's -fork=JOBS; 1 runs one plain
# libFuzzer process. The target comes from fuzz/build.sh (ASan + UBSan, build/fuzz/out),
# built first, unless RPA_FUZZ_OUT names the $OUT of an earlier fuzz/build.sh run. Its flags
# are the [libfuzzer] settings of corpus/fuzz/TARGET.options, plus the .dict.
#
# Corpus: RPA_FUZZ_CORPUS, default corpus/fuzz/TARGET. With the default, new inputs are
# collected in a temporary directory, then merged (-merge=1) against the seeds, and only
# those that add coverage are added to corpus/fuzz/TARGET: seeds are never changed or
# removed. Any other directory receives the new inputs directly, and the seed directories
# (fuzz/CMakeLists.txt: the target's own and its EXTRA_CORPUS ones) are read, not written.
#
# Reproducers (crash-, leak-, timeout-, oom-) go to RPA_FUZZ_ARTIFACTS, default
# artifacts/TARGET beside $OUT (build/fuzz/artifacts/TARGET); libFuzzer's output to
# logs/TARGET.log beside it. Exit 0 after a clean run, 1 when the run left a reproducer
# (each printed with the command that replays it), 2 on a usage or build error.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(dirname "$here")

log() { echo "fuzz/run.sh: $*" >&2; }
die() {
  log "error: $*"
  exit 2
}
usage() { die "usage: fuzz/run.sh TARGET SECONDS [JOBS] (targets: $("$here/build.sh" --targets | tr '\n' ' '))"; }

(($# == 2 || $# == 3)) || usage
target=$1
seconds=$2
jobs=${3:-$(nproc)}
# -max_total_time=0 would mean no limit.
[[ $seconds =~ ^[1-9][0-9]*$ && $jobs =~ ^[1-9][0-9]*$ ]] || usage
"$here/build.sh" --targets | grep -qxF -- "$target" || usage

if [[ -n ${RPA_FUZZ_OUT:-} ]]; then
  [[ -d $RPA_FUZZ_OUT ]] || die "RPA_FUZZ_OUT=$RPA_FUZZ_OUT is not a directory (fuzz/build.sh's \$OUT)"
  out=$(cd "$RPA_FUZZ_OUT" && pwd)
else
  out=$repo/build/fuzz/out
  OUT=$out WORK=$repo/build/fuzz/work "$here/build.sh" || die "fuzz/build.sh failed"
fi
fuzzer=$out/$target
[[ -x $fuzzer ]] || die "$fuzzer is missing: fuzz/build.sh built no $target"

state=$(dirname "$out")
artifacts=${RPA_FUZZ_ARTIFACTS:-$state/artifacts/$target}
mkdir -p "$artifacts" "$state/logs"
artifacts=$(cd "$artifacts" && pwd)
logfile=$state/logs/$target.log

mapfile -t limits < <("$here/build.sh" --flags "$target")
dict=()
[[ -f $out/$target.dict ]] && dict=("-dict=$out/$target.dict")
mapfile -t seed_dirs < <("$here/build.sh" --seed-dirs "$target")
seed_dir=${seed_dirs[0]}
corpus=${RPA_FUZZ_CORPUS:-$seed_dir}
mkdir -p "$corpus"
corpus=$(cd "$corpus" && pwd)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [[ $(realpath "$corpus") == "$(realpath -m "$seed_dir")" ]]; then
  merge=1
  output=$tmp/new
  mkdir "$output"
else
  merge=0
  output=$corpus
fi
# Every seed directory is read (the target's own too, in merge mode); only $output is written.
read_only=()
for dir in "${seed_dirs[@]}"; do
  [[ -d $dir && $(realpath "$dir") != "$(realpath "$output")" ]] && read_only+=("$dir")
done

# UBSan as OSS-Fuzz runs it: unsigned overflow is instrumented as a coverage signal only.
# Appended, so that options from the caller (scripts/test.sh sets print_stacktrace) keep it.
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}:silence_unsigned_overflow=1"
cmd=("$fuzzer" "${limits[@]}" "${dict[@]}" -max_total_time="$seconds" -print_final_stats=1
  -artifact_prefix="$artifacts/")
((jobs > 1)) && cmd+=(-fork="$jobs")
cmd+=("$output" "${read_only[@]}")
log "${cmd[*]}"
touch "$tmp/start"
set +e
"${cmd[@]}" 2>&1 | tee "$logfile" >&2
status=${PIPESTATUS[0]}
set -e

mapfile -t found < <(find "$artifacts" -maxdepth 1 -type f -newer "$tmp/start" \
  \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | LC_ALL=C sort)
mapfile -t slow < <(find "$artifacts" -maxdepth 1 -type f -newer "$tmp/start" -name 'slow-unit-*')

# libFuzzer's last stats line: "#N DONE cov: C ft: F corp: K/Sb ... exec/s: E ..." in a plain
# run, "#N: cov: C ft: F corp: K exec/s: E ..." from the parent of a -fork run.
last=$(grep -E '^#[0-9]+.* cov: [0-9]+' "$logfile" | tail -n 1 || true)
field() { sed -nE "s|.* $1:? ([0-9]+).*|\\1|p" <<<"$last"; }
mode=$( ((jobs > 1)) && echo "-fork=$jobs" || echo "1 process")
if [[ -n $last ]]; then
  echo "$target: ${seconds} s, $mode, libFuzzer exit $status: exec/s $(field exec/s)," \
    "corp $(field corp), cov $(field cov), ft $(field ft) (last stats line: $last)"
else
  echo "$target: ${seconds} s, $mode, libFuzzer exit $status before its first stats line"
fi

if ((merge)) && ((status == 0 && ${#found[@]} == 0)); then
  new_inputs=$(find "$output" -type f | wc -l)
  added=0
  if ((new_inputs > 0)); then
    # The seeds are the merge's first directory, so they count as coverage already had;
    # extra seed directories are copied in under a prefix that keeps their names apart.
    merged=$tmp/merged
    mkdir "$merged"
    mkdir -p "$seed_dir"
    find "$seed_dir" -maxdepth 1 -type f -exec cp -t "$merged" {} +
    for dir in "${read_only[@]}"; do
      [[ $dir == "$seed_dir" ]] && continue
      for f in "$dir"/*; do
        [[ -f $f ]] && cp "$f" "$merged/extra.$(basename "$dir").$(basename "$f")"
      done
    done
    find "$merged" -type f -printf '%f\n' | LC_ALL=C sort >"$tmp/before"
    "$fuzzer" "${limits[@]}" -merge=1 -artifact_prefix="$artifacts/" "$merged" "$output" \
      >"$state/logs/$target.merge.log" 2>&1 || die "merge failed: $state/logs/$target.merge.log"
    while read -r name; do
      cp "$merged/$name" "$seed_dir/$name"
      added=$((added + 1))
    done < <(find "$merged" -type f -printf '%f\n' | LC_ALL=C sort | comm -13 "$tmp/before" -)
  fi
  echo "$target: corpus ${seed_dir#"$repo/"}: $(find "$seed_dir" -maxdepth 1 -type f | wc -l) files," \
    "$added added by the merge of $new_inputs new inputs"
else
  echo "$target: corpus $corpus: $(find "$corpus" -type f | wc -l) files"
fi

for f in "${slow[@]}"; do
  log "note: slow input (not a failure): $f"
done
if ((${#found[@]} == 0 && status == 0)); then
  exit 0
fi
if ((${#found[@]} == 0)); then
  echo "$target: FAILED: libFuzzer exited with $status and left no reproducer; see $logfile"
  exit 1
fi
echo "$target: FAILED: ${#found[@]} reproducer(s); replay each with the same limits:"
for f in "${found[@]}"; do
  echo "  $fuzzer ${limits[*]} $f"
done
echo "minimize one before adding it to corpus/ (DESIGN.md section 10):"
echo "  $fuzzer ${limits[*]} -minimize_crash=1 -max_total_time=60 -exact_artifact_path=${found[0]}.min ${found[0]}"
((merge)) && echo "the new inputs of this run were not merged into ${seed_dir#"$repo/"}"
exit 1
