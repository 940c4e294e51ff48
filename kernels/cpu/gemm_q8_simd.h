// Small AVX/F16C helpers of the two SIMD q8 GEMM files (gemm_q8_avx2.cpp,
// gemm_q8_avx512.cpp), and only theirs: both are compiled with at least AVX2+F16C, and
// the helpers sit in an unnamed namespace, so each file keeps its own copy (no inline
// function is shared across -m flags, see gemm_weight_src.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm_q8.h"

namespace troupe::kernels::cpu {
namespace {

// The f16 scale at the start of a q8_0 / q4_0 block.
inline float half_at(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return _cvtsh_ss(h);
}

// The f32 scale of FP4 block b of weight row `row` (kernels/cpu/gemm_q8.h).
inline float fp4_scale_at(const QGemmArgs& a, int64_t row, int64_t b) {
  return a.scale_value[a.scale[row * (a.x.k / 32) + b]];
}

// One FP4 block's 16 code bytes as 32 int8 weights in fp4_order (kernels/cpu/gemm_q8.h):
// [even columns (low nibbles) | odd columns (high nibbles)] in the two 128-bit halves.
inline __m256i fp4_block_s8(const uint8_t* codes) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Int8)));
  const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m256i nibbles = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(c, 4), c), _mm256_set1_epi8(0x0F));
  return _mm256_shuffle_epi8(table, nibbles);
}

// The 8 lanes summed in a fixed order.
inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

}  // namespace
}  // namespace troupe::kernels::cpu
