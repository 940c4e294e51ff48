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

#include "model/config.h"
#include "model/engram_hash.h"
#include "model/kv_store.h"
#include "model/routed_experts.h"
#include "model/state.h"
#include "model/weights.h"

namespace troupe::model {

struct SequenceInput {
  KvStore* state = nullptr;         // extended in place by tokens (SequenceState, or paged)
  std::span<const int32_t> tokens;  // new tokens at positions state->length(), ...
  bool all_logits = false;          // logits for every new token, else only the last
  // Bounded replay (MODEL.md §6): when >= 0, layer Ne still writes its KV rows, index keys
  // and window rows for every new token, but its queries and every later layer run only
  // positions >= decoder_tail_start (= max(P', E_prompt - R)); logits come from those rows
  // (none when the tail is empty). -1 = full compute.
  int64_t decoder_tail_start = -1;
  // Bounded replay after a prefix-cache hit (§6.1): the chunk starts at first_position
  // P' < state->length() = B. Rows before B rebuild hidden states and the encoder's window
  // rows only; the global KV of those tokens is already in the state and is not rewritten.
  // -1 = state->length() (no replay).
  int64_t first_position = -1;
  // Layer Ne stores window rows for positions >= this; -1 = §6.2's rule, min(B, tail).
  // An exact prefix replay passes first_position, so the decoder tail's queries find the
  // rows a cold run would have.
  int64_t window_rows_from = -1;

  int64_t start() const { return first_position >= 0 ? first_position : state->length(); }
};

// Debug/test hook: called with every named intermediate (llama.cpp's cb(cur, name, il)).
// Names follow the golden dump: attn_in, attn_out, X, pre, moe_pick, index_score, sel
// (per row of the batch; integers are passed as floats).
using TraceFn = std::function<void(const std::string& name, int64_t layer, int64_t row,
                                   std::span<const float> values)>;

class Forward {
 public:
  // dspark: the draft weights, needed only to compute DSpark target features F[p] for
  // states that keep them (SequenceState::enable_features, MODEL.md §8).
  Forward(const ModelConfig& config, const ModelWeights& weights,
          const DsparkWeights* dspark = nullptr);

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
           const TraceFn& trace = nullptr, RoutedExperts* routed = nullptr) const;
  // A step with no tokens on an expert-parallel rank: joins every MoE layer's exchange
  // with zero rows, so the ranks with work never wait for this one (DESIGN.md).
  void run_idle(RoutedExperts& routed) const;

  const ModelConfig& config() const { return cfg_; }
  const ModelWeights& weights() const { return w_; }

 private:
  const ModelConfig& cfg_;
  const ModelWeights& w_;
  const DsparkWeights* dspark_;
  std::vector<std::vector<double>> rope_freqs_;  // [L] per layer
  EngramHashTables engram_;
};

}  // namespace troupe::model
