// The values that pass between the scheduler and the executor: a StepPlan (what to run
// this step) and the RequestOutputs of update() (what came out). Plain values, so the
// planner can run ahead of the executor and a plan can cross an actor boundary.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/sampling.h"
#include "runtime/kv_cache/tier_op.h"
#include "runtime/kv_transfer/kv_handoff.h"
#include "runtime/request.h"

namespace troupe::runtime {

// The id of a token a plan in flight samples (asynchronous scheduling): the executor
// replaces it with the token it sampled for that request in the step before.
inline constexpr int32_t kPlaceholderToken = -1;

// n > 1: a sibling forked from its leader right after the leader's prompt (this plan
// holds the leader's last prefill chunk, before the sibling's chunk). After the forward
// the executor copies the leader's state into the sibling's, then samples the sibling's
// first token from the leader's logits.
struct ForkOp {
  RequestId parent = 0;
  int32_t src_slot = -1;   // the leader's ring slot -> the chunk's swa_slot
  int32_t src_block = -1;  // the leader's partial last block -> dst_block; -1: none
  int32_t dst_block = -1;
};

// One request's share of a step: positions [start, start + num_tokens).
//
//   tokens    0 ......... cached ....... start ========= start+n ....... num_tokens
//             |<- prefix hit (global KV) ->|  this chunk  |<- later chunks ->|
//                         |<- replay ->|
//   replay: [start, num_cached_tokens) when start < num_cached_tokens - the global KV of
//   those tokens is cached, only the SWA windows are rebuilt (MODEL.md §6).
struct ScheduledChunk {
  RequestId id = 0;
  int64_t start = 0;                 // num_computed_tokens before this step
  int64_t num_tokens = 0;            // n >= 1 (0 for a fork's first sample)
  int64_t num_cached_tokens = 0;     // prefix-cache hit B of the request's admission
  std::vector<int32_t> token_ids;    // [n] the request's tokens [start, start + n); the last
                                     // may be kPlaceholderToken
  std::vector<int32_t> lookback;     // the tokens just before start (Engram n-grams), <= config
  int64_t num_prompt_tokens = 0;     // E_prompt: where the bounded-replay tail is counted from
  std::vector<int32_t> block_table;  // [ceil((start + n) / block_size)] snapshot
  int32_t swa_slot = -1;
  // Window snapshots (docs/kv-cache.md): before the forward, a request starting (or
  // restarting) copies its rings from this snapshot slot instead of clearing them; after
  // it, a chunk ending on a block boundary copies its rings into snapshot_slot. -1: none.
  int32_t restore_slot = -1;
  int32_t snapshot_slot = -1;
  bool sample = false;  // the chunk ends at the request's last token: sample from its logits
  kernels::SamplingParams sampling;  // the request's parameters (seed included)
  uint64_t sample_counter = 0;       // Philox counter: the request's output token index
  int64_t generation = 0;            // the request's preemption count; stale chunks are ignored
  bool prefill = false;              // counted against the context-read cap
  // clip_prefix: far enough from the prompt's end that the decoder runs its last row
  // only (no window rows of the decoder layers for the rest; docs/model-notes.md).
  bool clip_decoder = false;
  int32_t num_logprobs = -1;         // top alternatives per sampled token; -1: no logprobs
  // Set: a forked sibling's first sample (num_tokens 0, start = the prompt length); no
  // forward rows of its own (docs/scheduler.md "n > 1").
  std::optional<ForkOp> fork;
  // Speculative decode (docs/dspark.md): token_ids is [the last sampled token] only; the
  // executor drafts up to this many tokens after it and verifies them in the same forward,
  // so num_tokens = 1 + num_draft_tokens rows are budgeted and have blocks. 0: plain.
  int64_t num_draft_tokens = 0;

  int64_t end() const { return start + num_tokens; }
};

// A request admitted with its KV (Scheduler::add_imported, docs/pd.md): before the
// forward the executor copies the hand-off's blocks from first_block on into `blocks`
// (those before it were prefix-cache hits here) and its slot state into swa_slot; the
// request's first chunk in this plan then decodes its last token.
struct KvLoad {
  RequestId id = 0;
  std::shared_ptr<const KvHandoff> handoff;
  int64_t first_block = 0;
  std::vector<int32_t> blocks;  // [handoff->num_blocks - first_block]
  int32_t swa_slot = -1;
  int64_t generation = 0;
};

struct StepPlan {
  uint64_t step = 0;
  // DEP-R with live EPLB: the expert placement epoch this step runs on, agreed by the
  // group's DP sync so every rank switches at the same step; a rank switches to it
  // (ExpertParallel::use) when it is newer than its own. 0: no switch.
  int64_t placement_epoch = 0;
  // DEP-R with the DSpark draft expert-parallel: some rank of the group drafts this step
  // (the DP sync's any_draft), so every rank joins the draft's MoE exchanges, with zero
  // rows when it drafts nothing itself. A rank whose own plan drafts joins them anyway.
  bool draft_exchange = false;
  // The same as placement_epoch for the draft's own placement (balanced apart from the
  // target's, MODEL.md §9). 0: no switch.
  int64_t draft_placement_epoch = 0;
  // Decodes first, then continuing prefills, then new admissions (each in queue order).
  std::vector<ScheduledChunk> chunks;
  std::vector<RequestId> preempted;  // lost their KV this step; recompute from 0 later
  std::vector<RequestId> finished;   // ended outside update() since the last plan (abort,
                                     // error): the executor drops their state
  // Host and disk tier copies (runtime/kv_cache/kv_tiers.h) the executor runs in order
  // before the forward: saves of blocks this plan's allocations evicted, loads of the
  // prefix hits its admissions found on a lower tier.
  std::vector<TierOp> tier_ops;
  // KV hand-offs admitted this step, copied after the tier ops, before the forward.
  std::vector<KvLoad> kv_loads;
  int64_t num_tokens = 0;            // Σ chunk num_tokens <= max_num_batched_tokens
  int64_t prefill_context_read = 0;  // Σ over prefill chunks of end()
  int64_t num_admitted = 0;
  int64_t draft_limit = 0;           // speculative decoding: the step's k (chunks' drafts <= it)

  // No chunk and no tier copy (a plan of tier copies alone: a saved prefix's disk writes).
  bool empty() const { return chunks.empty() && tier_ops.empty(); }
  // Some chunk asks for drafts (what this rank adds to the DP sync's any_draft).
  bool drafts() const {
    for (const ScheduledChunk& c : chunks)
      if (c.num_draft_tokens > 0) return true;
    return false;
  }
};

// A token and its log-probability under the raw logits: log-softmax before temperature,
// top-k/top-p and penalties (vLLM's default logprobs mode, raw_logprobs).
struct Logprob {
  int32_t token = 0;
  float logprob = 0.0f;

  bool operator==(const Logprob&) const = default;
};

// The logprobs of one sampled token.
struct SampleLogprobs {
  Logprob sampled;
  std::vector<Logprob> top;  // [min(k, vocab)] most likely first, equal ones by lower id

  bool operator==(const SampleLogprobs&) const = default;
};

// What the executor returns for one chunk of a plan.
struct SampledChunk {
  std::vector<int32_t> tokens;          // [1] if chunk.sample, else empty; a speculative
                                        // chunk: the accepted drafts, then the target's token
  std::vector<SampleLogprobs> logprobs;  // [tokens.size()] if chunk.num_logprobs >= 0, else empty
  int64_t num_draft_tokens = 0;          // drafts verified (speculative chunk); the accepted
                                         // ones are tokens.size() - 1
};

// What one request produced since it was last reported.
struct RequestOutput {
  RequestId id = 0;
  std::vector<int32_t> new_tokens;
  std::vector<SampleLogprobs> new_logprobs;  // [new_tokens.size()] when logprobs were asked for
  std::string new_text;  // streamable text delta (held-back stop-string prefixes excluded)
  RequestStatus status = RequestStatus::Running;
  StopReason stop_reason;
  std::string error;                          // why, for FinishedError
  ErrorCause error_cause = ErrorCause::None;  // for FinishedError
  int64_t num_cached_tokens = 0;
  // kv_restore: the saved tokens put before the request's own prompt (usage counts them).
  int64_t num_restored_tokens = 0;

  bool finished() const { return is_finished(status); }
  std::string_view finish_reason() const { return runtime::finish_reason(status); }

  bool operator==(const RequestOutput&) const = default;
};

}  // namespace troupe::runtime
