// Runtime parameters of the scheduler policy (engine config, not the checkpoint's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/speculative/draft_length.h"

namespace troupe::runtime {

enum class SchedulePolicy : uint8_t {
  Fcfs,      // waiting requests by arrival
  Priority,  // by (priority, arrival); lower priority value first, as vLLM
};

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 8192;  // token budget: new tokens of all chunks of a step
  int64_t max_num_running = 256;          // requests holding KV at once
  // Σ over the prefill chunks of one step of their end position (the context each chunk's
  // attention reads), so several long-context chunks cannot stall one step. The first
  // prefill chunk of a step is exempt, else a prompt longer than this could never finish.
  int64_t max_prefill_context_read = int64_t(1) << 20;
  int64_t max_admissions_per_step = 64;      // new requests admitted per step
  // Requests arriving with their KV (a P/D hand-off, Scheduler::add_imported) admitted
  // per step, so a burst of arrivals never stalls the running decodes (docs/pd.md;
  // --max-kv-loads-per-step, 4 as the design's figures).
  int64_t max_kv_loads_per_step = 4;
  int64_t max_model_len = int64_t(1) << 20;  // prompt + output tokens of one request
  bool enable_chunked_prefill = true;        // off: a prefill runs whole or waits
  int64_t chunk_lookback_tokens = 0;         // tokens before a chunk it carries (the model's
                                             // Engram n-gram order - 1), so an executor never
                                             // needs the request itself
  SchedulePolicy policy = SchedulePolicy::Fcfs;
  // Window snapshots on (the KV cache's block size; 0: off): prefill chunks end on the last
  // block boundary of the tokens known (chunk_rules.h end_at_snapshot_boundary) and chunks
  // that end on a boundary carry a snapshot slot (prepare_engine sets it).
  int64_t snapshot_block_size = 0;
  // clip_prefix (docs/model-notes.md): prompt chunks that end this many tokens or more
  // before the prompt's end run the decoder on their last row only (ScheduledChunk::
  // clip_decoder), and a chunk never straddles that point; 0: off. prepare_engine sets
  // it to clip_prefix_depth(model) when the executor's clip_prefix is on.
  int64_t clip_prefix_depth = 0;
  // Speculative decoding (docs/dspark.md): a request's decode verifies up to this
  // many draft tokens after its last sampled one, and takes k + 1 tokens of the budget;
  // 0: off. Speculating requests are not decoded ahead (the accepted count is unknown
  // until the step ran). The engine sets it from its SpeculativeConfig.
  int64_t num_speculative_tokens = 0;
  // Online cost table (runtime/speculative/draft_length.h): the StepPipeline picks each
  // step's draft limit in 0..num_speculative_tokens from measured step times and the
  // running acceptance; speculation_seed: step times of a bench run to start from.
  bool adaptive_speculation = false;
  std::vector<StepTimeSample> speculation_seed;
  // Where the table is kept across restarts ("": nowhere): read when the StepPipeline is
  // made (its cells over the seed's), written every StepPipeline::kSaveEvery timed steps and at its end.
  std::string speculation_table_file;
  // After every step's update, check the KV bookkeeping (KvCacheManager::check_invariants:
  // each block has as many refs as tables and pins hold it, so eviction under memory
  // pressure never hands out a block a request uses; the tiers' and snapshots' lists and
  // maps are whole). O(blocks) per step: a debugging aid (--kv-check-invariants), on in
  // the soak test. A broken invariant throws, so the engine fails with the reason.
  bool check_kv_invariants = false;

  void validate() const;  // throws troupe::Error naming the bad field
};

}  // namespace troupe::runtime
