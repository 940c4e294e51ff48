// The non-attention sub-blocks of a layer: MoE (MODEL.md §5.5) and Engram (§7).
#pragma once

#include <cstdint>

#include "model/batch.h"
#include "model/config.h"
#include "model/engram_hash.h"
#include "model/routed_experts.h"
#include "model/weights.h"

namespace troupe::model {

// out[rows, H] = Shared(x) + Σ_pick w_e Expert_e(x); x: [rows, H]. top_k: experts per
// token, 0 = the target's c.top_k (the DSpark stages pass dspark_top_k). routed: where
// the routed experts run (model/routed_experts.h); nullptr: all of them here.
void moe_layer(const ModelConfig& c, const MoeWeights& w, int64_t layer, const Batch& b,
               const float* x, float* out, int64_t top_k = 0, RoutedExperts* routed = nullptr);

// X[rows, hc, H] += gate_s · value per stream, from the hashed n-gram table rows.
void engram_layer(const ModelConfig& c, const ModelWeights& mw, const EngramWeights& w,
                  const EngramHashTables& tables, int64_t layer, const Batch& b, float* X);

}  // namespace troupe::model
