// The causal attention algorithm (causal_attention_simd.h) on AVX2+FMA: 8 lanes and
// 16 ymm registers, so tiles of 2 vectors (16 rows) x 6 keys / 4 dims per block.
#include <immintrin.h>

#include <limits>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/causal_attention_kernels.h"
#include "kernels/cpu/causal_attention_simd.h"

namespace troupe::kernels::cpu {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr int W = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load_part(const float* p, int64_t n) { return _mm256_maskload_ps(p, avx2::first_lanes(n)); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static void store_part(float* p, V v, int64_t n) { _mm256_maskstore_ps(p, avx2::first_lanes(n), v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V exp(V x) { return avx2::exp(x); }
  static float hsum(V v) { return avx2::hsum(v); }
  static float hmax(V v) { return avx2::hmax(v); }
  static V keep_le(V s, V pos, V j) {
    return _mm256_blendv_ps(set1(-std::numeric_limits<float>::infinity()), s,
                            _mm256_cmp_ps(j, pos, _CMP_LE_OQ));
  }
};

}  // namespace

const CausalAttentionKernels& avx2_causal_attention_kernels() {
  static const CausalAttentionKernels k = make_causal_attention_kernels<Avx2, 2, 6, 4, 4>();
  return k;
}

}  // namespace troupe::kernels::cpu
