#!/usr/bin/env bash
# Configures and builds troupe into ./build (or $TROUPE_BUILD_DIR) after making sure
# the Debian dependencies are present. Extra arguments are build targets.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TROUPE_BUILD_DIR:-$root/build}
"$root/scripts/install-deps.sh"
export CCACHE_DIR=${CCACHE_DIR:-$root/.cache/ccache}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release ${TROUPE_CMAKE_ARGS:-} >/dev/null
fi
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}" | grep -vE '^\[[0-9]+/[0-9]+\] ' || true
test "${PIPESTATUS[0]}" -eq 0
