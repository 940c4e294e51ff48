#include "bench/engine/engine_setup.h"

#include <algorithm>
#include <cstdio>

#include "kernels/check.h"
#include "runtime/kv_cache/kv_cache_config.h"
#include "runtime/workload/random_tokens.h"

namespace troupe::bench {

runtime::EngineConfig make_engine_config(const model::ServingShape& m, const EngineBenchConfig& c,
                                         bool prefix_cache) {
  runtime::EngineConfig e;
  e.kv_budget_bytes = c.kv_budget_bytes;
  e.block_size = c.block_size;
  e.enable_prefix_cache = prefix_cache;
  e.executor.prefix_replay = c.prefix_replay;
  e.executor.bounded_replay = c.bounded_replay;
  e.executor.clip_prefix = c.clip_prefix;
  e.enable_prefix_snapshots = c.prefix_snapshots;
  e.kv_offload_bytes = c.kv_offload_bytes;
  e.kv_disk_bytes = c.kv_disk_bytes;
  e.kv_disk_dir = c.kv_disk_dir;
  e.scheduler.max_num_running = c.max_running;
  e.scheduler.max_num_batched_tokens = c.max_batched_tokens;
  e.scheduler.max_model_len = m.max_positions;
  return e;
}

runtime::RequestParams greedy_params(int64_t max_tokens) {
  runtime::RequestParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed) {
  return runtime::draw_tokens(seed, n, 0, static_cast<int32_t>(vocab));
}

void warm_up(const model::BatchForward& forward, const EngineBenchConfig& c) {
  // Without the cache, so without tiers too: it never writes to the disk dir.
  runtime::Engine engine(forward, nullptr, make_engine_config(forward.shape(), c, false));
  const auto prompt =
      random_tokens(std::min<int64_t>(32, c.block_size), forward.shape().vocab_size, 1);
  engine.add_request(0, prompt, greedy_params(2));
  drain(engine);
}

void check_output(const runtime::RequestOutput& out) {
  if (out.status != runtime::RequestStatus::FinishedError) return;
  TROUPE_FAIL("request " << out.id << " failed: " << out.error
                         << " (a larger --kv-budget-mb or smaller sizes may help)");
}

void drain(runtime::Engine& engine) {
  while (engine.has_unfinished())
    for (const runtime::RequestOutput& out : engine.step()) check_output(out);
}

void print_kv_summary(const model::ServingShape& m, const EngineBenchConfig& c) {
  runtime::EngineConfig e = make_engine_config(m, c, true);
  const runtime::KvCacheConfig kv = runtime::prepare_engine(m, e);
  std::printf(
      "KV budget %.1f MB: %lld blocks of %lld tokens (%lld tokens), %lld request slots, %lld "
      "window snapshot slots (with the prefix cache and snapshots on)\n",
      double(c.kv_budget_bytes) / 1e6, static_cast<long long>(kv.num_blocks),
      static_cast<long long>(kv.block_size), static_cast<long long>(kv.num_blocks * kv.block_size),
      static_cast<long long>(kv.swa_slots), static_cast<long long>(kv.snapshot_slots));
}

}  // namespace troupe::bench
