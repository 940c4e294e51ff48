// AVX2 rope rotation: 4 pairs per vector; the pair swap is an in-lane permute.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/rope_rows.h"

namespace troupe::kernels::cpu {
namespace {

void rotate(float* x, const float* cos2, const float* sin2, int64_t dr) {
  for (int64_t j = 0; j < dr; j += 8) {
    const __m256i m = avx2::first_lanes(std::min<int64_t>(8, dr - j));
    const __m256 v = _mm256_maskload_ps(x + j, m);
    const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x0,x1,x2,x3) -> (x1,x0,x3,x2)
    // Two rounded products and one add, as ref::rope computes them: the empty asm makes
    // each product a value GCC must round, so it cannot contract mul + add into an FMA
    // (it does that to the plain intrinsics in files built with -mfma).
    __m256 a = _mm256_mul_ps(v, _mm256_maskload_ps(cos2 + j, m));
    __m256 b = _mm256_mul_ps(swapped, _mm256_maskload_ps(sin2 + j, m));
    __asm__("" : "+x"(a), "+x"(b));
    _mm256_maskstore_ps(x + j, m, _mm256_add_ps(a, b));
  }
}

}  // namespace

RopeRotateFn avx2_rope_rotate() {
  return rotate;
}

}  // namespace troupe::kernels::cpu
