#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ (clang 14, ASan+UBSan, in build-fuzz/) and runs
# each for N seconds on a copy of its corpus and regression inputs (the repo's folders
# only change when a file is added on purpose). Fails when any target crashes, leaks,
# trips a sanitizer or times out; prints the executions of each target. docs/fuzzing.md
#   scripts/fuzz.sh [--seconds N] [TARGET...]      N: 30 by default; TARGET: all by default
# A crash input is kept in build-fuzz/findings/<target>/ (move it to fuzz/regressions/).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TROUPE_FUZZ_BUILD_DIR:-$root/build-fuzz}
seconds=30
targets=()
while [ $# -gt 0 ]; do
  case $1 in
    --seconds) seconds=$2; shift 2 ;;
    --seconds=*) seconds=${1#*=}; shift ;;
    -*) echo "usage: $0 [--seconds N] [TARGET...]" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
# All: the names fuzz/CMakeLists.txt builds (TROUPE_FUZZ_NAMES), the one list of them (a
# list kept here too had missed a new target).
if [ ${#targets[@]} -eq 0 ]; then
  read -r -a targets <<< "$(sed -n '/^set(TROUPE_FUZZ_NAMES/,/)/p' "$root/fuzz/CMakeLists.txt" |
                            tr '()\n' '   ' | sed 's/set *TROUPE_FUZZ_NAMES//')"
fi
[ ${#targets[@]} -gt 0 ] || { echo "$(basename "$0"): no fuzz targets found in fuzz/CMakeLists.txt" >&2; exit 2; }

"$root/scripts/install-deps.sh" --fuzz
export CCACHE_DIR=${CCACHE_DIR:-$root/.cache/ccache}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 \
    -DTROUPE_FUZZ=ON -DTROUPE_TESTS=OFF -DTROUPE_CUDA=OFF >/dev/null
fi
build_start=$SECONDS
# The build's own status, not grep's: with pipefail, `| grep ... || true` hid a failed build.
rc=0
cmake --build "$build" -j "$(nproc)" --target fuzz_all > >(grep -vE '^\[[0-9]+/[0-9]+\] ' || true) || rc=$?
wait  # for the output filter
[ "$rc" -eq 0 ] || { echo "$(basename "$0"): the build failed (rc $rc)" >&2; exit "$rc"; }
echo "fuzz.sh: fuzz targets built in $((SECONDS - build_start)) s"

# Reports name their source lines; a UBSan report is already fatal (-fno-sanitize-recover).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-14 || true)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=()
printf '%-16s %12s %10s  %s\n' target executions exec/s result
for t in "${targets[@]}"; do
  bin=$build/fuzz/${t}_fuzz
  mkdir -p "$work/$t/corpus" "$work/$t/out"
  cp "$root/fuzz/corpus/$t/"* "$work/$t/corpus/"
  cp "$root/fuzz/regressions/$t/"* "$work/$t/corpus/" 2>/dev/null || true
  rc=0
  (cd "$work/$t/out" &&
     "$bin" -max_total_time="$seconds" -timeout=25 -print_final_stats=1 \
     -artifact_prefix="$work/$t/out/" "$work/$t/corpus") \
    >"$work/$t/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t/log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t/log" | tail -1)
  result=ok
  if [ "$rc" -ne 0 ]; then
    result="FAILED (rc $rc)"
    failed+=("$t")
    mkdir -p "$build/findings/$t"
    cp "$work/$t/out/"{crash,leak,timeout,oom,slow-unit}-* "$build/findings/$t/" 2>/dev/null || true
  fi
  printf '%-16s %12s %10s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$result"
  if [ "$rc" -ne 0 ]; then
    echo "--- $t: the end of its log; inputs in $build/findings/$t/" >&2
    tail -n 60 "$work/$t/log" >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: ${failed[*]} failed" >&2
  exit 1
fi
