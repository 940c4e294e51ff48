#!/usr/bin/env bash
# One prepared run of the CUDA backend on a lent GPU machine (docs/cuda.md): configures
# kernels/ alone for sm_90 (no CAF, Boost or GTest there), builds only the device check
# and the device benchmarks (-j16), runs the check (every CUDA kernel against
# kernels/ref) and the GEMM / attention / MoE benchmarks at decode and prefill shapes,
# and writes everything under $OUT (report.md first). Every step has its own time
# limit; the whole run is meant to stay well under 10 minutes.
#
#   OUT=/tmp/out scripts/device-check.sh        # on the device machine, from the repo root
#
# Exit status: 0 when the check passed, 1 when it failed or a step broke, 77 when no GPU.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/device-check-out}
build=${TROUPE_DEVICE_BUILD:-$root/build-device}
mkdir -p "$out"
report=$out/report.md
t0=$(date +%s)
elapsed() { echo $(( $(date +%s) - t0 ))s; }
note() { echo "$*" | tee -a "$report"; }
# Runs a step with a time limit, its output in $out/<name>.log; records rc and time.
step() {
  local name=$1 limit=$2; shift 2
  local s=$(date +%s) rc=0
  timeout "$limit" "$@" > "$out/$name.log" 2>&1 || rc=$?
  note "- $name: rc $rc, $(( $(date +%s) - s ))s (limit ${limit}s; log $name.log)"
  return "$rc"
}

{
  echo "# troupe device check"
  echo
  echo "- date: $(date -u +%FT%TZ)"
  echo "- commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "- gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader 2>/dev/null | head -1 || true)"
  echo "- nvcc: $(nvcc --version 2>&1 | grep -i release || echo 'not on PATH')"
  echo "- cmake: $(cmake --version | head -1)"
  echo
} > "$report"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
step configure 120 cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DTROUPE_KERNELS_ONLY=ON -DTROUPE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 || { note "configure failed"; exit 1; }
grep -q "CUDA backend on" "$out/configure.log" || { note "nvcc not found: no CUDA backend"; exit 1; }
step build 300 cmake --build "$build" -j 16 --target troupe_cuda_check troupe_cuda_bench || {
  note "build failed"; tail -40 "$out/build.log" >> "$report"; exit 1; }

check_rc=0
step check 240 "$build/troupe_cuda_check" -v || check_rc=$?
if [ "$check_rc" -eq 77 ]; then note "no GPU: $(head -1 "$out/check.log")"; exit 77; fi
{
  echo
  echo "## check ($( [ "$check_rc" -eq 0 ] && echo passed || echo FAILED))"
  echo '```'
  grep -E "^(troupe_cuda_check|[a-z_]+: |[0-9]+ cases|ERROR|  FAIL|    FAIL)" "$out/check.log" | head -80
  echo '```'
} >> "$report"

step bench 240 "$build/troupe_cuda_bench" || true
{
  echo
  echo "## benchmarks (median [min, max] of the repetitions; ceilings measured in the same run)"
  echo '```'
  cat "$out/bench.log"
  echo '```'
  echo
  echo "total: $(elapsed)"
} >> "$report"
cat "$report"
[ "$check_rc" -eq 0 ]
