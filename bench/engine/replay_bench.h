// `troupe bench replay`: the multi-turn agentic workload (runtime/workload) run on the
// Engine. Every conversation's turn 0 is submitted at the start; turn k+1 is submitted
// when turn k finishes, with turn k's real output tokens in its prompt. The same
// workload runs with the prefix cache under each prefix-replay mode asked for (exact:
// a hit equals a cold run; window: MODEL.md §6's W tokens), each with SWA window
// snapshots on and/or off (a hit at a snapshot's boundary replays nothing), and once
// without the cache (the baseline), each on a fresh engine, after one shared warm-up.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/engine/engine_setup.h"
#include "model/forward.h"
#include "model/tokenizer.h"
#include "runtime/workload/agentic_workload.h"

namespace troupe::bench {

struct ReplayRun {
  bool prefix_cache = false;
  runtime::PrefixReplay prefix_replay = runtime::PrefixReplay::Exact;  // with the cache
  bool snapshots = false;                                              // window snapshots on
  bool tiers = false;  // host (and disk) tiers under the primary pool
  int64_t turns = 0;                                                   // finished requests
  int64_t prompt_tokens = 0;                                           // Σ prompt lengths (input)
  int64_t cached_tokens = 0;    // input served by the prefix cache (at the last admission)
  int64_t output_tokens = 0;    // Σ generated tokens
  int64_t computed_tokens = 0;  // tokens the executor ran: uncached input, SWA replay,
                                // recompute after preemption, decodes
  int64_t replay_tokens = 0;    // SWA windows recomputed on hits (docs/kv-cache.md)
  int64_t tier_hit_tokens[3] = {0, 0, 0};  // cached input by tier: primary, host, disk
  int64_t snapshot_hits = 0;    // prefix hits served by a window snapshot (no replay)
  int64_t tier_snapshot_hits[3] = {0, 0, 0};  // of those, by the tier holding the snapshot
  int64_t replay_hits = 0;      // prefix hits served by a replay
  int64_t steps = 0;
  int64_t preemptions = 0;
  double wall_s = 0;           // first submission to last finish
  double scheduler_cpu_s = 0;  // Σ schedule() + update() CPU time

  int64_t uncached_tokens() const { return prompt_tokens - cached_tokens; }
  double hit_rate() const { return prompt_tokens ? double(cached_tokens) / prompt_tokens : 0; }
  double tier_hit_rate(int t) const {
    return prompt_tokens ? double(tier_hit_tokens[t]) / prompt_tokens : 0;
  }
};

// One run on a fresh engine; engine.prefix_replay and engine.prefix_snapshots say how
// hits rebuild the windows; engine.kv_offload_bytes > 0: with the host (and disk) tiers
// (the disk dir is emptied first, so each run starts cold).
ReplayRun run_replay(const model::BatchForward& forward, const model::TextTokenizer* tokenizer,
                     const runtime::AgenticWorkloadConfig& workload,
                     const EngineBenchConfig& engine, bool prefix_cache);

// The workload's planned request and token counts (what a run with no failures sends)
// and the share of input seen before, as one "workload agentic: ..." line (bench replay
// and bench serve --dataset-name agentic).
void print_workload_line(const runtime::AgenticWorkloadConfig& workload);

// The workload line, then one table row per run, then for each run with the cache the
// wall-time ratio baseline ÷ that run (the baseline: the run without the cache).
void print_replay_report(const runtime::AgenticWorkloadConfig& workload,
                         const std::vector<ReplayRun>& runs);

}  // namespace troupe::bench
