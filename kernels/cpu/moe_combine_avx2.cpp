// combine_token (moe_combine_rows.h) on AVX2.
#include <immintrin.h>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/moe_combine_rows.h"
#include "kernels/cpu/moe_combine_simd.h"

namespace troupe::kernels::cpu {

void combine_token_avx2(float* out, const float* const* y, const float* w, int64_t count,
                        int64_t hidden) {
  combine_token_simd<avx2::Simd>(out, y, w, count, hidden);
}

}  // namespace troupe::kernels::cpu
