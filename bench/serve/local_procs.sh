# Sourced by the bench/serve scripts that start troupe processes on this machine: each
# started one goes into PIDS; stop_all ends them (and only them) and waits for them;
# wait_ready URL waits until URL/health answers 200 (60 s at most), else leaves the logs
# in $LOGS and exits 1.
PIDS=()
stop_all() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}
trap 'stop_all; rm -rf "$LOGS"' EXIT

wait_ready() {
  for _ in $(seq 600); do
    if curl -sf "$1/health" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "$(basename "$0"): $1 never became ready; logs in $LOGS" >&2
  trap - EXIT
  exit 1
}
