// Vector e^x and small helpers for *_avx512.cpp and *_amx.cpp files only (they are
// compiled with the AVX-512 flags; nothing else may include this header).
#pragma once

// GCC 12.2's AVX-512 intrinsics seed their pass-through operand from
// _mm512_undefined_ps(), which -Wall reports as "__Y may be used uninitialized" in
// every caller (GCC PR 105593, fixed in 12.3). The warning is about the header,
// not our code, so it is silenced for the AVX-512 translation units that include this.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <limits>

#include "kernels/cpu/unroll.h"

namespace troupe::kernels::cpu::avx512 {

// Lanes [0, n) of a 16-lane vector, 0 <= n <= 16.
inline __mmask16 first_lanes(int64_t n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

using cpu::unroll;

// fp4_int8_scales()[e] of 16 UE8M0 codes: 1 · 2^(e - 128) by vscalefps, exact down to
// the subnormal 2^-128 of e = 0 (the quiet NaN of e = 255 set apart).
inline __m512 fp4_scales(__m128i codes) {
  const __m512i e = _mm512_cvtepu8_epi32(codes);
  const __m512 s = _mm512_scalef_ps(_mm512_set1_ps(1.0f), _mm512_cvtepi32_ps(_mm512_sub_epi32(e, _mm512_set1_epi32(128))));
  return _mm512_mask_mov_ps(s, _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255)), _mm512_set1_ps(__builtin_nanf("")));
}

// Horizontal sum / max by halving (a fixed tree order). Written out instead of
// _mm512_reduce_*_ps, whose GCC 12 expansion trips -Wuninitialized.
template <class Op>
inline float reduce(__m512 v, Op op) {
  v = op(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = op(v, _mm512_shuffle_f32x4(v, v, _MM_SHUFFLE(2, 3, 0, 1)));
  v = op(v, _mm512_permute_ps(v, _MM_SHUFFLE(1, 0, 3, 2)));
  v = op(v, _mm512_permute_ps(v, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm512_cvtss_f32(v);
}
inline float hsum(__m512 v) {
  return reduce(v, [](__m512 a, __m512 b) { return _mm512_add_ps(a, b); });
}
inline float hmax(__m512 v) {
  return reduce(v, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
}

// e^x per lane within ~2 ulp where the result is a normal f32. Range reduction
// x = k·ln2 + r (|r| <= ln2/2, ln2 split in two so k·ln2_hi is exact), a degree-7
// Taylor polynomial for e^r (truncation < 1e-8 relative), then scalef(·, k), which
// underflows smoothly to 0 (so -inf -> 0) and overflows to +inf. NaN propagates:
// max/min return their second operand when either is NaN.
inline __m512 exp(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);  // e^-104 is below the f32 subnormals
  x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);    // e^89 is above FLT_MAX
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 poly = _mm512_set1_ps(1.0f / 5040);
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 720));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 120));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 24));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f / 6));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(0.5f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
  poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(poly, k);
}

// The 16-lane vector type of the algorithms written once over a vector type S
// (causal_attention_simd.h, indexer_simd.h, norm_simd.h, attention_simd.h; their headers
// list what S provides).
struct Simd {
  using V = __m512;
  static constexpr int W = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load_part(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(first_lanes(n), p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static void store_part(float* p, V v, int64_t n) { _mm512_mask_storeu_ps(p, first_lanes(n), v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V exp(V x) { return avx512::exp(x); }
  static float hsum(V v) { return avx512::hsum(v); }
  static float hmax(V v) { return avx512::hmax(v); }
  static V keep_le(V s, V pos, V j) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(j, pos, _CMP_LE_OQ),
                                set1(-std::numeric_limits<float>::infinity()), s);
  }
};

}  // namespace troupe::kernels::cpu::avx512
