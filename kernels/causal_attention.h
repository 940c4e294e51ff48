// Causal grouped-query attention of the LLaMA family over f32 K / V rows given as
// row pointers (a contiguous cache and the engine's paged blocks alike).
// Query head h reads KV head g = h / (heads / kv_heads); the query of step row t sits
// at position start + t and sees keys 0 .. start + t:
//
//   o_{t,h} = Σ_{j <= start+t} softmax_j(scale · q_{t,h} · K_j[g]) · V_j[g]
//
// One call serves every sequence of a step, so the threads split (sequence, KV head,
// query tile) items of them all, and a decode step of many one-token sequences keeps
// every thread busy; a one-token sequence's keys are split into fixed runs whose
// partial softmax sums are merged, so a long context's decode with few KV heads does
// too (the runs depend on the key count alone: the result does not depend on the
// threads). Each K / V row is read once per query tile and KV head for all the heads of
// its group (for a one-token sequence: once per step).
#pragma once

#include <cstdint>

namespace troupe::kernels {

struct CausalAttentionSeq {
  const float* q = nullptr;               // [tokens, heads, head_dim]
  const float* const* k_rows = nullptr;   // [start + tokens] -> KV head 0's [head_dim]
  const float* const* v_rows = nullptr;   // [start + tokens] -> KV head 0's [head_dim]
  float* out = nullptr;                   // [tokens, heads, head_dim]; must not alias q
  int64_t tokens = 0;                     // query rows of this step
  int64_t start = 0;                      // position of the first of them
  // Floats from KV head g's slice of a K / V row to head g + 1's; 0 = head_dim (each row
  // holds its heads side by side). The engine's paged blocks hold each KV head's K rows
  // in one run and its V rows in the next (model/llama_forward.cpp), so the next head's
  // slice is two runs away.
  int64_t head_stride = 0;

  int64_t kv_head_offset(int64_t g, int64_t head_dim) const {
    return g * (head_stride > 0 ? head_stride : head_dim);
  }
};

struct CausalAttentionParams {
  const CausalAttentionSeq* seqs = nullptr;  // [num_seqs]
  int64_t num_seqs = 0;
  int64_t heads = 0;                         // H, a multiple of kv_heads
  int64_t kv_heads = 0;                      // KV
  int64_t head_dim = 0;                      // hd
  float scale = 1.0f;                        // usually 1 / sqrt(hd)
};
void causal_attention(const CausalAttentionParams& p);

namespace ref { void causal_attention(const CausalAttentionParams& p); }
namespace cpu { void causal_attention(const CausalAttentionParams& p); }

}  // namespace troupe::kernels
