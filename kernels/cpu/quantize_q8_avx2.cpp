// cpu::quantize_rows_q8 on AVX2: a block's 32 values in four ymm, |x| by clearing the
// sign, amax by vmaxps, the products x · inv rounded by the conversion (the default
// rounding mode: to nearest even, as the portable quantizer's round_even assumes), and
// the bytes by saturating packs (the values are within [-127, 127]). The same f32
// operations as the portable quantizer, so its bytes, scales and sums bit for bit; the
// test holds both to ref::quantize_row_q8. fp4_order reorders the stored bytes as the
// portable one does (the int8 FP4 path is a decode path: few rows).
//
// Eight blocks at a time (a row's whole batches, when no lane offsets are asked for), as
// the AVX-512 quantizer does sixteen (quantize_q8_avx512.cpp says why): the batch's
// amaxes and sums by one reduction of 8 vectors each, 8 scales and inverses by two
// divisions, the f16 rounding of the scales by vcvtps2ph; every row's scales before its
// codes.
#include <immintrin.h>

#include <cstring>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kBatch = 8;  // blocks per batch: one result lane each
constexpr int kRound = _MM_FROUND_TO_NEAREST_INT;

// r[j] = op-reduction of v[j]'s 8 lanes, j < 8: pairs fold their 128-bit halves, then
// elements within 128-bit lanes twice; vector j's result lands at element
// (j % 2) · 4 + j / 2, and one permutation puts it at j. Exact in any order (max, integer
// add), so it is the per-vector reduction's result.
template <class Op>
__m256 reduce8(__m256 (&v)[kBatch], Op op) {
  __m256 h[4], e[2];
  for (int k = 0; k < 4; ++k)  // 128-bit lane 0: vector 2k's 4 partials, lane 1: 2k + 1's
    h[k] = op(_mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x20),
              _mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x31));
  for (int k = 0; k < 2; ++k)  // lane i: [vector 4k + i, vector 4k + 2 + i], 2 partials each
    e[k] = op(_mm256_shuffle_ps(h[2 * k], h[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm256_shuffle_ps(h[2 * k], h[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m256 r = op(_mm256_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm256_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm256_permutevar8x32_ps(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// The lanes whose max is the block's amax. max(a, b) is a > b ? a : b: a NaN |x| keeps
// the running amax (from 0), as in the portable loop.
inline __m256 amax_lanes(const float* xb) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 amax = _mm256_setzero_ps();
  for (int i = 0; i < 4; ++i)
    amax = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(xb + 8 * i)), amax);
  return amax;
}

inline float f16_round(float scale) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(scale), kRound)));
}

// The block's codes stored at qb (in fp4_order when asked); their values summed per lane.
// A NaN or infinite product converts to INT_MIN, stored as -128 (ggml_blocks.h): the sums
// take it as -128.
inline __m256i quantize_block(const float* xb, __m256 inv, bool fp4_order, int8_t* qb) {
  // packs work within 128-bit lanes; this puts the four vectors' bytes back in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i qi[4];
  for (int i = 0; i < 4; ++i)
    qi[i] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xb + 8 * i), inv));
  const __m256i w01 = _mm256_packs_epi32(qi[0], qi[1]), w23 = _mm256_packs_epi32(qi[2], qi[3]);
  const __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(w01, w23), order);
  if (fp4_order) {
    alignas(32) int8_t t[kQBlock];
    _mm256_store_si256(reinterpret_cast<__m256i*>(t), bytes);
    for (int i = 0; i < kQBlock / 2; ++i) qb[i] = t[2 * i], qb[kQBlock / 2 + i] = t[2 * i + 1];
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(qb), bytes);
  }
  const __m256i lowest = _mm256_set1_epi32(-128);
  for (int i = 0; i < 4; ++i) qi[i] = _mm256_max_epi32(qi[i], lowest);
  return _mm256_add_epi32(_mm256_add_epi32(qi[0], qi[1]), _mm256_add_epi32(qi[2], qi[3]));
}

// Blocks [b0, b0 + 8) of a row x: their scales to d[b0..] and inverses to inv[b0..].
void scales_batch(const float* x, int64_t b0, float* d, float* inv) {
  __m256 lanes[kBatch];
  for (int b = 0; b < kBatch; ++b) lanes[b] = amax_lanes(x + (b0 + b) * kQBlock);
  const __m256 amax = reduce8(lanes, [](__m256 a, __m256 b) { return _mm256_max_ps(a, b); });
  const __m256 scale = _mm256_div_ps(amax, _mm256_set1_ps(127.0f));
  const __m256 nonzero = _mm256_cmp_ps(scale, _mm256_setzero_ps(), _CMP_NEQ_UQ);
  _mm256_storeu_ps(inv + b0, _mm256_and_ps(nonzero, _mm256_div_ps(_mm256_set1_ps(1.0f), scale)));
  _mm256_storeu_ps(d + b0, _mm256_cvtph_ps(_mm256_cvtps_ph(scale, kRound)));
}

// The codes of blocks [b0, b0 + 8) of a row x by their inverses, and their sums (if sum).
void codes_batch(const float* x, int64_t b0, bool fp4_order, const float* inv, int8_t* q,
                 int32_t* sum) {
  __m256 lanes[kBatch];
  for (int b = 0; b < kBatch; ++b)
    lanes[b] = _mm256_castsi256_ps(quantize_block(
        x + (b0 + b) * kQBlock, _mm256_set1_ps(inv[b0 + b]), fp4_order, q + (b0 + b) * kQBlock));
  if (sum == nullptr) return;
  const __m256 sums = reduce8(lanes, [](__m256 a, __m256 b) {
    return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(a), _mm256_castps_si256(b)));
  });
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(sum + b0), _mm256_castps_si256(sums));
}

}  // namespace

void quantize_rows_q8_avx2(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q, float* d,
                           int32_t* off, int32_t* sum, bool fp4_order) {
  const int64_t blocks = k / kQBlock;
  // Whole batches where no lane offsets are asked for (the GEMMs that take them are
  // decode paths: few rows); the rest block by block.
  const int64_t batched = off == nullptr ? blocks / kBatch * kBatch : 0;
  scratch_vector<float> inv(static_cast<size_t>(batched));  // a row's batched inverses
  for (int64_t r = 0; r < m; ++r) {
    const float* xr = x + r * ldx;
    int8_t* qr = q + r * k;
    float* dr = d + r * blocks;
    int32_t* sr = sum != nullptr ? sum + r * blocks : nullptr;
    for (int64_t b = 0; b < batched; b += kBatch) scales_batch(xr, b, dr, inv.data());
    for (int64_t b = 0; b < batched; b += kBatch) codes_batch(xr, b, fp4_order, inv.data(), qr, sr);
    for (int64_t b = batched; b < blocks; ++b) {
      const float* xb = xr + b * kQBlock;
      const float scale = avx2::hmax(amax_lanes(xb)) / 127.0f;
      int8_t* qb = qr + b * kQBlock;
      const __m256i s =
          quantize_block(xb, _mm256_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f), fp4_order, qb);
      dr[b] = f16_round(scale);
      if (sr != nullptr) {
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
        sr[b] = _mm_cvtsi128_si32(h);
      }
      if (off == nullptr) continue;
      int32_t* ob = off + (r * blocks + b) * 8;
      for (int lane = 0; lane < 8; ++lane)
        ob[lane] = -8 * (qb[4 * lane] + qb[4 * lane + 1] + qb[4 * lane + 2] + qb[4 * lane + 3]);
    }
  }
}

}  // namespace troupe::kernels::cpu
