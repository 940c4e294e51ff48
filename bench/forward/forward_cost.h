// What one batched forward step must move and compute, for `troupe bench forward`'s
// "% of limit" columns. Pure arithmetic over the config and its checkpoint tensor list
// (model/tensor_spec.h); no timing, no model weights.
//
// A step: each of `batch` sequences holding `start` tokens adds `tokens` new ones
// (prefill: start 0, tokens C; decode: start C+k, tokens 1). Full-compute mode: every
// layer runs every new token, as model::Forward does.
//
// Bytes (distinct bytes the step must read at least once):
//   weights  dense target tensors once (all but routed experts, Engram tables and the
//            embedding), embedding rows of min(V, T) tokens, per layer the expected
//            number of distinct routed experts nE·(1 − (1 − kE/nE)^T) for T = batch·tokens
//            tokens, per Engram layer min(rows, T·eH·(N−1)) table rows; as stored.
//   KV       per sequence and layer: the window rows held after the step, the distinct
//            compressed rows selected (≤ min(visible, tokens·K)) and, at Full/Reindex
//            layers, the index keys scored; f32 values, as model::SequenceState keeps
//            them. Reuse layers count their reads of the source's rows again.
// FLOPs (multiply-add = 2):
//   matmul     2 · (weights multiplied per token: dense + shared + kE routed experts,
//              embedding and Engram lookups excluded) · T, plus the head 2·V·H per
//              logits row (one per sequence: only the last token's logits are asked for)
//   attention  per token per layer 2·2·nh·D·keys, keys = min(W, p+1) window rows +
//              min(K, visible) selected rows (visible = (p+1) div r, ratio>0 layers)
//   indexer    per token per Full/Reindex layer 2·nI·dI·(rows scored: the visible rows,
//              or at most Kb·Bc candidate rows at level-2 Reindex layers)
#pragma once

#include <cstdint>

#include "model/config.h"

namespace troupe::bench {

// Per-config constants of the cost model.
struct ForwardCostModel {
  model::ModelConfig cfg;
  double dense_bytes = 0;       // target weights read once per step (head included)
  double embed_row_bytes = 0;   // one row of embed.weight
  double expert_bytes = 0;      // one routed expert of one layer (w1, w2, w3, scales)
  double engram_row_bytes = 0;  // one Engram table row (data + scale)
  double matmul_params = 0;     // weights multiplied per token, head excluded
  double head_params = 0;       // V·H
};

ForwardCostModel make_forward_cost_model(const model::ModelConfig& c);

struct StepShape {
  int64_t batch = 1;   // sequences in the step
  int64_t start = 0;   // tokens each sequence already holds
  int64_t tokens = 1;  // new tokens per sequence
};

struct StepCost {
  double weight_bytes = 0;
  double kv_bytes = 0;
  double matmul_flops = 0;     // linear layers and the head
  double attention_flops = 0;  // attention scores and values, indexer scores
  double bytes() const { return weight_bytes + kv_bytes; }
  double flops() const { return matmul_flops + attention_flops; }
};

StepCost forward_step_cost(const ForwardCostModel& m, const StepShape& s);

// Expected distinct experts hit when `tokens` tokens each pick top_k of n_experts
// uniformly: n·(1 − (1 − k/n)^tokens).
double expected_distinct_experts(int64_t n_experts, int64_t top_k, double tokens);

}  // namespace troupe::bench
