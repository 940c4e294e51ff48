#!/usr/bin/env bash
# Installs troupe's Debian build dependencies if any is missing. Idempotent and quiet
# when everything is already there. CUDA is not installed here: the build uses
# /usr/local/cuda when it exists and skips the GPU backend otherwise.
#   scripts/install-deps.sh          the build, the test suite and its npm client test
#   scripts/install-deps.sh --fuzz   also clang 14 and its libFuzzer/sanitizer runtimes
#                                    (scripts/fuzz.sh, docs/fuzzing.md)
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libcaf-dev libboost-dev libboost-system-dev libmsgpack-cxx-dev libspdlog-dev
  libucx-dev nlohmann-json3-dev libyaml-cpp-dev libgtest-dev libssl-dev
)
# clang++-14, libclang_rt.fuzzer/asan/ubsan, llvm-symbolizer for readable reports.
fuzz_packages=(clang-14 libclang-rt-14-dev llvm-14)
for arg in "$@"; do
  case $arg in
    --fuzz) packages+=("${fuzz_packages[@]}") ;;
    *) echo "usage: $0 [--fuzz]" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm run tests/net/serve_clients_test.cpp's official openai client. Checked by
# command, not package: a NodeSource nodejs (npm included) serves as well as Debian's.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq >/dev/null
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
