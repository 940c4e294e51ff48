// Batch composition: what is left of one step's limits, and the rules that cut a
// request's wanted tokens down to what this step can take. Each optional rule is one
// small function in kChunkRules (STYLE.md 1); schedule() only calls num_new_tokens().
//
// Extension point: rules adjusting n for a chunk at `start` join here (clip_prefix is
// one; bounded-replay planning would be another) - schedule() does not change.
#pragma once

#include <cstdint>

#include "runtime/request.h"
#include "runtime/scheduler/scheduler_config.h"
#include "runtime/scheduler/step_plan.h"

namespace troupe::runtime {

// The limits of one step still unspent.
struct StepBudget {
  explicit StepBudget(const SchedulerConfig& c);

  int64_t tokens_left;
  int64_t context_read_left;  // for prefill chunks after the first
  int64_t admissions_left;
  int64_t kv_loads_left;
  int64_t num_prefill_chunks = 0;

  void take(const ScheduledChunk& c);
  void give_back(const ScheduledChunk& c);  // the chunk's request was preempted
};

// A chunk candidate: request r would run tokens [start, start + n).
struct ChunkCandidate {
  const Request& r;
  int64_t start;  // r.num_computed_tokens, or where an admission starts
  bool prefill;   // more than one token to compute
};

using ChunkRule = int64_t (*)(const ChunkCandidate&, int64_t n, const StepBudget&,
                              const SchedulerConfig&);

int64_t clip_to_token_budget(const ChunkCandidate&, int64_t n, const StepBudget&,
                             const SchedulerConfig&);
int64_t clip_unchunked_prefill(const ChunkCandidate&, int64_t n, const StepBudget&,
                               const SchedulerConfig&);
int64_t clip_context_read(const ChunkCandidate&, int64_t n, const StepBudget&,
                          const SchedulerConfig&);
int64_t end_at_snapshot_boundary(const ChunkCandidate&, int64_t n, const StepBudget&,
                                 const SchedulerConfig&);
// clip_prefix (docs/model-notes.md "clip_prefix"): a prompt chunk that would run past
// E_prompt - clip_prefix_depth ends there, so the part far from the prompt's end is a
// chunk of its own, whose decoder runs one row (clips_decoder).
int64_t end_at_clip_boundary(const ChunkCandidate&, int64_t n, const StepBudget&,
                             const SchedulerConfig&);
// The chunk [start, end) of a request with a prompt of num_prompt_tokens runs the
// decoder (layer Ne's queries and every later layer) on its last row only.
bool clips_decoder(int64_t end, int64_t num_prompt_tokens, const SchedulerConfig& cfg);

// Tokens the candidate runs this step (0: it waits): all its uncomputed tokens, cut by
// each rule in turn.
int64_t num_new_tokens(const ChunkCandidate& c, const StepBudget& b, const SchedulerConfig& cfg);

}  // namespace troupe::runtime
