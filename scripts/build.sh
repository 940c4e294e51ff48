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
# The build's own status, not grep's: with pipefail, `| grep ... || true` hid a failed build.
rc=0
cmake --build "$build" -j "$(nproc)" "${targets[@]}" > >(grep -vE '^\[[0-9]+/[0-9]+\] ' || true) || rc=$?
wait  # for the output filter
[ "$rc" -eq 0 ] || { echo "$(basename "$0"): the build failed (rc $rc)" >&2; exit "$rc"; }
