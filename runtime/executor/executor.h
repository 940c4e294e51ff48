// Runs a StepPlan on the model: one batched Forward over every chunk, each reading
// and writing its request's paged KV, then sampling for the chunks that end a prompt
// or decode a token. The rank actor will own one of these.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "model/forward.h"
#include "runtime/kv_cache/paged_kv.h"
#include "runtime/scheduler/step_plan.h"

namespace troupe::runtime {

struct ExecutorOptions {
  // MODEL.md §6: prefill chunks run the decoder on the prompt's last replay_tokens only
  // (R = 0 in the model config, or false here: full compute, every layer every token).
  bool bounded_replay = true;
};

class Executor {
 public:
  Executor(const model::Forward& forward, PagedKvStorage& storage, ExecutorOptions options);

  // Returns the sampled tokens of each chunk ([1] if chunk.sample, else empty).
  // Everything it needs travels in the plan (tokens, lookback, tables, slots).
  std::vector<std::vector<int32_t>> run(const StepPlan& plan);

  // Forgets what it knew of requests that ended or lost their KV.
  void drop(RequestId id) { started_.erase(id); }

 private:
  // Positions [P', E) of a chunk's decoder tail (§6), or -1 for every layer.
  int64_t decoder_tail_start(const ScheduledChunk& chunk) const;

  const model::Forward& forward_;
  PagedKvStorage& storage_;
  ExecutorOptions options_;
  std::unordered_map<RequestId, int64_t> started_;  // id -> generation whose slot is set up
};

}  // namespace troupe::runtime
