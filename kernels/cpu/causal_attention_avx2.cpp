// The causal attention algorithm (causal_attention_simd.h) on AVX2+FMA: 8 lanes and
// 16 ymm registers, so tiles of 2 vectors (16 rows) x 6 keys / 4 dims per block.
#include <immintrin.h>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/causal_attention_kernels.h"
#include "kernels/cpu/causal_attention_simd.h"

namespace troupe::kernels::cpu {

const CausalAttentionKernels& avx2_causal_attention_kernels() {
  static const CausalAttentionKernels k = make_causal_attention_kernels<avx2::Simd, 2, 6, 4, 4>();
  return k;
}

}  // namespace troupe::kernels::cpu
