// cpu::quantize_rows_q8 on AVX2: a block's 32 values in four ymm, |x| by clearing the
// sign, amax by vmaxps, the products x · inv rounded by the conversion (the default
// rounding mode: to nearest even, as the portable quantizer's round_even assumes), and
// the bytes by saturating packs (the values are within [-127, 127]). The same f32
// operations as the portable quantizer, so its bytes, scales and sums bit for bit; the
// test holds both to ref::quantize_row_q8. fp4_order reorders the stored bytes as the
// portable one does (the int8 FP4 path is a decode path: few rows).
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/gemm_q8.h"

namespace troupe::kernels::cpu {

void quantize_rows_q8_avx2(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q,
                           float* d, int32_t* off, int32_t* sum, bool fp4_order) {
  const int64_t blocks = k / kQBlock;
  const __m256 sign = _mm256_set1_ps(-0.0f);
  // packs work within 128-bit lanes; this puts the four vectors' bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t b = 0; b < blocks; ++b) {
      const float* xb = x + r * ldx + b * kQBlock;
      __m256 v[4];
      // max(a, b) is a > b ? a : b: a NaN |x| keeps the running amax (from 0), as in the
      // portable loop.
      __m256 amax = _mm256_setzero_ps();
      for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        amax = _mm256_max_ps(_mm256_andnot_ps(sign, v[i]), amax);
      }
      const float scale = avx2::hmax(amax) / 127.0f;
      const __m256 inv = _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
      __m256i qi[4];
      for (int i = 0; i < 4; ++i) qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], inv));
      const __m256i w01 = _mm256_packs_epi32(qi[0], qi[1]), w23 = _mm256_packs_epi32(qi[2], qi[3]);
      const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order);
      int8_t* qb = q + r * k + b * kQBlock;
      if (fp4_order) {
        alignas(32) int8_t t[kQBlock];
        _mm256_store_si256(reinterpret_cast<__m256i*>(t), bytes);
        for (int i = 0; i < kQBlock / 2; ++i) qb[i] = t[2 * i], qb[kQBlock / 2 + i] = t[2 * i + 1];
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), bytes);
      }
      d[r * blocks + b] = f16_decode(f16_encode(scale));
      if (sum != nullptr) {
        const __m256i s = _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
        sum[r * blocks + b] = _mm_cvtsi128_si32(h);
      }
      if (off == nullptr) continue;
      int32_t* ob = off + (r * blocks + b) * 8;
      for (int lane = 0; lane < 8; ++lane)
        ob[lane] = -8 * (qb[4 * lane] + qb[4 * lane + 1] + qb[4 * lane + 2] + qb[4 * lane + 3]);
    }
  }
}

}  // namespace troupe::kernels::cpu
