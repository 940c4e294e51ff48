// Attention's key-tile loops (attention_simd.h) on AVX2+FMA, fitted to 16 ymm registers:
// dots of 2 heads x 4 keys per pass (8 accumulators), the weighted sum 4 heads x 2
// vectors (16 floats of each head's accumulator) held across the tile.
#include <immintrin.h>

#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/norm_simd.h"

namespace troupe::kernels::cpu {

const AttentionKernels& avx2_attention_kernels() {
  static const AttentionKernels k{attention_logits<avx2::Simd, 2, 4>, attention_accumulate<avx2::Simd, 4, 2>,
                                  exp_shift_sum<avx2::Simd>};
  return k;
}

}  // namespace troupe::kernels::cpu
