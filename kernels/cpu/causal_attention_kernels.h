// The work items behind cpu::causal_attention, one set per instruction-set path
// (causal_attention.cpp: portable; causal_attention_avx2.cpp; causal_attention_avx512.cpp),
// all instantiated from the one algorithm in causal_attention_simd.h. Exposed so tests
// can run each path and its exp directly.
#pragma once

#include <cstdint>

#include "kernels/causal_attention.h"

namespace troupe::kernels::cpu {

struct CausalAttentionKernels {
  // Rows [r0, r0 + rows) of KV head g's query rows of a sequence with tokens > 1, the
  // rows numbered t·group + i for query row t and the group's head i; rows <= tile_rows.
  void (*tile)(const CausalAttentionParams& p, const CausalAttentionSeq& s, int64_t g, int64_t r0,
               int64_t rows);
  int64_t tile_rows;
  // Every head of KV head g of a one-token sequence.
  void (*decode)(const CausalAttentionParams& p, const CausalAttentionSeq& s, int64_t g);
  // y[i] = e^{x[i]}, the softmax's exponential (its accuracy is tested on its own).
  void (*exp)(const float* x, float* y, int64_t n);
};

const CausalAttentionKernels& portable_causal_attention_kernels();
const CausalAttentionKernels& avx2_causal_attention_kernels();    // only with has_avx2()
const CausalAttentionKernels& avx512_causal_attention_kernels();  // only with has_avx512()

// The op on an explicit kernel set: items over (sequence, KV head, tile) on the pool.
void causal_attention(const CausalAttentionParams& p, const CausalAttentionKernels& k);

}  // namespace troupe::kernels::cpu
