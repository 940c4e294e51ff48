// kernels/cpu/swiglu_avx512.cpp's SwiGLU on AVX2+FMA, eight values at a time, with its
// e^x in double (the same reduction and polynomial; 2^k built as the double's exponent).
#include <immintrin.h>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/swiglu.h"

namespace troupe::kernels::cpu {
namespace {

__m256d exp_pd(__m256d x) {
  const __m256d k = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(swiglu_exp::kLog2e)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256d r = _mm256_fnmadd_pd(k, _mm256_set1_pd(swiglu_exp::kLn2Hi), x);
  r = _mm256_fnmadd_pd(k, _mm256_set1_pd(swiglu_exp::kLn2Lo), r);
  __m256d poly = _mm256_set1_pd(swiglu_exp::kExpTaylor[0]);
  for (int i = 1; i < 12; ++i) poly = _mm256_fmadd_pd(poly, r, _mm256_set1_pd(swiglu_exp::kExpTaylor[i]));
  // k in [-151, 129] after the caller's clamp: 2^k is a normal double, the product exact.
  const __m256i ki = _mm256_cvtepi32_epi64(_mm256_cvtpd_epi32(k));
  const __m256d pow2 = _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(ki, _mm256_set1_epi64x(1023)), 52));
  return _mm256_mul_pd(poly, pow2);
}

__m256 exp_ps(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
  const __m128 lo = _mm256_cvtpd_ps(exp_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(x))));
  const __m128 hi = _mm256_cvtpd_ps(exp_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(x, 1))));
  return _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
}

}  // namespace

void swiglu_avx2(float* a, const float* b, int64_t n, float limit) {
  const __m256 one = _mm256_set1_ps(1.0f), hi = _mm256_set1_ps(limit), lo = _mm256_set1_ps(-limit);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += 8) {
    // The tail by masked loads, so a value's bits never depend on where a range starts.
    const __m256i mask = avx2::first_lanes(n - i < 8 ? n - i : 8);
    __m256 va = _mm256_maskload_ps(a + i, mask), vb = _mm256_maskload_ps(b + i, mask);
    if (limit > 0) {  // min(x, L) is x < L ? x : L, so a NaN becomes L, as std::fmin does
      va = _mm256_min_ps(va, hi);
      vb = _mm256_min_ps(_mm256_max_ps(vb, lo), hi);
    }
    const __m256 e = exp_ps(_mm256_xor_ps(va, sign));
    _mm256_maskstore_ps(a + i, mask, _mm256_mul_ps(_mm256_div_ps(va, _mm256_add_ps(one, e)), vb));
  }
}

}  // namespace troupe::kernels::cpu
