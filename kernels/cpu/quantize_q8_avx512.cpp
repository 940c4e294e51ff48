// cpu::quantize_rows_q8 on AVX-512: a block's 32 values in two zmm, |x| by clearing the
// sign, amax by vmaxps, the products x · inv rounded to nearest even by the conversion,
// and the bytes by saturating narrowing (the values are within [-127, 127], so it never
// saturates). Every step is the portable quantizer's own f32 operation (one multiply
// per value, the scalar scale and its inverse), so the bytes, scales and sums are its
// bit for bit; the test holds both to ref::quantize_row_q8.
//
// Sixteen blocks at a time (a row's whole batches, when no lane offsets are asked for):
// one block at a time, each block's horizontal max and sum, its scalar division and its
// f16 round trip (a call) made a chain of ~30 cycles per block that took as long as a
// prefill's GEMM on 256 weight rows. A batch reduces its 16 blocks' lane vectors
// together (reduce16: 16 vectors to one of 16 results in 46 instructions), divides
// for 16 scales and inverses at once, and rounds them through f16 by vcvtps2ph (RNE,
// overflow to inf: f16_encode's rounding) and back. The same values, so the same bits.
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/gemm_q8.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kBatch = 16;  // blocks per batch: one result lane each

// r[j] = op-reduction of v[j]'s 16 lanes, j < 16. Pairs of vectors fold their 128-bit
// halves, then their quarters, then elements within 128-bit lanes, so each step's two
// inputs hold partials of different vectors side by side; the last step leaves vector
// 4j + i's result at element 4i + j, and one permutation puts it at j. max and integer
// add are exact in any order, so the result is the per-vector reduction's.
template <class Op>
__m512 reduce16(__m512 (&v)[kBatch], Op op) {
  __m512 h[8], q[4], e[2];
  for (int k = 0; k < 8; ++k)
    h[k] = op(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  for (int k = 0; k < 4; ++k)  // 128-bit lane i: vector 4k + i's 4 partials
    q[k] = op(_mm512_shuffle_f32x4(h[2 * k], h[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
              _mm512_shuffle_f32x4(h[2 * k], h[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
  for (int k = 0; k < 2; ++k)  // lane i: [vector 8k + i, vector 8k + 4 + i], 2 partials each
    e[k] = op(_mm512_shuffle_ps(q[2 * k], q[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm512_shuffle_ps(q[2 * k], q[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 r = op(_mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(2, 0, 2, 0)),
                      _mm512_shuffle_ps(e[0], e[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(order, r);
}

struct Block {
  __m512 lo, hi;
};

// The block's 32 values, in fp4_order [even columns | odd columns] when asked.
inline Block load_block(const float* xb, bool fp4_order) {
  const __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
  if (!fp4_order) return {lo, hi};
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  return {_mm512_permutex2var_ps(lo, even, hi), _mm512_permutex2var_ps(lo, odd, hi)};
}

// The lanes whose max is the block's amax. max(a, b) is a > b ? a : b, so a NaN |x|
// keeps the running amax, as in the portable loop; amax starts at 0.
inline __m512 amax_lanes(const Block& v) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  return _mm512_max_ps(_mm512_andnot_ps(sign, v.hi),
                       _mm512_max_ps(_mm512_andnot_ps(sign, v.lo), _mm512_setzero_ps()));
}

constexpr int kEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

// The block's codes stored at qb; their values summed per lane. A NaN or infinite
// product converts to INT_MIN, stored as -128 (ggml_blocks.h): the sums take it as -128.
inline __m512i quantize_block(const Block& v, __m512 inv, int8_t* qb) {
  const __m512i qlo = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v.lo, inv), kEven);
  const __m512i qhi = _mm512_cvt_roundps_epi32(_mm512_mul_ps(v.hi, inv), kEven);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtsepi32_epi8(qlo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtsepi32_epi8(qhi));
  const __m512i lowest = _mm512_set1_epi32(-128);
  return _mm512_add_epi32(_mm512_max_epi32(qlo, lowest), _mm512_max_epi32(qhi, lowest));
}

// Blocks [b0, b0 + 16) of a row x: their scales to d[b0..] and inverses to inv[b0..].
void scales_batch(const float* x, int64_t b0, bool fp4_order, float* d, float* inv) {
  __m512 lanes[kBatch];
  for (int b = 0; b < kBatch; ++b)
    lanes[b] = amax_lanes(load_block(x + (b0 + b) * kQBlock, fp4_order));
  const __m512 amax = reduce16(lanes, [](__m512 a, __m512 b) { return _mm512_max_ps(a, b); });
  const __m512 scale = _mm512_div_ps(amax, _mm512_set1_ps(127.0f));
  const __mmask16 nonzero = _mm512_cmp_ps_mask(scale, _mm512_setzero_ps(), _CMP_NEQ_UQ);
  _mm512_storeu_ps(inv + b0, _mm512_maskz_div_ps(nonzero, _mm512_set1_ps(1.0f), scale));
  _mm512_storeu_ps(d + b0, _mm512_cvtph_ps(_mm512_cvtps_ph(scale, kEven)));
}

// The codes of blocks [b0, b0 + 16) of a row x by their inverses, and their sums (if sum).
void codes_batch(const float* x, int64_t b0, bool fp4_order, const float* inv, int8_t* q,
                 int32_t* sum) {
  __m512 lanes[kBatch];
  for (int b = 0; b < kBatch; ++b) {
    const __m512i s = quantize_block(load_block(x + (b0 + b) * kQBlock, fp4_order),
                                     _mm512_set1_ps(inv[b0 + b]), q + (b0 + b) * kQBlock);
    lanes[b] = _mm512_castsi512_ps(s);
  }
  if (sum == nullptr) return;
  const __m512 sums = reduce16(lanes, [](__m512 a, __m512 b) {
    return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(a), _mm512_castps_si512(b)));
  });
  _mm512_storeu_si512(sum + b0, _mm512_castps_si512(sums));
}

}  // namespace

void quantize_rows_q8_avx512(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q,
                             float* d, int32_t* off, int32_t* sum, bool fp4_order) {
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
    // Every batch's scales first, then the codes: the scales' division chains (two
    // divisions after a reduction) overlap one another instead of stalling each batch.
    for (int64_t b = 0; b < batched; b += kBatch) scales_batch(xr, b, fp4_order, dr, inv.data());
    for (int64_t b = 0; b < batched; b += kBatch) codes_batch(xr, b, fp4_order, inv.data(), qr, sr);
    for (int64_t b = batched; b < blocks; ++b) {
      const Block v = load_block(xr + b * kQBlock, fp4_order);
      const float scale = avx512::hmax(amax_lanes(v)) / 127.0f;
      const __m512 inv = _mm512_set1_ps(scale != 0.0f ? 1.0f / scale : 0.0f);
      int8_t* qb = qr + b * kQBlock;
      const __m512i s = quantize_block(v, inv, qb);
      dr[b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph(_mm_set_ss(scale), kEven)));
      if (sr != nullptr) sr[b] = _mm512_reduce_add_epi32(s);
      if (off == nullptr) continue;
      int32_t* ob = off + (r * blocks + b) * 8;
      for (int lane = 0; lane < 8; ++lane)
        ob[lane] = -8 * (qb[4 * lane] + qb[4 * lane + 1] + qb[4 * lane + 2] + qb[4 * lane + 3]);
    }
  }
}

}  // namespace troupe::kernels::cpu
