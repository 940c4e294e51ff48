// The LLaMA-family forward pass (one sequence, contiguous KV), on troupe's kernels:
//
//   x = token_embd[tokens]
//   per layer l:
//     attn_in  = RMSNorm(x, attn_norm)
//     q, k, v  = attn_in · Wqᵀ, Wkᵀ, Wvᵀ (+ bq, bk, bv: qwen2*);  RoPE(q), RoPE(k) on
//                adjacent pairs (ggml's "normal" mode; qwen2*: pairs (i, i + hd/2), NEOX
//                mode), θ = <arch>.rope.freq_base
//     attn     = causal softmax(q·kᵀ / sqrt(hd)) · v, query head h reads kv head h / (H / KV)
//     x       += attn · Woᵀ
//     ffn_in   = RMSNorm(x, ffn_norm)
//     dense:  x += Wdown · (silu(Wgate · ffn_in) ⊙ Wup · ffn_in)
//     MoE:    router logits = Wr · ffn_in; the top-k experts (ties -> lower index), weights =
//             softmax over the k selected logits (= llama.cpp's softmax over all, then
//             renormalised over the selected; qwen2moe: the softmax over all experts at
//             the k, not renormalised); x += Σ weight_e · Expert_e(ffn_in)
//             qwen2moe also: x += sigmoid(ffn_in · w_gate_shexp) · SharedExpert(ffn_in)
//   logits = RMSNorm(x, output_norm) · Woutᵀ (Wout = token_embd when tied)
//
// The same layers run a sequence's K and V from a contiguous LlamaState (run, decode: the
// single-sequence path of `troupe logits`) or from the engine's paged KV (BatchForward::run
// over KvStores, runtime/executor): there every layer keeps one f32 row [K | V] per token
// in the blocks (llama_serving_shape), so both read the same values in the same order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/scratch.h"
#include "model/batch_forward.h"
#include "model/llama_config.h"
#include "model/llama_weights.h"

namespace troupe::model {

// K and V of every position so far, per layer: [length, KV * hd] each.
struct LlamaState {
  std::vector<std::vector<float>> k, v;
  int64_t length = 0;
  static LlamaState empty(const LlamaConfig& c);
};

// The engine's view of a LLaMA model: every layer holds one f32 global row [K | V]
// (2 · KV · hd floats) per token, no window rings, no compressor carry; no decoder tail or
// speculative verify (V4.1's features: the engine refuses them). A MoE model (Mixtral,
// Qwen2-MoE) runs expert-parallel: its routed experts go through the same exchange as
// V4.1's (runtime/dep/expert_parallel.h); a dense one does not.
ServingShape llama_serving_shape(const LlamaConfig& c);

class LlamaForward final : public BatchForward {
 public:
  LlamaForward(const LlamaConfig& config, const LlamaWeights& weights);

  // Appends tokens to state and returns logits [rows, V] flattened: rows = tokens.size()
  // with all_logits, else 1 (the last). Empty tokens, ids outside the vocabulary or a
  // context overflow throw troupe::Error before the state changes.
  std::vector<float> run(LlamaState& state, std::span<const int32_t> tokens, bool all_logits) const;

  // One decode step of several sequences at once: tokens[i] is appended to *states[i]
  // (distinct states), every GEMM runs on all rows together. Returns logits [B, V].
  // Checks as run() does, before any state changes.
  std::vector<float> decode(std::span<LlamaState* const> states, std::span<const int32_t> tokens) const;

  // The engine's step (BatchForward): each sequence's K and V rows in its KvStore (the
  // paged cache's PagedSequence), appended at positions state->length()... Checks as
  // run() does, and refuses a decoder tail or a replay. routed (MoE only): each layer's
  // routed experts run through it (route -> dispatch -> experts -> combine), the same
  // bits as here; the router and Qwen2-MoE's shared expert stay on this rank.
  void run(std::span<SequenceInput> batch, std::vector<std::vector<float>>& logits,
           const TraceFn& trace = nullptr, RoutedExperts* routed = nullptr) const override;
  // An expert-parallel rank with no tokens joins every MoE layer's exchange with zero
  // rows; throws for a dense model.
  void run_idle(RoutedExperts& routed) const override;
  const ServingShape& shape() const override { return shape_; }
  MoeLayers routed_layers() const override;

  const LlamaConfig& config() const { return cfg_; }

 private:
  // Rows [row, row + count) of one step belong to one sequence, at positions start..;
  // its K and V live in `state` or, for the engine, in `paged`.
  struct Segment {
    LlamaState* state;
    KvStore* paged;
    int64_t row, count, start;
    bool all_logits;  // logits of every row, else of the last
  };
  // A step's activations: from the thread's scratch pool (kernels/scratch.h), so a
  // steady decode step allocates nothing.
  using Rows = kernels::scratch_vector<float>;
  using Normed = kernels::scratch_buffer<float>;  // a norm's output rows, written in full
  // Logits of the segments' rows, [Σ rows, V] in segment order.
  // routed: where the MoE layers' routed experts run (nullptr: here).
  Rows forward(std::span<const Segment> segs, std::span<const int32_t> tokens,
               RoutedExperts* routed = nullptr) const;
  // Stores segment sg's new K and V rows of `layer` and points krows / vrows [start +
  // count] at the rows of positions [0, start + count), KV head 0's slice of each; returns
  // the floats from one head's slice to the next (CausalAttentionSeq::head_stride).
  int64_t store_kv(const Segment& sg, int64_t layer, const float* k, const float* v,
                   const float** krows, const float** vrows) const;
  void check_tokens(std::span<const int32_t> tokens) const;
  void attention_block(const LlamaLayerWeights& lw, int64_t layer, std::span<const Segment> segs,
                       Rows& x) const;
  void ffn_block(const LlamaLayerWeights& lw, int64_t layer, Rows& x, RoutedExperts* routed) const;
  // Layer `layer`'s routed batch with no rows set (the caller sets x, rows, picks, out).
  RoutedBatch routed_batch(int64_t layer) const;
  void shared_expert(int64_t layer, const Normed& ffn_in, Rows& x) const;

  const LlamaConfig& cfg_;
  const LlamaWeights& w_;
  std::vector<double> rope_freqs_;  // [hd / 2]
  // [L] each layer's FFN as experts (views into w_): a MoE's E routed experts, or the
  // dense MLP as one expert every row picks.
  std::vector<ExpertTable> experts_;
  std::vector<ExpertTable> shared_;  // [L] qwen2moe's shared expert as one expert; else empty
  ServingShape shape_;
};

// Routing of one row: the k largest logits (ties -> lower expert) and their weights: the
// softmax over the k (Mixtral; renormalize), or the softmax over all experts taken at the
// k (qwen2moe). pick[k], weight[k].
void route_softmax_topk(const float* logits, int64_t experts, int64_t k, int32_t* pick,
                        float* weight, bool renormalize = true);

}  // namespace troupe::model
