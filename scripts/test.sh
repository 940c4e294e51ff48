#!/usr/bin/env bash
# Builds everything and runs the whole test suite (the README's test command; CI runs it).
#   scripts/test.sh              build/ and the suite; under CI=true then every fuzz target
#                                for TROUPE_FUZZ_SECONDS (30) seconds (scripts/fuzz.sh)
#   scripts/test.sh --sanitize   the suite under ASan+UBSan in build-asan/ (slow: not in CI)
# Under CI=true nothing may skip quietly: npm must install the openai client test's
# package (tests/net/serve_clients_test.cpp fails instead of skipping without it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sanitize=0
for arg in "$@"; do
  case $arg in
    --sanitize) sanitize=1 ;;
    *) echo "usage: $0 [--sanitize]" >&2; exit 2 ;;
  esac
done
ci=0
case ${CI:-} in true | 1) ci=1 ;; esac

if [ "$sanitize" -eq 1 ]; then
  export TROUPE_BUILD_DIR=${TROUPE_BUILD_DIR:-$root/build-asan}
  export TROUPE_CMAKE_ARGS="-DTROUPE_SANITIZE=ON -DTROUPE_CUDA=OFF ${TROUPE_CMAKE_ARGS:-}"
  # scripts/sanitize.supp says what is suppressed and why.
  export UBSAN_OPTIONS="suppressions=$root/scripts/sanitize.supp:print_stacktrace=1:halt_on_error=1"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
fi
build=${TROUPE_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"

# The official openai npm client for tests/net/serve_clients_test.cpp, installed from the
# lock file when node_modules is missing or stale.
npm_dir=$root/tests/net/npm
npm_failed() {
  [ "$ci" -eq 1 ] && { echo "test.sh: $1 (CI=true: the openai client test must run)" >&2; exit 1; }
  echo "test.sh: $1; the openai npm client test will skip" >&2
}
if [ ! -f "$npm_dir/node_modules/openai/package.json" ] ||
   [ "$npm_dir/package-lock.json" -nt "$npm_dir/node_modules/.package-lock.json" ]; then
  if ! command -v npm >/dev/null; then
    npm_failed "npm is not installed (scripts/install-deps.sh installs it)"
  else
    (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
      npm_failed "npm ci in $npm_dir failed"
  fi
fi
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 900

if [ "$ci" -eq 1 ] && [ "$sanitize" -eq 0 ] && [ "${TROUPE_FUZZ_SECONDS:-30}" -gt 0 ]; then
  "$root/scripts/fuzz.sh" --seconds "${TROUPE_FUZZ_SECONDS:-30}"
fi
