#!/usr/bin/env bash
# `troupe bench serve` against 1P1D and against one mixed instance with the same total
# threads (docs/pd.md "Benchmarks"): config/examples/pd-local.yaml (the router, a prefill
# and a decode instance of one kernel thread each, built-in tiny model, ports 7200-7202
# and 8000-8001), then `troupe serve --threads 2` alone on port 8010. The same workload
# (BENCH_ARGS) runs against each; both reports are printed, then the P/D run's KV
# transfer figures from the router's /metrics. Figures only: it asserts nothing.
#
#   bench/serve/pd_vs_mixed.sh            (TROUPE=path/to/troupe, BENCH_ARGS="...")
set -euo pipefail
cd "$(dirname "$0")/../.."
TROUPE=${TROUPE:-build/troupe}
BENCH_ARGS=${BENCH_ARGS:---dataset-name agentic --conversations 8 --turns 4 --system-len 256 --user-len 64 --output-len 32 --max-concurrency 4 --seed 0}
CONFIG=config/examples/pd-local.yaml
LOGS=$(mktemp -d /tmp/troupe-pd-bench-XXXXXX)
# shellcheck source=bench/serve/local_procs.sh
. bench/serve/local_procs.sh

echo "== 1P1D: $CONFIG (prefill 1 thread, decode 1 thread)"
for node in prefill decode router; do
  "$TROUPE" serve --config "$CONFIG" --node "$node" >"$LOGS/$node.log" 2>&1 &
  PIDS+=($!)
done
wait_ready http://127.0.0.1:8000
# shellcheck disable=SC2086
"$TROUPE" bench serve --base-url http://127.0.0.1:8000 $BENCH_ARGS 2>/dev/null
echo
echo "KV transfers of the 1P1D run (router /metrics):"
curl -s http://127.0.0.1:8000/metrics |
  grep -E '^troupe:kv_(transfer(s_total|_bytes_total|_descriptors_total|_seconds_(sum|count)|_failures_total|_fallbacks_total)|handoff_phase)' |
  grep -v ' 0.0$' || true
stop_all

echo
echo "== mixed: one instance, 2 threads"
"$TROUPE" serve --port 8010 --tcp-port 0 --threads 2 >"$LOGS/mixed.log" 2>&1 &
PIDS+=($!)
wait_ready http://127.0.0.1:8010
# shellcheck disable=SC2086
"$TROUPE" bench serve --base-url http://127.0.0.1:8010 $BENCH_ARGS 2>/dev/null
stop_all
