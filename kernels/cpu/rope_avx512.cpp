// AVX-512 rope rotation: 8 pairs per vector; the pair swap is an in-lane permute.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/rope_rows.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

void rotate(float* x, const float* cos2, const float* sin2, int64_t dr) {
  for (int64_t j = 0; j < dr; j += 16) {
    const __mmask16 m = avx512::first_lanes(std::min<int64_t>(16, dr - j));
    const __m512 v = _mm512_maskz_loadu_ps(m, x + j);
    const __m512 swapped = _mm512_permute_ps(v, 0xB1);  // (x0,x1,x2,x3) -> (x1,x0,x3,x2)
    // Two rounded products and one add, as ref::rope computes them. The explicit-
    // rounding forms keep GCC from contracting mul+add into an FMA (it does that
    // to the plain intrinsics in files built with -mfma).
    const __m512 r = _mm512_add_round_ps(
        _mm512_mul_round_ps(v, _mm512_maskz_loadu_ps(m, cos2 + j), kRound),
        _mm512_mul_round_ps(swapped, _mm512_maskz_loadu_ps(m, sin2 + j), kRound), kRound);
    _mm512_mask_storeu_ps(x + j, m, r);
  }
}

}  // namespace

RopeRotateFn avx512_rope_rotate() {
  return rotate;
}

}  // namespace troupe::kernels::cpu
