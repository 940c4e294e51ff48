// What `troupe bench engine` and `troupe bench replay` share: the engine configuration
// they run, greedy request parameters, random prompts and a warm-up run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/forward.h"
#include "runtime/engine.h"

namespace troupe::bench {

struct EngineBenchConfig {
  int64_t max_running = 8;                      // SchedulerConfig::max_num_running
  int64_t max_batched_tokens = 8192;            // the step's token budget
  int64_t kv_budget_bytes = int64_t(64) << 20;  // KV blocks + per-request state
  int64_t block_size = 64;                      // tokens per KV block
  runtime::PrefixReplay prefix_replay = runtime::PrefixReplay::Exact;  // how hits replay
  bool prefix_snapshots = true;  // SWA window snapshots (with the prefix cache)
  // How prefill runs the decoder (MODEL.md §6, docs/model-notes.md "clip_prefix"): on
  // the prompt's bounded tail, or (bounded_replay false) on every token, with clip_prefix
  // on the last row only of chunks far from the prompt's end.
  bool bounded_replay = true;
  bool clip_prefix = false;
  // Host and disk tiers (docs/kv-cache.md "Host and disk tiers"); 0 / empty: off.
  int64_t kv_offload_bytes = 0;
  int64_t kv_disk_bytes = 0;
  std::string kv_disk_dir;
};

// The engine's defaults with these sizes; max_model_len = the model's positions.
runtime::EngineConfig make_engine_config(const model::ServingShape& m, const EngineBenchConfig& c,
                                         bool prefix_cache);

// Greedy, EOS ignored: every request produces exactly max_tokens tokens, so runs with
// and without the prefix cache do the same amount of work.
runtime::RequestParams greedy_params(int64_t max_tokens);

// [n] uniform ids in [0, vocab) from a splitmix64 stream seeded by `seed`.
std::vector<int32_t> random_tokens(int64_t n, int64_t vocab, uint64_t seed);

// One short request through a throwaway engine: faults the mmapped weights in and warms
// the thread pool, so the first timed figure is not a cold-start figure.
void warm_up(const model::BatchForward& forward, const EngineBenchConfig& c);

// Steps until every request has finished, discarding the outputs (check_output on each).
void drain(runtime::Engine& engine);

// Throws troupe::Error if the output ended in an error (e.g. a KV budget too small for
// the request: the message points at --kv-budget-mb).
void check_output(const runtime::RequestOutput& out);

// One line: the KV budget's split into blocks (tokens), request slots and window snapshots.
void print_kv_summary(const model::ServingShape& m, const EngineBenchConfig& c);

}  // namespace troupe::bench
