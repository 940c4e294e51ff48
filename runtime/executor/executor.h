// Runs a StepPlan on the model: one batched Forward over every chunk, each reading
// and writing its request's paged KV, then sampling for the chunks that end a prompt
// or decode a token, on its own kernel threads. Each rank owns one.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernels/exec_context.h"
#include "model/batch_forward.h"
#include "model/routed_experts.h"
#include "runtime/kv_cache/paged_kv.h"
#include "runtime/kv_cache/step_undo.h"
#include "runtime/kv_cache/tier_storage.h"
#include "runtime/scheduler/step_plan.h"
#include "runtime/speculative/drafter.h"

namespace troupe::runtime {

// How a prefix-cache hit rebuilds the SWA windows it does not store (docs/kv-cache.md).
//   Window: MODEL.md §6 as written: the encoder recomputes the W tokens before the hit
//     and layer Ne keeps window rows of [B, E) and the decoder tail only. The rebuilt
//     windows are approximate, so a hit may change the tokens a cold run gives.
//   Exact: the encoder recomputes exact_replay_tokens() tokens and layer Ne keeps window
//     rows of every recomputed token: every row a hit's queries read equals the cold
//     run's, so a hit gives the cold run's logits bit for bit.
enum class PrefixReplay { Window, Exact };

// How far before its anchor an exact replay starts. A window row of layer l at position
// p depends on layer l-1's rows at [p - W + 1, p], and layer 0's on tokens only, so a
// restart at q makes layer l's rows exact from q + l (W - 1) on. Under bounded replay
// the reads to cover are the encoder rings at B and layer Ne's rows under the decoder
// tail: (Ne + 1)(W - 1) before min(B, E_prompt - R). In full compute every layer's rings
// at B: L (W - 1) before B.
int64_t exact_replay_tokens(const model::ServingShape& m, bool bounded_replay);

// clip_prefix (docs/model-notes.md): the last logits of a prompt ending at E depend on
// layer Ne's outputs at [E - D, E) only, D = (L - 1 - Ne)(W - 1) + 1 (each decoder layer
// reaches W - 1 further back through its window; no decoder layer writes global KV), so
// under full compute a chunk ending at or before E - D needs no decoder rows for them.
int64_t clip_prefix_depth(const model::ServingShape& m);

struct ExecutorOptions {
  // MODEL.md §6: prefill chunks run the decoder on the prompt's last replay_tokens only
  // (R = 0 in the model config, or false here: full compute, every layer every token).
  bool bounded_replay = true;
  PrefixReplay prefix_replay = PrefixReplay::Exact;
  // clip_prefix (docs/model-notes.md): under full compute, prompt chunks far from the
  // prompt's end (ScheduledChunk::clip_decoder) run the decoder on their last row only.
  // No effect with a decoder tail (bounded replay already runs none for them).
  bool clip_prefix = false;
  // Kernel threads of the executor's own execution context (kernels/exec_context.h): a
  // rank's kernels never share a pool with another rank's. 0: the process default count.
  int kernel_threads = 0;
};

class Executor {
 public:
  // routed: an expert-parallel rank's exchange (runtime/dep/expert_parallel.h); then every
  // run() joins it, an empty plan with zero rows; nullptr: all experts run here.
  // drafter: proposes the drafts of speculative chunks (num_draft_tokens > 0); nullptr:
  // such chunks run as plain decodes. Must outlive the executor.
  // draft_routed: the draft's MoE expert-parallel (DEP-R, on routed's communicator): the
  // step's drafts run as one batch (Drafter::propose_batch) in every step whose plan
  // drafts or says draft_exchange, before the target's exchanges; nullptr: the step's
  // drafts run as one batch with every draft expert here (Drafter::propose_all).
  // forward: any model's batch forward (V4.1's Forward, LlamaForward); must outlive it.
  Executor(const model::BatchForward& forward, PagedKvStorage& storage, ExecutorOptions options,
           model::RoutedExperts* routed = nullptr, const Drafter* drafter = nullptr,
           model::RoutedExperts* draft_routed = nullptr);

  // Returns the sampled tokens of each chunk ([1] if chunk.sample, else empty), with their
  // logprobs when the chunk asks for them. Everything it needs travels in the plan
  // (tokens, lookback, tables, slots).
  std::vector<SampledChunk> run(const StepPlan& plan);
  // The same into `sampled` ([plan.chunks.size()]); each element's vectors keep their
  // capacity, so with the same vector every step (and the executor's own per-step
  // buffers, kept across steps) a steady decode step makes no heap allocation here.
  void run(const StepPlan& plan, std::vector<SampledChunk>& sampled);

  const kernels::ExecContext& context() const { return *context_; }
  // The host and disk tiers' bytes, for plans with tier_ops (nullptr: none come).
  void set_tier_storage(TierStorage* tiers) { tiers_ = tiers; }
  // Runs the plan's tier copies (run() starts with them). A caller that fails a step
  // without run() must still call this: the KV bookkeeping already counts on those
  // copies (a tier slot said to hold a block, a published block said to be loaded).
  void apply_tier_ops(const StepPlan& plan);
  void apply_kv_loads(const StepPlan& plan);  // KV hand-offs admitted by the plan

  // Forgets what it knew of requests that ended or lost their KV.
  void drop(RequestId id) {
    started_.erase(id);
    last_sampled_.erase(id);
  }

 private:
  struct Sampled {
    int64_t generation = 0;
    int32_t token = 0;
  };
  // The chunk's tokens with a kPlaceholderToken replaced by the token this executor
  // sampled for the request in an earlier step (plans run in order, so that is the one
  // the plan was made ahead of). False if there is none (that step failed): skip it.
  bool resolve_tokens(const ScheduledChunk& c, std::vector<int32_t>& tokens) const;

  // Samples chunk c's token from `logits` (its own stream: the request id), records it
  // and appends it (and its logprobs) to `out`; `later`: the token is that many output
  // tokens after the chunk's first (verify rows).
  int32_t sample(const ScheduledChunk& c, std::span<const float> logits, SampledChunk& out,
                 uint64_t later = 0);
  // Drafts a speculative chunk may have: its k, cut before max_position_embeddings.
  int64_t draft_places(const ScheduledChunk& c) const;
  // The draft query of a speculative chunk whose tokens are [bonus].
  DraftQuery draft_query(const ScheduledChunk& c, const std::vector<int32_t>& tokens) const;
  // The drafts of the step's speculative chunks (b.drafting) in one batch, appended to
  // their tokens: through draft_routed_ (zero rows when there are none), or here.
  void draft_batch(const StepPlan& plan);
  // A speculative chunk's input, now that its tokens hold its drafts: the verify rows,
  // and the undo of the ring slots they overwrite.
  void prepare_verify(size_t k, const ScheduledChunk& c, size_t undo_index);
  // Verification of [bonus, d_1..d_k'] from their logits [k' + 1, V]: the drafts the
  // target's own draws agree with, then the target's token (MODEL.md §8; greedy: argmax).
  void verify(const ScheduledChunk& c, std::span<const int32_t> tokens,
              std::span<const float> logits, SampledChunk& out);
  // A fork chunk: the sibling gets its leader's state (right after the leader's prompt,
  // before any later plan runs) and its first sample from the leader's logits.
  void run_fork(const ScheduledChunk& c, std::span<const float> leader_logits, SampledChunk& out);
  // The step's i-th PagedSequence / StepUndo, reset for this step (kept across steps).
  PagedSequence& sequence(size_t i, const ScheduledChunk& c, int64_t kv_length);
  StepUndo& undo(size_t i, const ScheduledChunk& c, int64_t end);

  // Positions [P', E) of a chunk's decoder tail (§6), or -1 for every layer.
  int64_t decoder_tail_start(const ScheduledChunk& chunk) const;

  const model::BatchForward& forward_;
  const model::ServingShape& shape_;  // forward_'s
  PagedKvStorage& storage_;
  ExecutorOptions options_;
  std::unique_ptr<kernels::ExecContext> context_;  // bound to the calling thread in run()
  model::RoutedExperts* routed_;
  const Drafter* drafter_;
  model::RoutedExperts* draft_routed_;
  TierStorage* tiers_ = nullptr;
  std::unordered_map<RequestId, int64_t> started_;  // id -> generation whose slot is set up
  std::unordered_map<RequestId, Sampled> last_sampled_;
  // One step's working state, kept across steps for its capacity (the low-latency path:
  // built once, updated in place). Index k = the k-th chunk that runs rows.
  struct StepBuffers {
    std::vector<std::vector<int32_t>> tokens;            // [chunks] resolved (+ drafts)
    std::vector<size_t> ran;                             // [k] its plan.chunks index
    std::vector<model::SequenceInput> inputs;            // [k]
    std::vector<std::unique_ptr<PagedSequence>> seqs;    // [>= k]
    std::vector<std::unique_ptr<StepUndo>> undos;        // [>= speculative chunks]
    std::vector<StepUndo*> undo_of;                      // [chunks] or null
    std::vector<size_t> drafting;                        // [k] of speculative chunks
    std::vector<DraftQuery> queries;                     // draft_batch's
    std::vector<std::vector<int32_t>*> drafts;           // draft_batch's
    std::vector<std::vector<float>> logits;              // [k] the forward's
  } step_;
};

}  // namespace troupe::runtime
