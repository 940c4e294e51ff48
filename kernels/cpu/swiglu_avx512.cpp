// The routed / dense SwiGLU of kernels/cpu/moe.cpp on AVX-512: a[i] = silu(a[i]) · b[i]
// with the clamp of MODEL.md §5.5 when limit > 0, sixteen values at a time, the same
// operations as moe_detail::swiglu (min / max with its NaN choices, a / (1 + e^-a) · b).
//
// e^x is evaluated in double and rounded once to f32: x = k·ln2 + r (|r| <= ln2/2, ln2 in
// two parts so k·ln2_hi is exact), a degree-11 Taylor polynomial for e^r (truncation
// < 1e-14 relative), scalef by k. That is the correctly rounded e^x unless the exact value
// lies within ~1e-7 ulp of a rounding midpoint, as std::exp's (glibc: within 0.502 ulp)
// is, so the two nearly always agree bit for bit and otherwise by one ulp; an f32
// polynomial (avx512::exp, ~2 ulp) moved the V4.1 golden rows measurably
// (tests/model/golden11_draft_test.cpp).
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/swiglu.h"

namespace troupe::kernels::cpu {
namespace {

__m512d exp_pd(__m512d x) {
  const __m512d k = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(swiglu_exp::kLog2e)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512d r = _mm512_fnmadd_pd(k, _mm512_set1_pd(swiglu_exp::kLn2Hi), x);
  r = _mm512_fnmadd_pd(k, _mm512_set1_pd(swiglu_exp::kLn2Lo), r);
  __m512d poly = _mm512_set1_pd(swiglu_exp::kExpTaylor[0]);
  for (int i = 1; i < 12; ++i) poly = _mm512_fmadd_pd(poly, r, _mm512_set1_pd(swiglu_exp::kExpTaylor[i]));
  return _mm512_scalef_pd(poly, k);
}

// e^x per lane, x in f32; NaN stays NaN, the clamp keeps k in range (e^-104 and e^89
// round to 0 and inf in f32 as they are in double).
__m512 exp_ps(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
  const __m256 lo = _mm512_cvtpd_ps(exp_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(x))));
  const __m256 hi = _mm512_cvtpd_ps(exp_pd(_mm512_cvtps_pd(_mm256_castpd_ps(
      _mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)))));
  return _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
}

}  // namespace

void swiglu_avx512(float* a, const float* b, int64_t n, float limit) {
  const __m512 one = _mm512_set1_ps(1.0f), hi = _mm512_set1_ps(limit), lo = _mm512_set1_ps(-limit);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t i = 0; i < n; i += 16) {
    // The tail by masked loads, so a value's bits never depend on where a range starts.
    const __mmask16 mask = avx512::first_lanes(n - i < 16 ? n - i : 16);
    __m512 va = _mm512_maskz_loadu_ps(mask, a + i), vb = _mm512_maskz_loadu_ps(mask, b + i);
    if (limit > 0) {  // min(x, L) is x < L ? x : L, so a NaN becomes L, as std::fmin does
      va = _mm512_min_ps(va, hi);
      vb = _mm512_min_ps(_mm512_max_ps(vb, lo), hi);
    }
    const __m512 e = exp_ps(_mm512_xor_ps(va, sign));
    _mm512_mask_storeu_ps(a + i, mask, _mm512_mul_ps(_mm512_div_ps(va, _mm512_add_ps(one, e)), vb));
  }
}

}  // namespace troupe::kernels::cpu
