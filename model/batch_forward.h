// model::BatchForward: what the engine runs a step on. One forward pass over a batch of
// sequences, each with its own positions and paged state (model::KvStore), and the
// model's ServingShape (what the paged cache holds, which engine features apply).
// DeepSeek-V4.1's Forward (model/forward.h) and the LLaMA family's LlamaForward
// (model/llama_forward.h) implement it; runtime/'s Executor calls nothing else.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "model/kv_store.h"
#include "model/routed_experts.h"
#include "model/serving_shape.h"

namespace troupe::model {

struct SequenceInput {
  KvStore* state = nullptr;         // extended in place by tokens (SequenceState, or paged)
  std::span<const int32_t> tokens;  // new tokens at positions state->length(), ...
  bool all_logits = false;          // logits for every new token, else only the last
  // Bounded replay (MODEL.md §6): when >= 0, layer Ne still writes its KV rows, index keys
  // and window rows for every new token, but its queries and every later layer run only
  // positions >= decoder_tail_start (= max(P', E_prompt - R)); logits come from those rows
  // (none when the tail is empty). -1 = full compute. Only for shapes with decoder_tail.
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

class BatchForward {
 public:
  virtual ~BatchForward() = default;

  // Runs the batch into `logits` (resized to the batch): per sequence [rows, V] flattened,
  // rows = 1 or the number of new tokens. Bad input throws troupe::Error before any state
  // changes. routed: where the routed experts run (an expert-parallel rank's exchange);
  // nullptr: all of them here.
  virtual void run(std::span<SequenceInput> batch, std::vector<std::vector<float>>& logits,
                   const TraceFn& trace = nullptr, RoutedExperts* routed = nullptr) const = 0;
  // A step with no tokens on an expert-parallel rank: joins every MoE layer's exchange
  // with zero rows, so the ranks with work never wait for this one (DESIGN.md).
  virtual void run_idle(RoutedExperts& routed) const = 0;

  virtual const ServingShape& shape() const = 0;

  // The routed experts of every MoE layer, in the order run() hands them to a
  // RoutedExperts (what an expert placement numbers and a rank copies its slots from).
  // Empty: the model has no MoE layer (shape().expert_parallel is then false).
  virtual MoeLayers routed_layers() const { return {}; }
};

// Logical experts per MoE layer (0: none), the same in every layer.
inline int64_t routed_expert_count(const BatchForward& f) {
  const MoeLayers layers = f.routed_layers();
  return layers.empty() ? 0 : static_cast<int64_t>(layers.front()->size());
}

}  // namespace troupe::model
