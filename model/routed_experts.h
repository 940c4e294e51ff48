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

// One MoE layer's routed experts, as the exchange sees them: [experts] SwiGLU experts
// (w1 gate, w3 up, w2 down), numbered as the router numbers them. V4.1's MoeWeights::experts;
// a LLaMA-family MoE layer's (LlamaForward keeps one per layer).
using ExpertTable = std::vector<kernels::ExpertWeights>;

// The MoE layers of one model (the target's, or the DSpark draft's), in the order its
// expert placement numbers them.
using MoeLayers = std::vector<const ExpertTable*>;

inline MoeLayers target_moe_layers(const ModelWeights& model) {  // [num_hidden_layers]
  MoeLayers layers;
  for (const LayerWeights& l : model.layers) layers.push_back(&l.ffn.experts);
  return layers;
}

inline MoeLayers draft_moe_layers(const DsparkWeights& draft) {  // [num_nextn_predict_layers]
  MoeLayers layers;
  for (const DsparkStageWeights& s : draft.stages) layers.push_back(&s.ffn.experts);
  return layers;
}

// One MoE layer's rows for the exchange. Model-neutral: the expert shapes travel with the
// batch, so V4.1 and the LLaMA family share the exchange.
struct RoutedBatch {
  const ExpertTable* experts = nullptr;  // [experts] the layer's routed experts
  int64_t layer = 0;
  const float* x = nullptr;         // [rows, hidden] the layer's normed input
  int64_t rows = 0;                 // may be 0: an idle rank still joins the exchange
  const int32_t* pick = nullptr;    // [rows, top_k] logical experts
  const float* weight = nullptr;    // [rows, top_k] routing weights
  int64_t top_k = 0;
  float* out = nullptr;             // [rows, hidden] += Σ_k weight · Expert_pick(x), k ascending
  int64_t hidden = 0;               // H of the model
  int64_t inter = 0;                // I, every routed expert's width
  float swiglu_limit = 0;           // the routed experts' SwiGLU clamp; 0: none (LLaMA)
  // The experts' GEMM precision (model::ForwardOptions); every rank of a group runs the
  // same engine options, so the rows a rank computes for others use its own.
  kernels::GemmPrecision precision = kernels::GemmPrecision::F32;

  // A V4.1 MoE layer's batch (its config's widths and clamp); rows are set by the caller.
  static RoutedBatch of(const ModelConfig& c, const MoeWeights& w, int64_t layer, int64_t top_k,
                        kernels::GemmPrecision precision = kernels::GemmPrecision::F32) {
    RoutedBatch b;
    b.experts = &w.experts;
    b.layer = layer;
    b.top_k = top_k;
    b.hidden = c.hidden_size;
    b.inter = c.moe_intermediate_size;
    b.swiglu_limit = static_cast<float>(c.swiglu_limit);
    b.precision = precision;
    return b;
  }
  // No rows: how a rank with nothing to run joins a V4.1 layer's exchange.
  static RoutedBatch none(const ModelConfig& c, const MoeWeights& w, int64_t layer,
                          int64_t top_k,
                          kernels::GemmPrecision precision = kernels::GemmPrecision::F32) {
    return of(c, w, layer, top_k, precision);
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
