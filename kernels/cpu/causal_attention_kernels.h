// The work items behind cpu::causal_attention, one set per instruction-set path
// (causal_attention.cpp: portable; causal_attention_avx2.cpp; causal_attention_avx512.cpp),
// all instantiated from the one algorithm in causal_attention_simd.h. Exposed so tests
// can run each path and its exp directly.
#pragma once

#include <cstdint>

#include "kernels/causal_attention.h"

namespace troupe::kernels::cpu {

// A one-token sequence's decode over more than kDecodeSplitKeys keys runs as items of
// that many keys each (the last one shorter), whose partial sums are merged after: so a
// long context's decode spreads over the threads even where it has few KV heads (one
// item each otherwise). A fixed size, not one from the thread count, so the result does
// not depend on the threads; a decode over at most this many keys is one item, as before.
constexpr int64_t kDecodeSplitKeys = 256;

// The partial sums of one split item, for the group's heads: o the unnormalized Σ p · V
// [group, head_dim], m the running max and l the Σ p [group], as the online softmax
// leaves them.
struct DecodePart {
  float* o;
  float* m;
  float* l;
};

struct CausalAttentionKernels {
  // Rows [r0, r0 + rows) of KV head g's query rows of a sequence with tokens > 1, the
  // rows numbered t·group + i for query row t and the group's head i; rows <= tile_rows.
  void (*tile)(const CausalAttentionParams& p, const CausalAttentionSeq& s, int64_t g, int64_t r0,
               int64_t rows);
  int64_t tile_rows;
  // Every head of KV head g of a one-token sequence over keys [first, last): into its
  // output rows (part null, the keys all of them) or as partial sums into part.
  void (*decode)(const CausalAttentionParams& p, const CausalAttentionSeq& s, int64_t g,
                 int64_t first, int64_t last, const DecodePart* part);
  // y[i] = e^{x[i]}, the softmax's exponential (its accuracy is tested on its own).
  void (*exp)(const float* x, float* y, int64_t n);
};

const CausalAttentionKernels& portable_causal_attention_kernels();
const CausalAttentionKernels& avx2_causal_attention_kernels();    // only with has_avx2()
const CausalAttentionKernels& avx512_causal_attention_kernels();  // only with has_avx512()

// The op on an explicit kernel set: items over (sequence, KV head, tile) on the pool.
void causal_attention(const CausalAttentionParams& p, const CausalAttentionKernels& k);

}  // namespace troupe::kernels::cpu
