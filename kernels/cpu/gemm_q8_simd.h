// Small AVX/F16C helpers of the two SIMD q8 GEMM files (gemm_q8_avx2.cpp,
// gemm_q8_avx512.cpp), and only theirs: both are compiled with at least AVX2+F16C, and
// the helpers sit in an unnamed namespace, so each file keeps its own copy (no inline
// function is shared across -m flags, see gemm_weight_src.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace troupe::kernels::cpu {
namespace {

// The f16 scale at the start of a q8_0 / q4_0 block.
inline float half_at(const uint8_t* blk) {
  uint16_t h;
  std::memcpy(&h, blk, 2);
  return _cvtsh_ss(h);
}

// The 8 lanes summed in a fixed order.
inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

}  // namespace
}  // namespace troupe::kernels::cpu
