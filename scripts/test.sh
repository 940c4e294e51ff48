#!/usr/bin/env bash
# Builds everything and runs the whole test suite (the README's test command; CI runs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TROUPE_BUILD_DIR:-$root/build}
"$root/scripts/build.sh"
# The official openai npm client for tests/net/serve_clients_test.cpp (it skips without it):
# installed from the lock file when npm exists and node_modules is missing or stale.
npm_dir=$root/tests/net/npm
if command -v npm >/dev/null &&
   { [ ! -f "$npm_dir/node_modules/openai/package.json" ] ||
     [ "$npm_dir/package-lock.json" -nt "$npm_dir/node_modules/.package-lock.json" ]; }; then
  (cd "$npm_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "test.sh: npm ci in $npm_dir failed; the openai npm client test will skip" >&2
fi
cd "$build"
ctest --output-on-failure -j "$(nproc)" --timeout 900
