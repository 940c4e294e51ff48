#!/usr/bin/env bash
# Installs troupe's Debian build dependencies if any is missing. Idempotent and quiet
# when everything is already there. CUDA is not installed here: the build uses
# /usr/local/cuda when it exists and skips the GPU backend otherwise.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libcaf-dev libboost-dev libboost-system-dev libmsgpack-cxx-dev libspdlog-dev
  libucx-dev nlohmann-json3-dev libyaml-cpp-dev libgtest-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq >/dev/null
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
