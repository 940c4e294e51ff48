// The causal attention algorithm (causal_attention_simd.h) on AVX-512: 16 lanes and
// 32 zmm registers, so tiles of 4 vectors (64 rows) x 4 keys / 4 dims per block.
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/causal_attention_kernels.h"
#include "kernels/cpu/causal_attention_simd.h"

namespace troupe::kernels::cpu {

const CausalAttentionKernels& avx512_causal_attention_kernels() {
  static const CausalAttentionKernels k = make_causal_attention_kernels<avx512::Simd, 4, 4, 4, 4>();
  return k;
}

}  // namespace troupe::kernels::cpu
