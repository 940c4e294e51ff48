// Where a MoE layer's routed experts run (MODEL.md §5.5). The layer gates its own tokens
// and hands the picks over. Without one (nullptr) every expert runs here, on this rank;
// an expert-parallel rank (runtime/dep/expert_parallel.h) sends each row to the rank that
// holds its expert and sums what comes back in the same order (kernels::moe_combine), so
// the bits do not depend on where an expert ran.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/weights.h"

namespace troupe::model {

struct RoutedBatch {
  const ModelConfig* config = nullptr;
  const MoeWeights* weights = nullptr;
  int64_t layer = 0;
  const float* x = nullptr;         // [rows, H] the layer's normed input
  int64_t rows = 0;                 // may be 0: an idle rank still joins the exchange
  const int32_t* pick = nullptr;    // [rows, top_k] logical experts
  const float* weight = nullptr;    // [rows, top_k] routing weights
  int64_t top_k = 0;
  float* out = nullptr;             // [rows, H] += Σ_k weight · Expert_pick(x), k ascending
};

class RoutedExperts {
 public:
  virtual ~RoutedExperts() = default;
  // Called once per MoE layer of every forward pass, in layer order, on every rank of
  // the group (Forward::run, Forward::run_idle): a collective.
  virtual void run(const RoutedBatch& batch) = 0;
  // Called once before each step's forward pass (real or idle), on every rank.
  virtual void begin_step() {}
};

}  // namespace troupe::model
