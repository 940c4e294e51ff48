// The DSpark draft network (MODEL.md §8): Bs slots after the anchor position a run
// through the S draft stages (SWA-only draft attention over the target features F,
// the draft MoE, the stage's own mHC), then the Markov head proposes d_1..d_k.
//
//   slot i:   input embed[tok[a]] (i = 0) or embed[noise] (i >= 1), position a+1+i
//   keys:     context rows row(F[p], p), a-W+1 <= p <= a (held ones)  ++  block rows of
//             every slot (bidirectional within the block)
//   slot i predicts position a+1+i; slot 0's token is the target's bonus tok[a+1]
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/scratch.h"
#include "model/config.h"
#include "model/feature_ring.h"
#include "model/forward.h"
#include "model/routed_experts.h"
#include "model/weights.h"

namespace troupe::model {

// One request's query in a batched draft (DsparkDraft::propose_batch): propose()'s
// arguments.
struct DraftInput {
  const FeatureRing* features = nullptr;
  int64_t anchor = 0;
  int32_t anchor_token = 0;
  int32_t bonus = 0;
  int64_t k = 0;
};

struct DraftProposal {
  std::vector<int32_t> tokens;    // [k'] d_1..d_k' for positions a+2 .. a+1+k' (k' <= k)
  std::vector<float> confidence;  // [k + 1] conf_0..conf_k (conf_0 unused, §8)
};

class DsparkDraft {
 public:
  // expert_precision: the draft MoE's routed expert GEMMs, as the target's
  // (ForwardOptions::expert_precision; Int8 reads the experts' row groups where the loader
  // packed them, model/row_groups_copy.h).
  DsparkDraft(const ModelConfig& c, const ModelWeights& target, const DsparkWeights& draft,
              kernels::GemmPrecision expert_precision = kernels::GemmPrecision::F32);

  // h [Bs, H]: Σ pre X of every slot after the last stage (pre-norm), for anchor a whose
  // token is anchor_token. Needs F[a] in the ring.
  std::vector<float> hidden(const FeatureRing& F, int64_t anchor, int32_t anchor_token) const;

  // Greedy drafts after the target sampled `bonus` = tok[a+1]: k' = min(k, Bs-1, room
  // before max_position_embeddings) tokens, fewer when Π conf_j <= conf_min (§8 early
  // stop; 0 = never cut). `trace` (tests, like Forward::run's) sees "dspark.base" and
  // "dspark.logits" (the Markov-loop logits) of draft positions i = 1..k as rows i, layer -1.
  DraftProposal propose(const FeatureRing& F, int64_t anchor, int32_t anchor_token, int32_t bonus,
                        int64_t k, float conf_min = 0.0f, const TraceFn& trace = nullptr) const;
  // The same into `out` (its vectors' capacity reused: the engine's drafter allocates
  // nothing per step once warm).
  void propose(const FeatureRing& F, int64_t anchor, int32_t anchor_token, int32_t bonus,
               int64_t k, DraftProposal& out, float conf_min = 0.0f,
               const TraceFn& trace = nullptr) const;

  // Every query of a step at once, the draft's routed experts through `routed` (an
  // expert-parallel rank's exchange, whose placement numbers the draft's MoE layers
  // 0..S-1): one exchange per stage whatever the queries, zero rows when there are none,
  // so every rank of the group makes the same exchanges. out[i] ([queries.size()]) is
  // what propose() gives for queries[i], bit for bit: every op of a stage works row by
  // row except the draft attention, which runs per query on its own Bs rows.
  void propose_batch(std::span<const DraftInput> queries, std::span<DraftProposal> out,
                     RoutedExperts& routed, float conf_min = 0.0f) const;
  // The same with the routed experts here: a step's queries share each stage's weight
  // reads (one pass over the draft for the batch, not one per query).
  void propose_batch(std::span<const DraftInput> queries, std::span<DraftProposal> out,
                     float conf_min = 0.0f) const;

  const ModelConfig& config() const { return c_; }
  const DsparkWeights& weights() const { return w_; }

 private:
  // h [queries, Bs, H]; routed: where the MoE's routed experts run (nullptr: here).
  kernels::scratch_vector<float> hidden_rows(std::span<const DraftInput> queries,
                                             RoutedExperts* routed) const;
  void stage(int64_t s, std::span<const DraftInput> queries, kernels::scratch_vector<float>& X,
             kernels::scratch_vector<float>& pre, RoutedExperts* routed) const;
  // The Markov loop of one query from its slots' hidden states h [Bs, H].
  void finish(const DraftInput& q, const float* h, DraftProposal& out, float conf_min,
              const TraceFn& trace) const;
  void propose_rows(std::span<const DraftInput> queries, std::span<DraftProposal> out,
                    RoutedExperts* routed, float conf_min) const;
  // No query on this rank: joins each stage's exchange with zero rows.
  void join_idle(RoutedExperts& routed) const;

  const ModelConfig& c_;
  const ModelWeights& target_;
  const DsparkWeights& w_;
  std::vector<double> freqs_;  // rope_theta, no YaRN
  kernels::GemmPrecision expert_precision_;
};

// Draft attention of one stage (§8), exposed for tests: x [Bs, H] the normalized slot
// inputs at positions anchor+1+i, context rows from F; out [Bs, H] (after wo_b).
void draft_attention(const ModelConfig& c, const AttentionWeights& w,
                     const std::vector<double>& freqs, const FeatureRing& F, int64_t anchor,
                     const float* x, float* out);
// The same for every query's Bs slots at once: x and out [queries · Bs, H], query n's
// slots at rows n·Bs .. n·Bs + Bs - 1 (only each query's features and anchor are read).
void draft_attention(const ModelConfig& c, const AttentionWeights& w,
                     const std::vector<double>& freqs, std::span<const DraftInput> queries,
                     const float* x, float* out);

}  // namespace troupe::model
