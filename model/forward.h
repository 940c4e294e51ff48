// model::Forward: one forward pass of MODEL.md §5 over a batch of sequences, each
// with its own positions and state, in full-compute mode (every layer runs every
// new token) or with the decoder restricted to a tail (bounded replay, §6). Dense work (GEMMs, norms, MoE, mHC) runs on all rows of the batch at
// once; attention, compressor and indexer read each row's own sequence state.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "model/batch_forward.h"
#include "model/config.h"
#include "model/engram_hash.h"
#include "model/kv_store.h"
#include "model/routed_experts.h"
#include "model/state.h"
#include "model/weights.h"

namespace troupe::model {

// How a Forward computes, beyond MODEL.md: F32 everywhere is the model's definition;
// expert_precision = GemmPrecision::Int8 runs the MoE experts' FP4 GEMMs on int8 dot
// products with q8_0 activations (kernels/gemm.h; llama.cpp's MXFP4 numerics), the
// faster path MODEL.md §5 allows, with its tolerance measured in docs/model-notes.md.
struct ForwardOptions {
  kernels::GemmPrecision expert_precision = kernels::GemmPrecision::F32;
};

class Forward final : public BatchForward {
 public:
  // dspark: the draft weights, needed only to compute DSpark target features F[p] for
  // states that keep them (SequenceState::enable_features, MODEL.md §8).
  Forward(const ModelConfig& config, const ModelWeights& weights,
          const DsparkWeights* dspark = nullptr, ForwardOptions options = {});

  // Runs the batch; returns per sequence its logits, [rows, V] flattened (rows = 1 or
  // the number of new tokens). Bad input (empty tokens, ids out of range, positions
  // beyond max_position_embeddings) throws troupe::Error before any state changes.
  // routed: where the routed experts run (an expert-parallel rank's exchange); nullptr:
  // all of them here.
  std::vector<std::vector<float>> run(std::span<SequenceInput> batch,
                                      const TraceFn& trace = nullptr,
                                      RoutedExperts* routed = nullptr) const;
  // The same into `logits` (resized to the batch; each vector keeps its capacity, so a
  // caller that passes the same one every step allocates nothing for them). Activations
  // live in the thread's ScratchPool (kernels/scratch.h): a decode step of a steady batch
  // makes no heap allocation.
  void run(std::span<SequenceInput> batch, std::vector<std::vector<float>>& logits,
           const TraceFn& trace = nullptr, RoutedExperts* routed = nullptr) const override;
  // A step with no tokens on an expert-parallel rank: joins every MoE layer's exchange
  // with zero rows, so the ranks with work never wait for this one (DESIGN.md).
  void run_idle(RoutedExperts& routed) const override;
  MoeLayers routed_layers() const override { return target_moe_layers(w_); }

  const ModelConfig& config() const { return cfg_; }
  const ServingShape& shape() const override { return shape_; }
  const ModelWeights& weights() const { return w_; }
  const ForwardOptions& options() const { return options_; }

 private:
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  const DsparkWeights* dspark_;
  ForwardOptions options_;
  std::vector<std::vector<double>> rope_freqs_;  // [L] per layer
  EngramHashTables engram_;
  ServingShape shape_;
};

}  // namespace troupe::model
