// AVX2 rope rotation: 4 pairs per vector; the pair swap is an in-lane permute.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/rope_rows.h"

namespace troupe::kernels::cpu {
namespace {

// x[0, 8) rotated, through `load` / `store` (plain, or masked for the ragged tail).
template <class Load, class Store>
inline void rotate8(float* x, const float* cos2, const float* sin2, Load load, Store store) {
  const __m256 v = load(x);
  const __m256 swapped = _mm256_permute_ps(v, 0xB1);  // (x0,x1,x2,x3) -> (x1,x0,x3,x2)
  // Two rounded products and one add, as ref::rope computes them: the empty asm makes
  // each product a value GCC must round, so it cannot contract mul + add into an FMA
  // (it does that to the plain intrinsics in files built with -mfma).
  __m256 a = _mm256_mul_ps(v, load(cos2));
  __m256 b = _mm256_mul_ps(swapped, load(sin2));
  __asm__("" : "+x"(a), "+x"(b));
  store(x, _mm256_add_ps(a, b));
}

void rotate(float* x, const float* cos2, const float* sin2, int64_t dr) {
  int64_t j = 0;
  for (; j + 8 <= dr; j += 8)
    rotate8(x + j, cos2 + j, sin2 + j, [](const float* p) { return _mm256_loadu_ps(p); },
            [](float* p, __m256 v) { _mm256_storeu_ps(p, v); });
  if (j < dr) {  // masked: vmaskmovps stores are slow on AMD cores, so only the tail
    const __m256i m = avx2::first_lanes(dr - j);
    rotate8(x + j, cos2 + j, sin2 + j, [m](const float* p) { return _mm256_maskload_ps(p, m); },
            [m](float* p, __m256 v) { _mm256_maskstore_ps(p, m, v); });
  }
}

}  // namespace

RopeRotateFn avx2_rope_rotate() {
  return rotate;
}

}  // namespace troupe::kernels::cpu
