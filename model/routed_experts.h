// Where a MoE layer's routed experts run (MODEL.md §5.5). The layer gates its own tokens
// and hands the picks over. Without one (nullptr) every expert runs here, on this rank;
// an expert-parallel rank (runtime/dep/expert_parallel.h) sends each row to the rank that
// holds its expert and sums what comes back in the same order (kernels::moe_combine), so
// the bits do not depend on where an expert ran.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "model/config.h"
#include "model/weights.h"

namespace troupe::model {

// The MoE layers of one model (the target's, or the DSpark draft's), in the order its
// expert placement numbers them.
using MoeLayers = std::vector<const MoeWeights*>;

inline MoeLayers target_moe_layers(const ModelWeights& model) {  // [num_hidden_layers]
  MoeLayers layers;
  for (const LayerWeights& l : model.layers) layers.push_back(&l.ffn);
  return layers;
}

inline MoeLayers draft_moe_layers(const DsparkWeights& draft) {  // [num_nextn_predict_layers]
  MoeLayers layers;
  for (const DsparkStageWeights& s : draft.stages) layers.push_back(&s.ffn);
  return layers;
}

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
  // The experts' GEMM precision (model::ForwardOptions); every rank of a group runs the
  // same engine options, so the rows a rank computes for others use its own.
  kernels::GemmPrecision precision = kernels::GemmPrecision::F32;

  // No rows: how a rank with nothing to run joins a layer's exchange.
  static RoutedBatch none(const ModelConfig& c, const MoeWeights& w, int64_t layer,
                          int64_t top_k,
                          kernels::GemmPrecision precision = kernels::GemmPrecision::F32) {
    RoutedBatch b;
    b.precision = precision;
    b.config = &c;
    b.weights = &w;
    b.layer = layer;
    b.top_k = top_k;
    return b;
  }
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
