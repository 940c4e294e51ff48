// combine_token (moe_combine_rows.h) on AVX-512.
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/moe_combine_rows.h"
#include "kernels/cpu/moe_combine_simd.h"

namespace troupe::kernels::cpu {

void combine_token_avx512(float* out, const float* const* y, const float* w, int64_t count,
                          int64_t hidden) {
  combine_token_simd<avx512::Simd>(out, y, w, count, hidden);
}

}  // namespace troupe::kernels::cpu
