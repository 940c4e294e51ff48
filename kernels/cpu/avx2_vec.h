// Vector e^x and small helpers for *_avx2.cpp files only (compiled with -mavx2 -mfma;
// nothing else may include this header). The helpers sit in an unnamed namespace, so
// each file keeps its own copy.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <limits>

namespace troupe::kernels::cpu::avx2 {
namespace {

// Lanes [0, n) of an 8-lane mask for maskload / maskstore, 0 <= n <= 8.
inline __m256i first_lanes(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// The 8 lanes combined by halving, a fixed order.
template <class Op>
inline float reduce(__m256 v, Op op) {
  __m128 s = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = op(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(op(s, _mm_movehdup_ps(s)));
}
inline float hsum(__m256 v) {
  return reduce(v, [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
}
inline float hmax(__m256 v) {
  return reduce(v, [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
}

// e^x per lane, the algorithm of avx512::exp (avx512_vec.h): x = k·ln2 + r, a degree-7
// Taylor polynomial for e^r. AVX2 has no scalef, so 2^k is applied as two normal
// powers of two, 2^(k/2) · 2^(k - k/2): a result in the subnormal range rounds once,
// and e^-104 (the clamp, so also -inf) is 0. NaN propagates (max/min return their
// second operand when either is NaN).
inline __m256 exp(__m256 x) {
  x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
  x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 poly = _mm256_set1_ps(1.0f / 5040);
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 720));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 120));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 24));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f / 6));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(0.5f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f));
  poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(1.0f));
  const __m256i ki = _mm256_cvtps_epi32(k);  // [-150, 128]
  const __m256i k1 = _mm256_srai_epi32(ki, 1), k2 = _mm256_sub_epi32(ki, k1);
  const auto pow2 = [](__m256i e) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e, _mm256_set1_epi32(127)), 23));
  };
  return _mm256_mul_ps(_mm256_mul_ps(poly, pow2(k1)), pow2(k2));
}

// The 8-lane vector type of the algorithms written once over a vector type S
// (causal_attention_simd.h, indexer_simd.h, norm_simd.h, attention_simd.h; their headers
// list what S provides).
struct Simd {
  using V = __m256;
  static constexpr int W = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_part(const float* p, int64_t n) { return _mm256_maskload_ps(p, first_lanes(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_part(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, first_lanes(n), v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V exp(V x) { return avx2::exp(x); }
  static float hsum(V v) { return avx2::hsum(v); }
  static float hmax(V v) { return avx2::hmax(v); }
  static V keep_le(V s, V pos, V j) {
    return _mm256_blendv_ps(set1(-std::numeric_limits<float>::infinity()), s, _mm256_cmp_ps(j, pos, _CMP_LE_OQ));
  }
};

}  // namespace
}  // namespace troupe::kernels::cpu::avx2
