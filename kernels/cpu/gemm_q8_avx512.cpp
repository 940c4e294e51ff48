// The AVX-512 VNNI range kernel of cpu::gemm_q8: two 32-value blocks per zmm (lanes 0-7
// the first block, 8-15 the second), int8 products by vpdpbusd (u8 x s8, four products
// summed per int32 lane), each half's dw · dx applied in f32. Q8_0: the unsigned operand
// is x + 128 (x xor 0x80) and the accumulator starts at -128 · Σw per lane, made once per
// weight block, so Σ (x + 128)·w - 128 Σw = Σ x·w; Q4_0: the nibbles are the unsigned
// operand and the accumulator starts at the quantizer's per-lane -8 · Σx (off); FP4: the
// codes become s8 weights by table (fp4_block_s8) and run as Q8_0. An odd
// last block runs with the upper half zero (masked loads, zero scales).
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/gemm_q8_simd.h"
#include "kernels/cpu/gemm_q8_tiles.h"

namespace troupe::kernels::cpu {
namespace {

// Lanes summed in a fixed order (GCC 12's _mm512_reduce_add_ps warns on its own header).
inline float hsum(__m512 v) {
  return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

inline __m512 halves(float lo, float hi) {
  return _mm512_insertf32x8(_mm512_set1_ps(lo), _mm256_set1_ps(hi), 1);
}

template <WeightFormat F>
struct Avx512Tile {
  static constexpr int kM = 4, kN = 4;
  static constexpr bool kSigned = F != WeightFormat::Q4_0;  // s8 weights, x + 128 unsigned
  static constexpr int64_t kBlockBytes =
      F == WeightFormat::Q8_0 ? kQ8_0Bytes : F == WeightFormat::Q4_0 ? kQ4_0Bytes : kQBlock / 2;

  // The weight operand of blocks b (and b + 1 when pair) of weight row n (Q8_0, FP4: s8;
  // Q4_0: the u8 nibbles), its scales, and (s8) the lanes' -128 · Σw.
  static void load_weight(const QGemmArgs& a, int64_t n, int64_t b, bool pair, __m512i& wu,
                          __m512& dw, __m512i& bias) {
    const uint8_t* blk = a.w + n * a.row_bytes + b * kBlockBytes;
    const uint8_t* next = blk + kBlockBytes;
    if constexpr (kSigned) {
      __m256i lo, hi = _mm256_setzero_si256();
      if constexpr (F == WeightFormat::FP4) {
        // A decode streams each weight row once: ask for the codes 1 KiB ahead of the
        // 4 rows a tile reads (not measured apart from the rest of this kernel).
        _mm_prefetch(reinterpret_cast<const char*>(blk + 1024), _MM_HINT_T0);
        dw = halves(fp4_scale_at(a, n, b), pair ? fp4_scale_at(a, n, b + 1) : 0.0f);
        lo = fp4_block_s8(blk);
        if (pair) hi = fp4_block_s8(next);
      } else {
        dw = halves(half_at(blk), pair ? half_at(next) : 0.0f);
        lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
        if (pair) hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(next + 2));
      }
      wu = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
      const __m512i sum128 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(char(0x80)), wu);
      bias = _mm512_sub_epi32(_mm512_setzero_si512(), sum128);
    } else {
      dw = halves(half_at(blk), pair ? half_at(next) : 0.0f);
      const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
      const __m128i hi = pair ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(next + 2))
                              : _mm_setzero_si128();
      const __m256i v = _mm256_set_m128i(hi, lo);  // [qs(b) | qs(b+1)]
      const __m256i low4 = _mm256_set1_epi8(0x0F);
      const __m256i l = _mm256_and_si256(v, low4), h = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
      // [l(b) l(b+1) h(b) h(b+1)] -> [l(b) h(b) l(b+1) h(b+1)]: block order, 16-byte lanes.
      const __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1);
      wu = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0));
      bias = _mm512_setzero_si512();
    }
  }

  template <int MR, int NR>
  static void run(const QGemmArgs& a, int64_t m0, int64_t n0) {
    const int64_t blocks = a.x.k / kQBlock;
    __m512 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm512_setzero_ps();
    for (int64_t b = 0; b < blocks; b += 2) {
      const bool pair = b + 1 < blocks;
      __m512i wu[NR];
      __m512 dw[NR];
      __m512i bias[NR];
      for (int r = 0; r < NR; ++r)
        load_weight(a, n0 + r, b, pair, wu[r], dw[r], bias[r]);
      for (int i = 0; i < MR; ++i) {
        const int64_t row = m0 + i;
        const int8_t* xq = a.x.q + row * a.x.k + b * kQBlock;
        __m512i x = pair ? _mm512_loadu_si512(xq) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, xq);
        if constexpr (kSigned) x = _mm512_xor_si512(x, _mm512_set1_epi8(char(0x80)));
        const float* xd = a.x.d + row * blocks + b;
        const __m512 dx = halves(xd[0], pair ? xd[1] : 0.0f);
        __m512i init = _mm512_setzero_si512();
        if constexpr (F == WeightFormat::Q4_0) {
          const int32_t* off = a.x.off + (row * blocks + b) * 8;
          init = pair ? _mm512_loadu_si512(off) : _mm512_maskz_loadu_epi32(0xFF, off);
        }
        for (int r = 0; r < NR; ++r) {
          __m512i s;
          if constexpr (kSigned) {
            s = _mm512_dpbusd_epi32(bias[r], x, wu[r]);
          } else {
            s = _mm512_dpbusd_epi32(init, wu[r], x);
          }
          acc[i][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(dw[r], dx), acc[i][r]);
        }
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < NR; ++r) store_output<Avx512Tile>(a, m0 + i, n0 + r, hsum(acc[i][r]));
  }
};

}  // namespace

void gemm_q8_range_avx512(const QGemmArgs& a, int64_t n0, int64_t n1) { run_tiles<Avx512Tile>(a, n0, n1); }

}  // namespace troupe::kernels::cpu
