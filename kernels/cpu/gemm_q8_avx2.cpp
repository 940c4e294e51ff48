// The AVX2 range kernel of cpu::gemm_q8: one 32-value block per ymm, int8 products by
// vpmaddubsw (u8 x s8 -> pairs of int16) and vpmaddwd by ones (-> int32 lanes), the
// block's dw · dx applied to the 8 lanes in f32. Q8_0 weights are signed, so the
// unsigned operand is |w| and x takes w's sign (vpsignb); Q4_0 nibbles are already
// unsigned and the -8 offset enters per lane from the quantizer's off. FP4 codes become
// signed int8 weights by table (fp4_block_s8) and then run as Q8_0.
// Saturation: |w| <= 128 and |x| <= 127 give pair sums <= 32512 < 32767.
#include <immintrin.h>

#include "kernels/cpu/gemm_q8_simd.h"
#include "kernels/cpu/gemm_q8_tiles.h"

namespace troupe::kernels::cpu {
namespace {

template <WeightFormat F>
struct Avx2Tile {
  static constexpr int kM = 4, kN = 2;
  static constexpr bool kSigned = F != WeightFormat::Q4_0;  // w is s8: x takes its sign
  static constexpr int64_t kBlockBytes =
      F == WeightFormat::Q8_0 ? kQ8_0Bytes : F == WeightFormat::Q4_0 ? kQ4_0Bytes : kQBlock / 2;

  template <int MR, int NR>
  static void run(const QGemmArgs& a, int64_t m0, int64_t n0) {
    const int64_t blocks = a.x.k / kQBlock;
    const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
    __m256 acc[MR][NR];
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < NR; ++r) acc[i][r] = _mm256_setzero_ps();
    for (int64_t b = 0; b < blocks; ++b) {
      __m256i wu[NR], wsign[NR];  // unsigned operand; (Q8_0) the sign source
      float dw[NR];
      for (int r = 0; r < NR; ++r) {
        const uint8_t* blk = a.w + (n0 + r) * a.row_bytes + b * kBlockBytes;
        if constexpr (F == WeightFormat::FP4) {
          dw[r] = fp4_scale_at(a, n0 + r, b);
          wsign[r] = fp4_block_s8(blk);
          wu[r] = _mm256_sign_epi8(wsign[r], wsign[r]);
          continue;
        }
        dw[r] = half_at(blk);
        if constexpr (F == WeightFormat::Q8_0) {
          wsign[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2));
          wu[r] = _mm256_sign_epi8(wsign[r], wsign[r]);
        } else {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
          const __m256i both = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);
          wu[r] = _mm256_and_si256(both, low4);  // [elements 0..15 | 16..31]
        }
      }
      for (int i = 0; i < MR; ++i) {
        const int64_t row = m0 + i;
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.x.q + row * a.x.k + b * kQBlock));
        const float dx = a.x.d[row * blocks + b];
        for (int r = 0; r < NR; ++r) {
          __m256i s;
          if constexpr (kSigned) {
            s = _mm256_madd_epi16(_mm256_maddubs_epi16(wu[r], _mm256_sign_epi8(x, wsign[r])), ones);
          } else {
            const __m256i off = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.x.off + (row * blocks + b) * 8));
            s = _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(wu[r], x), ones), off);
          }
          acc[i][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dw[r] * dx), acc[i][r]);
        }
      }
    }
    for (int i = 0; i < MR; ++i)
      for (int r = 0; r < NR; ++r) store_output<Avx2Tile>(a, m0 + i, n0 + r, hsum(acc[i][r]));
  }
};

}  // namespace

void gemm_q8_range_avx2(const QGemmArgs& a, int64_t n0, int64_t n1) { run_tiles<Avx2Tile>(a, n0, n1); }

}  // namespace troupe::kernels::cpu
