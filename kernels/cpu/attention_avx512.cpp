// Attention's key-tile loops (attention_simd.h) on AVX-512: dots of 4 heads x 4 keys per
// pass (each key chunk loaded once for all 4 heads), the weighted sum 4 heads x 4
// vectors (64 floats of each head's accumulator) held in registers across the tile.
#include <immintrin.h>

#include "kernels/cpu/attention_simd.h"
#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/norm_simd.h"

namespace troupe::kernels::cpu {

const AttentionKernels& avx512_attention_kernels() {
  static const AttentionKernels k{attention_logits<avx512::Simd, 4, 4>, attention_accumulate<avx512::Simd, 4, 4>,
                                  exp_shift_sum<avx512::Simd>};
  return k;
}

}  // namespace troupe::kernels::cpu
