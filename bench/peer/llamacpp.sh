#!/usr/bin/env bash
# troupe vs llama.cpp on the same seeded GGUF files, back to back at the same thread
# count (docs/peer-bench.md). Run it under the build lock so no compile shares the cores:
#   flock /tmp/troupe-build.lock bench/peer/llamacpp.sh
# Environment (defaults): THREADS=2 PP=512 TG=128 PARALLEL=4,16 PARALLEL_STEPS=32 REPEATS=2
#   FILES="dense-f16 dense-q8_0 dense-q4_0 moe-q8_0 moe-q4_0" (SHAPE-TYPE, bench/peer/peer_files.h;
#     spaces or commas)
#   CHECK=dense-f16 (the files of the teacher-forced greedy check)
#   PEER_DIR=.cache/peer (node-llama-cpp and the model files), TROUPE=build/troupe
#   LLAMA_CPU=VARIANT (unset: llama.cpp loads its best CPU backend variant): only that
#     variant of node-llama-cpp's libggml-cpu-*.so, e.g. haswell (AVX2 + FMA + F16C) beside
#     TROUPE_CPU=avx2, to compare the AVX2 paths on a machine that has more
# Steps: install node-llama-cpp 3.21.1 from npm into PEER_DIR (its prebuilt CPU backend,
# no GPU), write the files troupe bench peer --write makes (once; kept), measure the
# machine limits, then per file REPEATS rounds of troupe's figures and llama.cpp's
# alternating (best of the rounds), and the check.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
peer=${PEER_DIR:-$root/.cache/peer}
troupe=${TROUPE:-$root/build/troupe}
threads=${THREADS:-2} pp=${PP:-512} tg=${TG:-128} parallel=${PARALLEL:-4,16}
steps=${PARALLEL_STEPS:-32} repeats=${REPEATS:-2}
files=${FILES:-"dense-f16 dense-q8_0 dense-q4_0 moe-q8_0 moe-q4_0"}
check=${CHECK:-dense-f16}
files=${files//,/ } check=${check//,/ }  # commas too, as troupe bench peer --files takes them
version=3.21.1

mkdir -p "$peer/models"
installed=$(node -p "require('$peer/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || true)
if [ "$installed" != "$version" ]; then
  echo "installing node-llama-cpp $version into $peer" >&2
  (cd "$peer" && { [ -f package.json ] || echo '{"name":"troupe-peer","private":true}' > package.json; } &&
     npm install --no-audit --no-fund --save-exact "node-llama-cpp@$version" >&2)
fi
# LLAMA_CPU: a copy of node_modules by hard links with the other CPU variants left out (ggml
# loads the best variant it finds beside libggml), kept per version and variant.
llama_dir=$peer
if [ -n "${LLAMA_CPU:-}" ]; then
  bins=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
  [ -f "$peer/$bins/libggml-cpu-$LLAMA_CPU.so" ] || {
    echo "no llama.cpp CPU variant '$LLAMA_CPU' in $peer/$bins" >&2
    exit 2
  }
  llama_dir="$peer/capped-$version-$LLAMA_CPU"
  if [ ! -d "$llama_dir" ]; then
    rm -rf "$llama_dir.tmp" && mkdir -p "$llama_dir.tmp"
    cp -al "$peer/node_modules" "$llama_dir.tmp/"
    find "$llama_dir.tmp/$bins" -name 'libggml-cpu-*.so' ! -name "libggml-cpu-$LLAMA_CPU.so" -delete
    mv "$llama_dir.tmp" "$llama_dir"
  fi
fi
for f in $files; do
  [ -f "$peer/models/$f.gguf" ] || "$troupe" bench peer --write "$peer/models" --files "$f" >&2
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The limits at the start and again at the end: the table takes the higher of each (a
# shared machine's load can only lower a probe), and prints both with the load average.
"$troupe" bench peer --limits --threads "$threads" > "$out/limits.json"
cut -d' ' -f1-3 /proc/loadavg > "$out/load.txt"
# Per file, REPEATS rounds alternate the engines (troupe, llama.cpp, troupe, ...), one
# repeat each, and the table takes each figure's best over the rounds: on a shared VM whose
# DRAM bandwidth moved 2x within minutes (docs/peer-bench.md, run 20), one engine's repeats
# all before the other's compared two machines.
for f in $files; do
  model="$peer/models/$f.gguf"
  echo "running $f" >&2
  : > "$out/$f.troupe.json"
  : > "$out/$f.llama.json"
  for ((round = 0; round < repeats; ++round)); do
    "$troupe" bench peer --model "$model" --threads "$threads" --pp "$pp" --tg "$tg" \
      --parallel "$parallel" --parallel-steps "$steps" --repeats 1 >> "$out/$f.troupe.json"
    PEER_DIR="$llama_dir" node "$root/bench/peer/llamacpp_bench.mjs" "$model" "$threads" "$pp" "$tg" \
      "$parallel" "$steps" 1 >> "$out/$f.llama.json"
  done
  if [[ " $check " == *" $f "* ]]; then
    tokens=$(python3 -c 'import json,sys; print(",".join(map(str, json.loads(open(sys.argv[1]).readline())["greedy"])))' "$out/$f.llama.json")
    "$troupe" bench peer --model "$model" --threads "$threads" --check-tokens "$tokens" --prompt-len 16 \
      > "$out/$f.check.json"
  fi
done
"$troupe" bench peer --limits --threads "$threads" >> "$out/limits.json"
cut -d' ' -f1-3 /proc/loadavg >> "$out/load.txt"
echo "CPU paths: troupe TROUPE_CPU=${TROUPE_CPU:-(its best)}, llama.cpp LLAMA_CPU=${LLAMA_CPU:-(its best)}"
python3 "$root/bench/peer/peer_table.py" "$out" $files
