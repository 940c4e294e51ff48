// AVX2+FMA GEMM y[M, N] (+)= x[M, K] · Wᵀ for every weight format (kernels/gemm.h), the
// path of x86 CPUs without AVX-512 (Zen 2/3, Haswell..Alder Lake). The loop nests are
// gemm_avx512.cpp's, fitted to 16 ymm registers:
//
//   direct  (M <= 4): no buffer; each 32-column block of a weight row is decoded into
//           registers once and FMA'd into every x row (tiles of 1x4, 2x2, 3x1, 4x1
//           x rows by weight rows, one accumulator each: the blocked path's order).
//   blocked (M > 4): W[n0 : n0+panel, k0 : k0+1024] is dequantized once to f32 in a
//           cache-resident buffer and serves every x row through a 3x4 micro-kernel
//           (12 ymm accumulators of dot products along k). Decode order (M <= 16)
//           streams each weight row once through a 4-row, 16 KiB panel; prefill
//           order keeps a 64-row panel (256 KiB) in L2 for a slab of 516 x rows.
//
// Both precisions run f32 FMAs (no bf16 dot on AVX2): Bf16 rounds x to bf16 first,
// which is its definition. Every y element is one accumulator along k per 1024-column
// chunk, reduced by one tree, the chunks summed in k order - on both paths - so results
// do not depend on the thread count, the tile an element lands in or the batch size M
// (tests/kernels/gemm_test.cpp "RowsDoNotDependOnTheBatch").
//
// Decoding (32 columns -> four 8-float vectors): FP4 codes through two vpshufb on the
// block's row of 16 scaled values as bf16 bytes, then as BF16 ("quads" order below);
// E4M3 by 16- and 32-bit shifts and a mask of the bytes in place into the f32 bit
// pattern times 2^120·scale (as gemm_blocks_avx512.h explains; "strided" order below);
// BF16 by a shift. Two 16-bit (or 4-bit) values share a 32-bit lane, so these formats
// yield even and odd columns apart ("pairs" order below) and the activations are
// permuted to match; a dot product does not care about the order of its terms. F16 by
// F16C's vcvtph2ps (exact), which widens 8 halves in order: F32's natural order, so F16
// sums as F32 weights do.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/cpu/gemm_weight_src.h"
#include "kernels/cpu/unroll.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

// Innermost-loop helpers returning several vectors: GCC does not always inline them.
#define AVX2_INLINE inline __attribute__((always_inline))

namespace troupe::kernels::cpu {
namespace {

constexpr int kNR = 4;                   // weight rows per blocked micro-tile
constexpr int kMR = 3;                   // x rows per blocked micro-tile (12 accumulators)
constexpr int64_t kDirectMaxM = 4;       // up to here: weights decoded in registers
constexpr int64_t kDecodeMaxM = 16;      // up to here: stream weights, panel = one tile
constexpr int64_t kPrefillPanel = 64;    // weight rows dequantized together for prefill
constexpr int64_t kPrefillSlab = 516;    // x rows per prefill slab (a multiple of kMR)
constexpr int64_t kChunkCols = 1024;     // columns of one buffered panel row (4 KiB)
constexpr int64_t kPrefetchBytes = 512;  // direct decode without rows ahead: bytes ahead in the row

// 32 columns as four vectors, in the format's order:
//   natural (F32, F16): v[0] = columns 0..7, v[1] = 8..15, v[2] = 16..23, v[3] = 24..31
//   pairs (BF16): v[0] = even columns of 0..15, v[1] = odd columns of 0..15, v[2] =
//           even of 16..31, v[3] = odd of 16..31
//   strided (FP8, ROWFP8): v[q] = columns q, q + 4, ..., q + 28 (the 32 as 8 x 4,
//           transposed)
//   quads (FP4): v[0] = columns 0, 4, 8, 12, 1, 5, 9, 13, v[1] = 2, 6, 10, 14, 3, 7, 11,
//           15, v[2] and v[3] the same of 16..31 (each 16 columns as a 4x4 transposed)
struct Vec32 {
  __m256 v[4];
};

enum class ColOrder { Natural, Pairs, Quads, Strided };

constexpr ColOrder col_order(WeightFormat f) {
  if (f == WeightFormat::F32 || f == WeightFormat::F16) return ColOrder::Natural;
  if (f == WeightFormat::FP8 || f == WeightFormat::ROWFP8) return ColOrder::Strided;
  return f == WeightFormat::FP4 ? ColOrder::Quads : ColOrder::Pairs;
}

// Stored bytes per 32 columns.
constexpr int64_t block_bytes(WeightFormat f) {
  switch (f) {
    case WeightFormat::F32:
      return 128;
    case WeightFormat::BF16:
    case WeightFormat::F16:
      return 64;
    case WeightFormat::FP4:
      return 16;
    default:
      return 32;
  }
}

AVX2_INLINE __m256 bits(__m256i v) {
  return _mm256_castsi256_ps(v);
}

// Even / odd 16-bit halves of each 32-bit lane as f32 (a bf16 is the upper half of its f32).
AVX2_INLINE __m256 bf16_even(__m256i h) {
  return bits(_mm256_slli_epi32(h, 16));
}
AVX2_INLINE __m256 bf16_odd(__m256i h) {
  return bits(_mm256_and_si256(h, _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// The 32 E4M3 codes at p as one block, up to 2^120 · scale (load_block's FP8 decode before
// its scale; FP8 tiles at M = 1 give the scale to x instead), "strided" order. A code c
// is wanted with its sign in bit 31 and its 7 magnitude bits in bits 26..20 of its f32
// (gemm_blocks_avx512.h, e4m3x32_unscaled, says why that is the value / 2^120). An
// arithmetic shift of a 16-bit lane by 4 puts its high byte's code in bits 11..4 with
// the sign copied above: as the upper half of a 32-bit lane, that is the wanted f32 once
// bits 30..27 (sign copies) and 19..16 (the low byte's bits) are masked off. So the odd
// bytes need one shift, the even ones two (first to the high byte), and the codes in
// each lane's lower half one more to the upper: 5 shifts and 4 masks per 32 codes, where
// a sign extension to 16 bits took 3 shuffles and 4 shifts. `nan` keeps, per byte, the
// largest code without its sign seen: 0x7F there means a NaN code (0x7F / 0xFF). Two
// instructions per block on the bytes as they are, where a test per 16 widened codes
// took six and a register per row; one serves a whole tile (direct_tile finds the rows
// only when it holds a NaN code).
// kNanTest false: the weight has no NaN code (WeightView::no_nan_codes), `nan` untouched.
template <bool kNanTest = true>
AVX2_INLINE Vec32 e4m3x32_unscaled(const uint8_t* p, __m256i& nan) {
  const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  if constexpr (kNanTest)
    nan = _mm256_max_epu8(nan, _mm256_and_si256(codes, _mm256_set1_epi8(0x7F)));
  const __m256i keep = _mm256_set1_epi32(static_cast<int>(0x87F00000u));
  const __m256i odd = _mm256_srai_epi16(codes, 4);                         // bytes 4j + 1, 4j + 3
  const __m256i even = _mm256_srai_epi16(_mm256_slli_epi16(codes, 8), 4);  // bytes 4j, 4j + 2
  return {{bits(_mm256_and_si256(_mm256_slli_epi32(even, 16), keep)),
           bits(_mm256_and_si256(_mm256_slli_epi32(odd, 16), keep)),
           bits(_mm256_and_si256(even, keep)), bits(_mm256_and_si256(odd, keep))}};
}

// An e4m3x32_unscaled block times 2^120 · the UE8M0 scale `code`.
AVX2_INLINE void scale_e4m3(const WeightSrc& s, uint8_t code, Vec32& b) {
  if (code <= kMaxFoldedScale) {  // one multiply by 2^120·scale: code·scale's one rounding
    const __m256 f = _mm256_set1_ps(s.e4m3_scale[code]);
    for (__m256& v : b.v) v = _mm256_mul_ps(v, f);
  } else {  // 2^120·scale would overflow: the exact 2^120 first, then the scale
    const __m256 big = _mm256_set1_ps(0x1p120f), f = _mm256_set1_ps(s.ue8m0[code]);
    for (__m256& v : b.v) v = _mm256_mul_ps(_mm256_mul_ps(v, big), f);
  }
}

// Whether row r of an FP8 / ROWFP8 weight holds a NaN code (the cold path after a tile's
// flag is set).
bool row_has_nan_code(const WeightSrc& s, int64_t r) {
  const uint8_t* row = s.data + r * s.row_bytes;
  return std::any_of(row, row + s.k, [](uint8_t c) { return (c & 0x7F) == 0x7F; });
}

// The 32 FP4 codes at p times their block's scale, `table` the block's row of
// WeightSrc::fp4_bf16 (E2M1 · scale is a bf16 value, so its two bytes are the f32's
// upper half exactly). The 16 bytes go to both lanes, the low nibbles (even columns)
// kept in lane 0 and the high (odd) in lane 1 (one variable shift: a shift and a blend
// before); a vpshufb per byte of the bf16 values and an interleave give each lane's 16
// values as bf16, whose even and odd 16-bit halves are "quads" order. Ten instructions
// and three loads per 32 weights (the table's rows hold each half twice, so they load
// as they are); each value is the same product E2M1 · scale, signed zero included.
AVX2_INLINE Vec32 fp4x32(const uint8_t* p, const uint8_t* table) {
  const __m256i q = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i codes = _mm256_and_si256(
      _mm256_srlv_epi32(q, _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4)), _mm256_set1_epi8(0x0F));
  const __m256i lo_bytes = _mm256_load_si256(reinterpret_cast<const __m256i*>(table));
  const __m256i hi_bytes = _mm256_load_si256(reinterpret_cast<const __m256i*>(table + 32));
  const __m256i lo = _mm256_shuffle_epi8(lo_bytes, codes), hi = _mm256_shuffle_epi8(hi_bytes, codes);
  const __m256i first = _mm256_unpacklo_epi8(lo, hi), second = _mm256_unpackhi_epi8(lo, hi);
  return {{bf16_even(first), bf16_odd(first), bf16_even(second), bf16_odd(second)}};
}

// Columns kb..kb+31 of row r as f32 in the format's order; columns at or past K read
// as 0 (FP4 has whole blocks only: K % 32 == 0). FP8/ROWFP8 NaN codes decode finite
// and set lanes of `nan`; callers make the row's dot products NaN.
template <WeightFormat F, bool kNanTest = true>
AVX2_INLINE Vec32 load_block(const WeightSrc& s, int64_t r, int64_t kb, __m256i& nan) {
  const uint8_t* p = s.data + r * s.row_bytes + kb * block_bytes(F) / 32;
  alignas(32) uint8_t tail[128];
  if (F != WeightFormat::FP4 && kb + 32 > s.k) [[unlikely]] {  // the ragged last block
    const size_t have = static_cast<size_t>((s.k - kb) * block_bytes(F) / 32);
    std::memcpy(tail, p, have);
    std::memset(tail + have, 0, sizeof tail - have);
    p = tail;
  }
  Vec32 b;
  if constexpr (F == WeightFormat::F32) {
    const float* f = reinterpret_cast<const float*>(p);
    for (int i = 0; i < 4; ++i) b.v[i] = _mm256_loadu_ps(f + 8 * i);
  } else if constexpr (F == WeightFormat::BF16) {
    const __m256i h0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i h1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32));
    b = {{bf16_even(h0), bf16_odd(h0), bf16_even(h1), bf16_odd(h1)}};
  } else if constexpr (F == WeightFormat::F16) {
    for (int i = 0; i < 4; ++i)
      b.v[i] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * i)));
  } else if constexpr (F == WeightFormat::FP4) {
    b = fp4x32(p, s.fp4_bf16 + 64 * s.scale[r * s.scale_ld + kb / 32]);
  } else {  // FP8 (32x32 scale tiles) or ROWFP8 (scale per 32 columns of a row)
    const int64_t scale_row = F == WeightFormat::FP8 ? r / 32 : r;
    b = e4m3x32_unscaled<kNanTest>(p, nan);
    scale_e4m3(s, s.scale[scale_row * s.scale_ld + kb / 32], b);
  }
  return b;
}

// Whether e4m3x32_unscaled's `nan` saw a NaN code.
AVX2_INLINE bool any_nan(__m256i nan) {
  const __m256i hit = _mm256_cmpeq_epi8(nan, _mm256_set1_epi8(0x7F));
  return !_mm256_testz_si256(hit, hit);
}

// Round to the nearest bf16 value (RNE, NaN kept quiet), as bf16_encode/bf16_decode.
AVX2_INLINE __m256 round_to_bf16(__m256 v) {
  const __m256i b = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
  const __m256i r = _mm256_add_epi32(b, _mm256_add_epi32(_mm256_set1_epi32(0x7FFF), lsb));
  const __m256 quiet = bits(_mm256_or_si256(b, _mm256_set1_epi32(0x00400000)));
  const __m256 out = _mm256_blendv_ps(bits(r), quiet, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return bits(
      _mm256_and_si256(_mm256_castps_si256(out), _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// [Σa, Σb, Σc, Σd] of four accumulators, each through the same hadd tree.
AVX2_INLINE __m128 reduce4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// y[i][0 : nr] (+)= out[i] for i < mr; never touches y past nr columns.
void store_tile(const __m128* out, int mr, int nr, float* y, int64_t ldy, bool add) {
  for (int i = 0; i < mr; ++i) {
    alignas(16) float v[4];
    _mm_store_ps(v, out[i]);
    for (int j = 0; j < nr; ++j) y[i * ldy + j] = add ? y[i * ldy + j] + v[j] : v[j];
  }
}

// --- activations ----------------------------------------------------------------------

// x[kb : kb + n], or, where it runs past k, a copy zero-padded to n floats in `tail`.
const float* ragged_x(const float* x, int64_t k, int64_t kb, int64_t n, float* tail) {
  if (kb + n <= k) return x + kb;
  const int64_t have = std::max<int64_t>(0, k - kb);
  std::fill(tail, tail + n, 0.0f);
  std::copy(x + kb, x + kb + have, tail);
  return tail;
}

// One row of x in "strided" order: each 32 columns as 8 rows of 4, transposed (two 4x4
// transposes, one per 16 columns, give the lanes of each output vector).
void prepare_strided(const float* x, int64_t k, bool round, float* o, int64_t kp) {
  for (int64_t kb = 0; kb < kp; kb += 32) {
    alignas(32) float tail[32];
    const float* src = ragged_x(x, k, kb, 32, tail);
    __m128 r[8];
    for (int i = 0; i < 8; ++i) r[i] = _mm_loadu_ps(src + 4 * i);
    _MM_TRANSPOSE4_PS(r[0], r[1], r[2], r[3]);
    _MM_TRANSPOSE4_PS(r[4], r[5], r[6], r[7]);
    for (int q = 0; q < 4; ++q) {
      __m256 v = _mm256_set_m128(r[4 + q], r[q]);
      if (round) v = round_to_bf16(v);
      _mm256_store_ps(o + kb + 8 * q, v);
    }
  }
}

// xb[M, kp] = x in the format's column order, zero-padded to kp (K rounded up to 32),
// rounded to bf16 values when `round`.
void prepare_x(const GemmShape& sh, const float* x, ColOrder order, bool round, float* xb, int64_t kp) {
  parallel_for(sh.m, std::max<int64_t>(1, 65536 / kp), [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const float* xr = x + m * sh.ldx;
      float* o = xb + m * kp;
      if (order == ColOrder::Strided) {
        prepare_strided(xr, sh.k, round, o, kp);
        continue;
      }
      for (int64_t kb = 0; kb < kp; kb += 16) {
        alignas(32) float tail[16];
        const float* src = ragged_x(xr, sh.k, kb, 16, tail);
        __m256 a = _mm256_loadu_ps(src), c = _mm256_loadu_ps(src + 8);
        if (order == ColOrder::Pairs) {  // [a0 a2 c0 c2 | a4 a6 c4 c6] -> quads 0, 2, 1, 3 = the even columns
          const __m256 ev = _mm256_shuffle_ps(a, c, 0x88), od = _mm256_shuffle_ps(a, c, 0xDD);
          a = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(ev), 0xD8));
          c = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(od), 0xD8));
        } else if (order == ColOrder::Quads) {  // the 16 columns as a 4x4, transposed
          __m128 r0 = _mm_loadu_ps(src), r1 = _mm_loadu_ps(src + 4), r2 = _mm_loadu_ps(src + 8),
                 r3 = _mm_loadu_ps(src + 12);
          _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
          a = _mm256_set_m128(r1, r0);
          c = _mm256_set_m128(r3, r2);
        }
        if (round) {
          a = round_to_bf16(a);
          c = round_to_bf16(c);
        }
        _mm256_store_ps(o + kb, a);
        _mm256_store_ps(o + kb + 8, c);
      }
    }
  });
}

// FP8 at M = 1 multiplies a block's x by the tile's 2^120·scale where that is exact for
// every x of the block, as the AVX-512 direct tiles do (gemm_direct_avx512.h,
// x_fold_ranges, says why): block b may fold UE8M0 codes range[2b] .. range[2b + 1]
// (lo > hi: none). xb: [m, kp] prepared x.
void x_fold_ranges(const float* xb, int64_t m, int64_t kp, uint8_t* range) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), zero = _mm256_setzero_si256();
  for (int64_t kb = 0; kb < kp; kb += 32) {
    // Zero x is left out of both: the max starts at 0, the min at 255 (zeros set to 255).
    __m256i emax = zero, emin = _mm256_set1_epi32(255);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t h = 0; h < 32; h += 8) {
        const __m256i v = _mm256_and_si256(_mm256_castps_si256(_mm256_load_ps(xb + i * kp + kb + h)), magnitude);
        const __m256i e = _mm256_srli_epi32(v, 23);
        const __m256i is_zero = _mm256_cmpeq_epi32(v, zero);
        emax = _mm256_max_epu32(emax, e);
        emin = _mm256_min_epu32(emin, _mm256_or_si256(e, _mm256_and_si256(is_zero, _mm256_set1_epi32(255))));
      }
    alignas(32) uint32_t mx[8], mn[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(mx), emax);
    _mm256_store_si256(reinterpret_cast<__m256i*>(mn), emin);
    uint32_t hi_e = 0, lo_e = 255;
    for (int l = 0; l < 8; ++l) hi_e = std::max(hi_e, mx[l]), lo_e = std::min(lo_e, mn[l]);
    range[kb / 16] = static_cast<uint8_t>(std::max(0, 8 - static_cast<int>(lo_e)));
    range[kb / 16 + 1] = static_cast<uint8_t>(std::min(kMaxFoldedScale, 261 - static_cast<int>(hi_e)));
  }
}

// --- decode, M <= 4: weights decoded in registers ---------------------------------------

// x rows x weight rows per direct tile: 4 ymm accumulators at M = 1 and 3 (where x
// stays in registers), 8 at M = 2 and 4. With 4 at M = 2..4 (2x2, 3x1, 4x1 tiles),
// their chains of 4 FMAs per block left FP8 at M = 4 waiting on FMA latency
// (2.1x AVX-512's time on one thread, L2-resident).
constexpr int direct_rows(int mr) {
  return mr <= 2 ? 4 : 2;
}
// Weight rows per direct tile at M x rows (1 <= M <= kDirectMaxM; 0 rows count as 1).
constexpr int64_t direct_rows_at(int64_t m) {
  return direct_rows(static_cast<int>(std::max<int64_t>(1, m)));
}

// Which rows a direct tile prefetches, per format. F32 / BF16 / F16 decode cheaply, so
// their tiles wait on memory: a tile's rows start on pages the hardware prefetcher has
// not entered (a 4-row F16 tile at K = 1024 is two 4 KiB pages), as on the AVX-512 path
// (gemm_avx512.cpp, kFp4PrefetchRows). They prefetch the lines of the block they read in
// the row two tiles on, or, in a thread's last two tiles (those rows are another
// thread's), F16 / BF16 kPrefetchBytes ahead in the row. Measured at M = 1, 2 threads:
// F16 / BF16 1.3-1.7x (docs/kernels-bench.md). FP8 / ROWFP8 decode is the bound (rows
// ahead measured up to 1.3x slower): kPrefetchBytes ahead in the row, as before, except
// FP8 tiles of one 32x32 scale tile (fp8_shared_scale_blocks: the rows two tiles on, into
// L2, once per line). FP4, since its decode went to vpermps
// (fp4x8), waits on memory too: its tiles fetch the row two tiles on once per 64-byte line
// (4 blocks) and every 64 blocks that row's scale line.
template <WeightFormat F>
constexpr bool rows_ahead_format() {
  return F == WeightFormat::F32 || F == WeightFormat::BF16 || F == WeightFormat::F16 ||
         F == WeightFormat::FP4;
}

// The lines of block kb of row r + ahead (ahead > 0), or F16 / BF16 / FP4 kPrefetchBytes
// on in row r itself (ahead == 0).
template <WeightFormat F>
AVX2_INLINE void prefetch_rows_ahead(const WeightSrc& s, int64_t r, int64_t kb, int64_t ahead) {
  static_assert(rows_ahead_format<F>());
  const char* at = reinterpret_cast<const char*>(s.data + r * s.row_bytes + kb * block_bytes(F) / 32);
  if constexpr (F == WeightFormat::FP4) {
    if (kb % 128 != 0) return;  // one 64-byte line holds 4 blocks
    if (ahead > 0 && kb % (64 * 32) == 0) prefetch_l2(s.scale + (r + ahead) * s.scale_ld + kb / 32);
  }
  if (ahead > 0) {
    for (int64_t line = 0; line < block_bytes(F); line += 64)
      prefetch_l2(at + ahead * s.row_bytes + line);
  } else if constexpr (F != WeightFormat::F32) {
    prefetch_l2(at + kPrefetchBytes);
  }
}

// acc[i][j] += x[i][kb0 : kb1] · W[r[j]][kb0 : kb1] for FP8 at M = MR <= 4, the NR rows
// r of one 32x32 scale tile (`scales` its row of codes), whole blocks only, the same
// products in the same order as direct_tile's loop. A loop of its own, with the rows'
// addresses and the block's scale taken once: inside direct_tile's, GCC kept two
// accumulators and the addresses on the stack (objdump), at M = 2..4 its loop counter
// and x too (2.1-3.4x AVX-512's time). At M = 1 each block's scale goes to x where
// x · 2^120·scale is exact (x_fold; 4 multiplies for 4 rows' 16) and x stays in
// registers; at M > 1 the decoded rows take it as load_block does, and the FMAs read x
// from memory, leaving the registers to the 8 accumulators and the decode. kNanTest: as
// e4m3x32_unscaled; without it, the one accumulator GCC still spilled at M = 1 stays in
// a register (1.3x on one thread, L2-resident).
template <int MR, int NR, bool kNanTest>
void fp8_shared_scale_blocks(const WeightSrc& s, const float* x, int64_t ldx, const uint8_t* x_fold,
                             const uint8_t* scales, const int64_t* r, bool rows_ahead, int64_t kb0,
                             int64_t kb1, __m256i& nan, __m256 (&acc)[MR][NR]) {
  const uint8_t* row[NR];
  const char* ahead[NR];
  for (int j = 0; j < NR; ++j) {
    row[j] = s.data + r[j] * s.row_bytes;
    ahead[j] = reinterpret_cast<const char*>(row[j]) +
               (rows_ahead ? 2 * NR * s.row_bytes : kPrefetchBytes);
  }
  for (int64_t kb = kb0; kb < kb1; kb += 32) {
    // With the decode this light, the rows two tiles on (their line, once per line)
    // beat the bytes ahead in the row (1.05-1.2x at M = 1, noisy).
    if (kb % 64 == 0)
      for (int j = 0; j < NR; ++j) prefetch_l2(ahead[j] + kb);
    const uint8_t code = scales[kb / 32];
    if constexpr (MR == 1) {
      __m256 xv[4];
      for (int v = 0; v < 4; ++v) xv[v] = _mm256_load_ps(x + kb + 8 * v);
      // Two loops, not one with the weights' scale under `if (!fold)`: that one ran 1.89
      // ns per row and block where these run 1.39 (marked weights, one thread).
      if (code >= x_fold[kb / 16] && code <= x_fold[kb / 16 + 1]) {
        const __m256 f = _mm256_set1_ps(s.e4m3_scale[code]);
        for (__m256& v : xv) v = _mm256_mul_ps(v, f);
        unroll<NR>([&](auto j) {
          const Vec32 w = e4m3x32_unscaled<kNanTest>(row[j] + kb, nan);
          for (int v = 0; v < 4; ++v) acc[0][j] = _mm256_fmadd_ps(xv[v], w.v[v], acc[0][j]);
        });
      } else {
        unroll<NR>([&](auto j) {
          Vec32 w = e4m3x32_unscaled<kNanTest>(row[j] + kb, nan);
          scale_e4m3(s, code, w);
          for (int v = 0; v < 4; ++v) acc[0][j] = _mm256_fmadd_ps(xv[v], w.v[v], acc[0][j]);
        });
      }
    } else {
      unroll<NR>([&](auto j) {
        Vec32 w = e4m3x32_unscaled<kNanTest>(row[j] + kb, nan);
        scale_e4m3(s, code, w);
        const float* xk = x + kb;
        // x read again for each row j, as memory operands, not held and spilled.
        asm("" : "+r"(xk));
        unroll<MR>([&](auto i) {
          for (int v = 0; v < 4; ++v)
            acc[i][j] = _mm256_fmadd_ps(_mm256_load_ps(xk + i * ldx + 8 * v), w.v[v], acc[i][j]);
        });
      });
    }
  }
}

// acc[j] += x[kb0 : kb1] · W[r[j]][kb0 : kb1] for FP4 at M = 1, the same products in the
// same order as direct_tile's loop. A loop of its own, as fp8_shared_scale_blocks: in
// direct_tile's, each block of each row recomputed its row's address and scale index
// from kb (signed divisions) and tested kb for the prefetches, with the rows' pointers on
// the stack: ~30 instructions per row and block around 11 of decode and 4 FMAs (perf
// annotate). Here the rows' codes and scales are pointers advanced per block, and the
// blocks run in 64-byte lines of 4, each line's prefetch (prefetch_rows_ahead's lines)
// issued once before it: 1.13-1.15x on one thread (docs/kernels-bench.md). At M = 2..4
// the same loop, x read from memory, ran 1.1-1.8x slower than direct_tile's.
template <int NR>
void fp4_blocks_m1(const WeightSrc& s, const float* x, const int64_t* r, bool rows_ahead,
                   int64_t kb0, int64_t kb1, __m256 (&acc)[1][NR]) {
  const uint8_t* codes[NR];
  const uint8_t* scales[NR];
  for (int j = 0; j < NR; ++j) {
    codes[j] = s.data + r[j] * s.row_bytes + kb0 / 2;
    scales[j] = s.scale + r[j] * s.scale_ld + kb0 / 32;
  }
  const int64_t ahead_bytes = rows_ahead ? 2 * NR * s.row_bytes : kPrefetchBytes;
  const int64_t ahead_scales = 2 * NR * s.scale_ld;
  const auto block = [&](int b) {  // block b of the line at codes / scales, x
    __m256 xv[4];
    for (int v = 0; v < 4; ++v) xv[v] = _mm256_load_ps(x + 32 * b + 8 * v);
    unroll<NR>([&](auto j) {
      const Vec32 w = fp4x32(codes[j] + 16 * b, s.fp4_bf16 + 64 * size_t{scales[j][b]});
      for (int v = 0; v < 4; ++v) acc[0][j] = _mm256_fmadd_ps(xv[v], w.v[v], acc[0][j]);
    });
  };
  int64_t kb = kb0;
  for (; kb + 128 <= kb1; kb += 128, x += 128) {
    for (int j = 0; j < NR; ++j) {
      if (rows_ahead && kb % (64 * 32) == 0) prefetch_l2(scales[j] + ahead_scales);
      prefetch_l2(codes[j] + ahead_bytes);
    }
    unroll<4>([&](auto b) { block(b); });
    for (int j = 0; j < NR; ++j) codes[j] += 64, scales[j] += 4;
  }
  for (; kb < kb1; kb += 32, x += 32) {  // a row's last blocks (K % 128 != 0): no line ahead
    block(0);
    for (int j = 0; j < NR; ++j) codes[j] += 16, scales[j] += 1;
  }
}

// out[i] (+)= [Σ_k x[i][k]·W[r[j]][k] for j < NR] over all of K (lanes past NR unused), in
// exactly the blocked path's order: one accumulator per dot product along k within each
// kChunkCols chunk, reduced by reduce4 per chunk, the chunks' sums added in k order (to
// y's values first when accumulating). So a row's result does not depend on whether its
// batch takes this path or the blocked one: outputs are independent of the batch size.
// rows_ahead: the rows two tiles on are the thread's (prefetch_block).
// x_fold: FP8 at M = 1, x's fold ranges (x_fold_ranges), else null.
template <WeightFormat F, int MR>
void direct_tile(const WeightSrc& s, const float* x, int64_t ldx, const uint8_t* x_fold, const int64_t* r,
                 bool add, bool rows_ahead, __m128* out) {
  constexpr int NR = direct_rows(MR);
  // FP8 rows of one 32x32 scale tile share each block's scale (fp8_shared_scale_blocks).
  const uint8_t* shared_scales = nullptr;
  if constexpr (F == WeightFormat::FP8) {
    if ((MR > 1 || x_fold != nullptr) && r[0] / 32 == r[NR - 1] / 32)
      shared_scales = s.scale + (r[0] / 32) * s.scale_ld;
  }
  __m256i nan = _mm256_setzero_si256();  // FP8 / ROWFP8: a NaN code in some row of the tile
  for (int64_t k0 = 0; k0 < s.k; k0 += kChunkCols) {
    __m256 acc[MR][NR];
    for (auto& row : acc)
      for (__m256& a : row) a = _mm256_setzero_ps();
    const int64_t k_end = std::min(s.k, k0 + kChunkCols);
    int64_t kb = k0;
    if constexpr (F == WeightFormat::FP4 && MR == 1) {
      fp4_blocks_m1<NR>(s, x + kb, r, rows_ahead, kb, k_end, acc);
      kb = k_end;
    }
    if constexpr (F == WeightFormat::FP8) {
      if (shared_scales != nullptr) {
        const int64_t full = std::min(k_end, s.k / 32 * 32);
        if (s.no_nan_codes) {
          fp8_shared_scale_blocks<MR, NR, false>(s, x, ldx, x_fold, shared_scales, r, rows_ahead,
                                                 kb, full, nan, acc);
        } else {
          fp8_shared_scale_blocks<MR, NR, true>(s, x, ldx, x_fold, shared_scales, r, rows_ahead, kb,
                                                full, nan, acc);
        }
        kb = full;
      }
    }
    for (; kb < k_end; kb += 32) {
      // unroll<>, not a loop over j: GCC 12 left this loop rolled for FP8 (its decode is
      // long) and kept acc in memory, a store and a reload on every block's FMA chain
      // (perf annotate; FP8 ran at 9-14% of DRAM, unroll.h).
      unroll<NR>([&](auto j) {
        if constexpr (rows_ahead_format<F>()) {
          prefetch_rows_ahead<F>(s, r[j], kb, rows_ahead ? 2 * NR : 0);
        } else if constexpr (F == WeightFormat::FP8 || F == WeightFormat::ROWFP8) {
          _mm_prefetch(reinterpret_cast<const char*>(s.data + r[j] * s.row_bytes + kb) + kPrefetchBytes,
                       _MM_HINT_T0);
        }
        const Vec32 w = load_block<F>(s, r[j], kb, nan);
        // FP4 and ROWFP8 at M > 1: x read again for each row, as in fp8_shared_scale_blocks
        // (FP4 at M = 4 1.1-1.2x, ROWFP8 1.3-1.4x; F32 / BF16 / F16 were level or slower).
        const float* xk = x;
        if constexpr (MR > 1 && (F == WeightFormat::FP4 || F == WeightFormat::ROWFP8))
          asm("" : "+r"(xk));
        unroll<MR>([&](auto i) {
          const float* xi = xk + i * ldx + kb;
          for (int v = 0; v < 4; ++v)
            acc[i][j] = _mm256_fmadd_ps(_mm256_load_ps(xi + 8 * v), w.v[v], acc[i][j]);
        });
      });
    }
    for (int i = 0; i < MR; ++i) {
      __m256 sum[4];
      for (int j = 0; j < 4; ++j) sum[j] = acc[i][std::min(j, NR - 1)];
      const __m128 chunk = reduce4(sum[0], sum[1], sum[2], sum[3]);
      out[i] = add || k0 > 0 ? _mm_add_ps(out[i], chunk) : chunk;
    }
  }
  // A NaN weight code makes its whole dot product NaN (NaN·x is NaN for every x).
  if (any_nan(nan)) [[unlikely]] {
    bool row_nan[4] = {};
    for (int j = 0; j < 4; ++j) row_nan[j] = row_has_nan_code(s, r[std::min(j, NR - 1)]);
    for (int i = 0; i < MR; ++i) {
      alignas(16) float v[4];
      _mm_store_ps(v, out[i]);
      for (int j = 0; j < 4; ++j)
        if (row_nan[j]) v[j] = NAN;
      out[i] = _mm_load_ps(v);
    }
  }
}

struct Plan {  // one call, shared read-only by the threads
  GemmShape sh;
  WeightSrc src;
  const float* xb;  // [M, kp] prepared activations
  int64_t kp;       // K rounded up to 32
  int64_t panel;    // weight rows per buffered block
  float* y;
  bool accumulate;
  const uint8_t* x_fold;  // FP8 at M = 1: x_fold_ranges of xb, else null
};

template <WeightFormat F, int MR>
void run_direct(const Plan& pl, int64_t nb, int64_t ne) {
  constexpr int NR = direct_rows(MR);
  for (int64_t n0 = nb; n0 < ne; n0 += NR) {
    const int nr = static_cast<int>(std::min<int64_t>(NR, ne - n0));
    int64_t r[NR];  // rows past the range repeat the last one; their sums are dropped
    for (int j = 0; j < NR; ++j) r[j] = n0 + std::min(j, nr - 1);
    __m128 out[MR];
    for (int i = 0; i < MR; ++i) {  // accumulating: y's values, added to first as the blocked path does
      alignas(16) float v[4] = {0, 0, 0, 0};
      for (int j = 0; pl.accumulate && j < nr; ++j) v[j] = pl.y[i * pl.sh.ldy + n0 + j];
      out[i] = _mm_load_ps(v);
    }
    const bool ahead = rows_ahead_format<F>() || F == WeightFormat::FP8;
    direct_tile<F, MR>(pl.src, pl.xb, pl.kp, pl.x_fold, r, pl.accumulate, ahead && n0 + 2 * NR < ne, out);
    store_tile(out, MR, nr, pl.y + n0, pl.sh.ldy, /*add=*/false);
  }
}

// --- blocked, M > 4 ---------------------------------------------------------------------

// out[rows_pad, kc] = W[r0 : r0+rows, k0 : k0+kc] as f32; rows past `rows` are zero.
// ahead > 0 (decode order): the rows `ahead` on are fetched into L2 as this panel is read.
// kNanTest: as e4m3x32_unscaled (FP8 / ROWFP8 weights marked no_nan_codes skip it).
template <WeightFormat F, bool kNanTest = true>
void dequant_panel(const WeightSrc& s, int64_t r0, int rows, int rows_pad, int64_t k0, int64_t kc,
                   int64_t ahead, float* out) {
  for (int i = 0; i < rows; ++i) {
    float* o = out + i * kc;
    __m256i nan = _mm256_setzero_si256();
    const char* next = reinterpret_cast<const char*>(s.data + (r0 + i + ahead) * s.row_bytes);
    for (int64_t kb = k0; kb < k0 + kc; kb += 32) {
      // The same block of the row `ahead` on, each line once: by the block that starts it
      // (FP8's 32-byte and FP4's 16-byte blocks share lines; the others span whole ones).
      if (const int64_t at = kb * block_bytes(F) / 32; ahead > 0 && at % 64 == 0)
        for (int64_t line = 0; line < block_bytes(F); line += 64) prefetch_l2(next + at + line);
      const Vec32 b = load_block<F, kNanTest>(s, r0 + i, kb, nan);
      for (int v = 0; v < 4; ++v) _mm256_store_ps(o + (kb - k0) + 8 * v, b.v[v]);
    }
    if (any_nan(nan)) [[unlikely]]
      o[0] = NAN;  // one NaN makes every dot product with the row NaN, as in ref
  }
  std::fill(out + rows * kc, out + rows_pad * kc, 0.0f);
}

// out[i] = [Σ_k x[i][k]·w[j][k] for j < 4], i < MR, k < kc (a multiple of 8).
template <int MR>
void tile(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t kc, __m128* out) {
  __m256 acc[MR][kNR];
  for (auto& row : acc)
    for (__m256& a : row) a = _mm256_setzero_ps();
  for (int64_t k = 0; k < kc; k += 8) {
    __m256 xv[MR];
    for (int i = 0; i < MR; ++i) xv[i] = _mm256_load_ps(x + i * ldx + k);
    for (int j = 0; j < kNR; ++j) {
      const __m256 wv = _mm256_load_ps(w + j * ldw + k);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm256_fmadd_ps(xv[i], wv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) out[i] = reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

// Rows [m_begin, m_end) of y, columns [n0, n0 + rows), k block [k0, k0 + kc).
struct Block {
  int64_t m_begin, m_end, n0;
  int rows;
  int64_t k0;
  int64_t ahead = 0;  // decode order: rows on to the panel whose lines dequant_panel fetches
};

template <WeightFormat F>
void run_block(const Plan& pl, const Block& b, float* wbuf) {
  const int64_t kc = std::min(kChunkCols, pl.kp - b.k0);
  const int rows_pad = (b.rows + kNR - 1) / kNR * kNR;
  if (pl.src.no_nan_codes && (F == WeightFormat::FP8 || F == WeightFormat::ROWFP8))
    dequant_panel<F, false>(pl.src, b.n0, b.rows, rows_pad, b.k0, kc, b.ahead, wbuf);
  else
    dequant_panel<F>(pl.src, b.n0, b.rows, rows_pad, b.k0, kc, b.ahead, wbuf);
  const bool add = pl.accumulate || b.k0 > 0;
  using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, __m128*);
  static constexpr TileFn kTiles[kMR + 1] = {nullptr, tile<1>, tile<2>, tile<3>};
  for (int64_t m0 = b.m_begin; m0 < b.m_end; m0 += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, b.m_end - m0));
    for (int t = 0; t < b.rows; t += kNR) {
      __m128 out[kMR];
      kTiles[mr](pl.xb + m0 * pl.kp + b.k0, pl.kp, wbuf + t * kc, kc, kc, out);
      store_tile(out, mr, std::min(kNR, b.rows - t), pl.y + m0 * pl.sh.ldy + b.n0 + t, pl.sh.ldy,
                 add);
    }
  }
}

// Decode order streams each weight row once (k inner); prefill order keeps a panel in
// L2 for a slab of x rows (k outer), as in gemm_avx512.cpp.
template <WeightFormat F>
void run_buffered(const Plan& pl, int64_t nb, int64_t ne) {
  float* wbuf = gemm_w_scratch().get<float>(pl.panel * kChunkCols);
  auto rows = [&](int64_t n0) { return static_cast<int>(std::min(pl.panel, ne - n0)); };
  const int64_t m = pl.sh.m;
  if (m <= kDecodeMaxM) {
    for (int64_t n0 = nb; n0 < ne; n0 += pl.panel) {
      const int64_t ahead = n0 + 3 * pl.panel <= ne ? 2 * pl.panel : 0;
      for (int64_t k0 = 0; k0 < pl.kp; k0 += kChunkCols)
        run_block<F>(pl, {0, m, n0, rows(n0), k0, ahead}, wbuf);
    }
    return;
  }
  for (int64_t m0 = 0; m0 < m; m0 += kPrefillSlab)
    for (int64_t k0 = 0; k0 < pl.kp; k0 += kChunkCols)
      for (int64_t n0 = nb; n0 < ne; n0 += pl.panel)
        run_block<F>(pl, {m0, std::min(m, m0 + kPrefillSlab), n0, rows(n0), k0}, wbuf);
}

template <WeightFormat F>
void run_range(const Plan& pl, int64_t nb, int64_t ne) {
  switch (pl.sh.m) {
    case 1:
      return run_direct<F, 1>(pl, nb, ne);
    case 2:
      return run_direct<F, 2>(pl, nb, ne);
    case 3:
      return run_direct<F, 3>(pl, nb, ne);
    case 4:
      return run_direct<F, 4>(pl, nb, ne);
    default:
      return run_buffered<F>(pl, nb, ne);
  }
}

void run_format(const Plan& pl, WeightFormat f, int64_t nb, int64_t ne) {
  switch (f) {
    case WeightFormat::F32:
      return run_range<WeightFormat::F32>(pl, nb, ne);
    case WeightFormat::BF16:
      return run_range<WeightFormat::BF16>(pl, nb, ne);
    case WeightFormat::F16:
      return run_range<WeightFormat::F16>(pl, nb, ne);
    case WeightFormat::FP8:
      return run_range<WeightFormat::FP8>(pl, nb, ne);
    case WeightFormat::FP4:
      return run_range<WeightFormat::FP4>(pl, nb, ne);
    case WeightFormat::ROWFP8:
      return run_range<WeightFormat::ROWFP8>(pl, nb, ne);
    case WeightFormat::Q8_0:
    case WeightFormat::Q4_0:
      return;  // cpu::gemm sends these to gemm_q8 (kernels/cpu/gemm_q8.h)
  }
}

static_assert(kDirectMaxM == 4, "run_range instantiates direct tiles for M = 1..4");
static_assert(kPrefillSlab % kMR == 0, "slabs end on micro-tile edges");

}  // namespace

void gemm_avx2(const GemmParams& p) {
  const GemmShape sh = gemm_shape(p);
  if (gemm_trivial(p, sh)) return;
  const int64_t kp = (sh.k + 31) / 32 * 32;
  // x, then (FP8 at M = 1) its fold ranges: 2 bytes per 32 columns.
  const bool fold = p.w.format == WeightFormat::FP8 && sh.m == 1;
  float* xb = gemm_x_scratch().get<float>(sh.m * kp + (fold ? kp / 64 + 1 : 0));
  prepare_x(sh, p.x, col_order(p.w.format), p.precision == GemmPrecision::Bf16, xb, kp);
  uint8_t* x_fold = nullptr;
  if (fold) {
    x_fold = reinterpret_cast<uint8_t*>(xb + sh.m * kp);
    x_fold_ranges(xb, sh.m, kp, x_fold);
  }
  const bool direct = sh.m <= kDirectMaxM;
  const Plan pl{sh,  weight_src(p.w), xb, kp, sh.m <= kDecodeMaxM ? kNR : kPrefillPanel,
                p.y, p.accumulate, x_fold};
  const int64_t tile_rows = direct ? direct_rows_at(sh.m) : kNR;
  parallel_for(sh.n, gemm_min_chunk(sh, tile_rows),
               [&](int64_t nb, int64_t ne) { run_format(pl, p.w.format, nb, ne); });
  gemm_x_scratch().trim(kKeepScratchBytes);
}

bool avx2_direct(const GemmParams& p) {
  return !q8_activations(p) && p.m <= kDirectMaxM &&
         (p.w.format != WeightFormat::F16 || cpu_features().f16c);
}

void gemm_avx2_grouped(std::span<const GemmParams> ps) {
  TROUPE_CHECK(std::all_of(ps.begin(), ps.end(), avx2_direct), "gemm_avx2_grouped: not decode rows");
  // A run of consecutive GEMMs over the same x (m, K, layout and rounding alike) shares
  // one prepared x: first[i] is the first GEMM of i's run, at[first] its offset in buf.
  const auto same_x = [](const GemmParams& a, const GemmParams& b) {
    const GemmShape sa = gemm_shape(a), sb = gemm_shape(b);
    return a.x == b.x && sa.m == sb.m && sa.k == sb.k && sa.ldx == sb.ldx &&
           col_order(a.w.format) == col_order(b.w.format) && a.precision == b.precision;
  };
  // Room for x and, after it, FP8's fold ranges (2 bytes per 32 columns), 64-byte aligned.
  const auto x_floats = [](const GemmShape& sh) {
    const int64_t kp = (sh.k + 31) / 32 * 32;
    return (sh.m * kp + kp / 64 + 1 + 15) / 16 * 16;
  };
  const auto folds = [](const GemmParams& p) { return p.w.format == WeightFormat::FP8 && p.m == 1; };
  scratch_vector<size_t> first(ps.size());
  scratch_vector<int64_t> at(ps.size());
  scratch_vector<uint8_t> fold(ps.size(), 0);  // a run with FP8 weights at M = 1
  int64_t floats = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    first[i] = i > 0 && same_x(ps[i - 1], ps[i]) ? first[i - 1] : i;
    if (first[i] == i) at[i] = floats, floats += x_floats(gemm_shape(ps[i]));
    fold[first[i]] |= folds(ps[i]);
  }
  float* buf = gemm_x_scratch().get<float>(floats);
  scratch_vector<Plan> plans(ps.size());
  scratch_vector<int64_t> unit_end(ps.size());  // tiles of GEMMs [0, i]
  int64_t tiles = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const GemmParams& p = ps[i];
    const GemmShape sh = gemm_shape(p);
    const int64_t kp = (sh.k + 31) / 32 * 32;
    float* xb = buf + at[first[i]];
    const auto x_fold = reinterpret_cast<uint8_t*>(xb + sh.m * kp);
    if (first[i] == i && sh.m > 0 && sh.k > 0) {  // (a run's first GEMM may have N = 0)
      prepare_x(sh, p.x, col_order(p.w.format), p.precision == GemmPrecision::Bf16, xb, kp);
      if (fold[i]) x_fold_ranges(xb, sh.m, kp, x_fold);
    }
    if (!gemm_trivial(p, sh)) {
      plans[i] = {sh, weight_src(p.w), xb, kp, kNR, p.y, p.accumulate, folds(p) ? x_fold : nullptr};
      tiles += (sh.n + direct_rows_at(sh.m) - 1) / direct_rows_at(sh.m);
    }
    unit_end[i] = tiles;
  }
  if (tiles > 0) {
    // Threads take runs of tiles across all the GEMMs, about the rows one call of the
    // first GEMM's shape would give a chunk.
    const GemmShape sh0 = gemm_shape(ps[0]);
    const int64_t rows0 = direct_rows_at(sh0.m);
    parallel_for(tiles, std::max<int64_t>(1, gemm_min_chunk(sh0, rows0) / rows0), [&](int64_t t0, int64_t t1) {
      for_each_weight_run(unit_end, t0, t1, [&](size_t i, int64_t a, int64_t b) {
        const Plan& pl = plans[i];
        const int64_t nr = direct_rows_at(pl.sh.m);
        run_format(pl, ps[i].w.format, a * nr, std::min(pl.sh.n, b * nr));
      });
    });
  }
  gemm_x_scratch().trim(kKeepScratchBytes);
}

}  // namespace troupe::kernels::cpu

#undef AVX2_INLINE
