// cpu::quantize_rows_q8 on AVX-512: a block's 32 values in two zmm, |x| by clearing the
// sign, amax by vmaxps, the products x · inv rounded to nearest even by the conversion,
// and the bytes by saturating narrowing (the values are within [-127, 127], so it never
// saturates). Every step is the portable quantizer's own f32 operation (one multiply
// per value, the scalar scale and its inverse), so the bytes, scales and sums are its
// bit for bit; the test holds both to ref::quantize_row_q8.
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/gemm_q8.h"

namespace troupe::kernels::cpu {

void quantize_rows_q8_avx512(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q,
                             float* d, int32_t* off, int32_t* sum, bool fp4_order) {
  const int64_t blocks = k / kQBlock;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  // fp4_order: [even columns | odd columns] of the block (the FP4 codes' nibble order).
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * ldx + b * kQBlock;
      __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
      if (fp4_order) {
        const __m512 e = _mm512_permutex2var_ps(lo, even, hi);
        hi = _mm512_permutex2var_ps(lo, odd, hi);
        lo = e;
      }
      // max(a, b) is a > b ? a : b, so a NaN |x| keeps the running amax, as in the
      // portable loop; amax starts at 0.
      const __m512 amax = _mm512_max_ps(_mm512_andnot_ps(sign, hi),
                                        _mm512_max_ps(_mm512_andnot_ps(sign, lo), _mm512_setzero_ps()));
      const float scale = avx512::hmax(amax) / 127.0f;
      const __m512 inv = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
      constexpr int kEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m512i qlo = _mm512_cvt_roundps_epi32(_mm512_mul_ps(lo, inv), kEven);
      const __m512i qhi = _mm512_cvt_roundps_epi32(_mm512_mul_ps(hi, inv), kEven);
      int8_t* qb = q + r * k + b * kQBlock;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtsepi32_epi8(qlo));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtsepi32_epi8(qhi));
      d[r * blocks + b] = f16_decode(f16_encode(scale));
      if (sum != nullptr) sum[r * blocks + b] = _mm512_reduce_add_epi32(_mm512_add_epi32(qlo, qhi));
      if (off == nullptr) continue;
      int32_t* ob = off + (r * blocks + b) * 8;
      for (int lane = 0; lane < 8; ++lane)
        ob[lane] = -8 * (qb[4 * lane] + qb[4 * lane + 1] + qb[4 * lane + 2] + qb[4 * lane + 3]);
    }
  }
}

}  // namespace troupe::kernels::cpu
