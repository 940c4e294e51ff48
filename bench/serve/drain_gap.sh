#!/usr/bin/env bash
# Drain's time to the next token (docs/pd.md "Drain"): starts a 1P2D cluster on loopback
# (the router, a prefill instance and two decode instances, d1 and d2, each one process
# with one kernel thread, the built-in tiny model, ports 7210-7213 and 8020-8021), then
# runs `troupe bench drain` against it: N greedy streams, and d1 drained while they
# decode. It prints the gap across each move beside the streams' ordinary TPOT, then the
# router's own log of each drained request ("went on on ... ms after the drain asked").
# Figures only: it asserts nothing.
#
#   bench/serve/drain_gap.sh            (TROUPE=path/to/troupe, BENCH_ARGS="...")
set -euo pipefail
cd "$(dirname "$0")/../.."
TROUPE=${TROUPE:-build/troupe}
BENCH_ARGS=${BENCH_ARGS:---num-prompts 8 --input-len 64 --output-len 400 --drain-after 50}
LOGS=$(mktemp -d /tmp/troupe-drain-bench-XXXXXX)
CONFIG=$LOGS/pd-1p2d.yaml
# shellcheck source=bench/serve/local_procs.sh
. bench/serve/local_procs.sh

cat >"$CONFIG" <<'YAML'
cluster-secret: "drain-bench-local-secret"
nodes:
  - {name: router, host: 127.0.0.1, port: 7210}
  - {name: prefill, host: 127.0.0.1, port: 7211}
  - {name: decode1, host: 127.0.0.1, port: 7212}
  - {name: decode2, host: 127.0.0.1, port: 7213}
router: {node: router, http-port: 8020, tcp-port: 8021}
instances:
  - {name: p, role: prefill, ranks: [prefill], threads: 1}
  - {name: d1, role: decode, ranks: [decode1], threads: 1}
  - {name: d2, role: decode, ranks: [decode2], threads: 1}
serve:
  max-num-seqs: 64
YAML

for node in prefill decode1 decode2 router; do
  "$TROUPE" serve --config "$CONFIG" --node "$node" >"$LOGS/$node.log" 2>&1 &
  PIDS+=($!)
done
wait_ready http://127.0.0.1:8020  # 200 once every instance is up

echo "== 1P2D on loopback, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
# shellcheck disable=SC2086
"$TROUPE" bench drain --base-url http://127.0.0.1:8020 --instance d1 $BENCH_ARGS
echo
echo "The router's log of each drained request:"
grep -o 'request [0-9]* went on on .* ms after the drain asked' "$LOGS/router.log" || echo "(none)"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
stop_all
