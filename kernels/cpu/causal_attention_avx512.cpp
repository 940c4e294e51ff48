// The causal attention algorithm (causal_attention_simd.h) on AVX-512: 16 lanes and
// 32 zmm registers, so tiles of 4 vectors (64 rows) x 4 keys / 4 dims per block.
#include <immintrin.h>

#include <limits>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/causal_attention_kernels.h"
#include "kernels/cpu/causal_attention_simd.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;

struct Avx512 {
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

}  // namespace

const CausalAttentionKernels& avx512_causal_attention_kernels() {
  static const CausalAttentionKernels k = make_causal_attention_kernels<Avx512, 4, 4, 4, 4>();
  return k;
}

}  // namespace troupe::kernels::cpu
