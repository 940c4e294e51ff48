// The direct loop nest of the AVX-512 GEMM (kernels/cpu/gemm_avx512.cpp only; it needs the
// AVX-512 compile flags): four weight rows (a tile) are decoded 32 columns at a time in
// registers and FMA'd into up to four x rows, all of K, with no buffer. Memory-bound at
// M = 1-2: the decode must cost less than streaming the weights from DRAM. Here: where a
// tile's rows come from per format (the row sources), how they are fetched ahead, and
// the tile's loop; gemm_avx512.cpp runs the tiles over a thread's rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/gemm_blocks_avx512.h"

namespace troupe::kernels::cpu::gemm_direct {
using namespace gemm_blocks;

constexpr int kNR = 4;                   // weight rows per tile (also the blocked micro-tile's)
constexpr int64_t kPrefetchBytes = 512;  // a thread's last two tiles: how far ahead in the row

// Sums of four accumulators -> [Σa, Σb, Σc, Σd]. Each accumulator goes through the
// same tree (512->256->128 bit halves, then within 128 bits), so a sum does not depend
// on which of the four slots it occupied.
GEMM_INLINE __m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab =
      _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd =
      _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  const __m512 q =
      _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  const __m512 h = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4E));
  const __m512 s = _mm512_add_ps(h, _mm512_permute_ps(h, 0xB1));
  return _mm512_castps512_ps128(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s));
}

// FP4 and FP8 weights stream from DRAM one tile of kNR rows at a time, both in the
// direct tiles and in the decode panels. With the hardware prefetcher alone an FP4
// expert's [1024 x 2048] streamed at ~10 GB/s on one thread at M = 1 (a third of one
// thread's DRAM bandwidth), FP8 [2048 x 2048] at ~8 GB/s: a tile's four rows are one or
// two 4 KiB pages, and the prefetcher does not cross pages, so every tile started cold.
// So while a tile reads row r's next 64-byte line of codes, it prefetches the same line
// of row r + kPrefetchRows, two tiles on, and every 64 scale codes (one line) their
// scale line too. Measured on one thread at M = 1-4 (docs/kernels-bench.md): FP4 one
// tile ahead 2.0-2.3x on a quiet machine, two tiles ahead ~1.4x faster again than one
// under load (where DRAM latency is longer), three no better. Prefetches never fault; a
// tile whose target rows lie past the thread's range does not issue them (another
// thread's rows). The lines go to L2, not L1 (prefetch_l2: kernels/cpu/prefetch.h).
constexpr int64_t kPrefetchRows = 2 * kNR;

// Columns in one 64-byte line of a row's codes.
template <WeightFormat F>
constexpr int64_t kLineColumns = F == WeightFormat::FP4 ? 128 : 64;

// Row r's line of codes from column kb (a multiple of kLineColumns<F>), and every 64
// blocks its line of scale codes. F: FP4, FP8 (32x32 scale tiles) or ROWFP8.
template <WeightFormat F>
GEMM_INLINE void prefetch_line(const WeightSrc& s, int64_t r, int64_t kb) {
  static_assert(F == WeightFormat::FP4 || F == WeightFormat::FP8 || F == WeightFormat::ROWFP8);
  const int64_t code_bytes = kb * 64 / kLineColumns<F>;
  prefetch_l2(s.data + r * s.row_bytes + code_bytes);
  if (kb % (64 * 32) == 0) {
    const int64_t scale_row = F == WeightFormat::FP8 ? r / 32 : r;
    prefetch_l2(s.scale + scale_row * s.scale_ld + kb / 32);
  }
}

// The rows a tile fetches ahead: for tile row r, row r + kPrefetchRows - shift of src.
// Within a thread's rows of one weight, the weight itself (shift 0); in a thread's last
// two tiles of a weight where it goes on to the first rows of the next weight
// (gemm_avx512_grouped's runs over several GEMMs; FP4 only), that weight, shift = the
// end of this one's rows, so the next weight's rows do not start cold; else none.
struct RowsAhead {
  const WeightSrc* src = nullptr;
  int64_t shift = 0;
  bool own_rows() const { return src != nullptr && shift == 0; }
};

// Where a direct tile's four weight rows come from, one 32-column block at a time:
// F32, BF16, F16 and FP4, each row through load_block.
template <WeightFormat F>
struct TileRows {
  const WeightSrc& s;
  const int64_t* r;
  bool prefetch_next = false;  // F16 / BF16: the rows kPrefetchRows on are the thread's
  GEMM_INLINE void start_block(int64_t) {}
  GEMM_INLINE Block32 load(int j, int64_t kb, __mmask32 valid, __mmask32& nan) const {
    // F16 / BF16 rows are short (2 KiB at K = 1024, a block one 64-byte line) and their
    // decode is two conversions per block: the same line of the row two tiles on, as
    // FP4's (prefetch_line: a tile's rows start cold on pages the hardware prefetcher has
    // not entered; F16 M = 1 1.2-1.7x over the next item, docs/kernels-bench.md), or, in
    // a thread's last two tiles, 512 bytes ahead in the row (F16: 1.15-1.28x over none).
    if constexpr (F == WeightFormat::F16 || F == WeightFormat::BF16) {
      const char* at = reinterpret_cast<const char*>(s.data + r[j] * s.row_bytes + 2 * kb);
      prefetch_l2(prefetch_next ? at + kPrefetchRows * s.row_bytes : at + kPrefetchBytes);
    }
    return load_block<F>(s, r[j], kb, valid, nan);
  }
};

// FP8 and ROWFP8 rows: load_block's decode and products, with the scalar work that perf
// showed around the vector ops of decode-sized FP8 GEMMs (address arithmetic, a scale
// load and branch per row and block) taken out of the loop: row and scale-row
// addresses once per tile and, for FP8 rows of one 32x32 scale tile (kShared: every
// tile unless a thread's range starts off a multiple of 4), the block's scale once for
// the four rows. Per 64-byte line of each row (every other block):
//   - prefetch: the rows kPrefetchRows on are fetched ahead (prefetch_line); a
//     thread's last two tiles instead fetch their own rows kPrefetchBytes ahead (the
//     E4M3 decode is heavy enough per byte that the hardware prefetcher alone leaves
//     DRAM idle: 10-25% on one thread before the rows ahead);
//   - NaN codes (0x7F, 0xFF): one test of the 64 codes into a vector (`probe`) rather
//     than a mask per block moved into scalar registers and OR-ed per row, which perf
//     showed in the loop; the rare tile that holds one finds its rows afterwards.
//     kNanTest false: none to look for (WeightView::no_nan_codes), no test.
template <WeightFormat F, bool kShared, bool kNanTest>
struct E4m3TileRows {
  static_assert(F == WeightFormat::FP8 || F == WeightFormat::ROWFP8);
  static_assert(!kShared || F == WeightFormat::FP8);
  const WeightSrc& s;
  const int64_t* r;
  bool prefetch;
  const uint8_t* row[kNR];
  const uint8_t* scales[kNR];  // each row's scale codes, one per 32 columns
  E4m3Scale shared{s, 0};      // kShared: the block's scale
  // kShared: per block [lo, hi] codes whose 2^120·scale times x is exact (x_fold_ranges),
  // and whether this block's code is one: then `x_factor` multiplies x, not the rows.
  const uint8_t* fold_range;
  bool fold = false;
  __m512 x_factor;
  // Per byte lane, the least ~code & 0x7F of the codes seen: 0 once a NaN code was.
  __m512i probe = _mm512_set1_epi8(0x7F);
  E4m3TileRows(const WeightSrc& src, const int64_t* rows, bool prefetch_next,
               const uint8_t* x_fold = nullptr)
      : s(src), r(rows), prefetch(prefetch_next), fold_range(x_fold) {
    for (int j = 0; j < kNR; ++j) {
      row[j] = s.data + r[j] * s.row_bytes;
      scales[j] = s.scale + (F == WeightFormat::FP8 ? r[j] / 32 : r[j]) * s.scale_ld;
    }
  }
  GEMM_INLINE void start_block(int64_t kb) {
    if (kb % kLineColumns<F> == 0) {
      const __mmask64 line = s.k - kb >= 64 ? ~__mmask64{0} : (__mmask64{1} << (s.k - kb)) - 1;
      for (int j = 0; j < kNR; ++j) {
        if (prefetch) {
          prefetch_line<F>(s, r[j] + kPrefetchRows, kb);
        } else {
          prefetch_l2(reinterpret_cast<const char*>(row[j] + kb) + kPrefetchBytes);
        }
        if constexpr (kNanTest) {
          const __m512i codes = _mm512_maskz_loadu_epi8(line, row[j] + kb);
          probe = _mm512_min_epu8(probe, _mm512_andnot_si512(codes, _mm512_set1_epi8(0x7F)));
        }
      }
    }
    if constexpr (kShared) {
      const uint8_t code = scales[0][kb / 32];
      fold = fold_range && code >= fold_range[kb / 16] && code <= fold_range[kb / 16 + 1];
      if (fold) {
        x_factor = _mm512_set1_ps(s.e4m3_scale[code]);
      } else {
        shared = E4m3Scale(s, code);
      }
    }
  }
  GEMM_INLINE Block32 load_unscaled(int j, int64_t kb, __mmask32 valid) const {
    return e4m3x32_bits(_mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(valid, row[j] + kb)));
  }
  GEMM_INLINE Block32 load(int j, int64_t kb, __mmask32 valid, __mmask32&) const {
    const Block32 b = load_unscaled(j, kb, valid);
    if constexpr (kShared) return shared.apply(b);
    return E4m3Scale(s, scales[j][kb / 32]).apply(b);
  }
  // The tile's rows that hold a NaN code (bit j: row j).
  __mmask8 nan_rows() const {
    if (!kNanTest || _mm512_cmpeq_epi8_mask(probe, _mm512_setzero_si512()) == 0) [[likely]]
      return 0;
    __mmask8 rows = 0;
    for (int j = 0; j < kNR; ++j)
      for (int64_t k = 0; k < s.k; ++k)
        if ((row[j][k] & 0x7F) == 0x7F) rows |= static_cast<__mmask8>(1u << j);
    return rows;
  }
};

// FP4 rows: load_block's decode (the 16 E2M1 values times the block's power-of-two
// scale, looked up by vpermps from the nibbles) with the row and scale-row addresses
// computed once per tile and the table kept in a register; `prefetch`: the rows
// kPrefetchRows on are fetched ahead (prefetch_line), from the next weight past the
// end of this one (RowsAhead).
struct Fp4TileRows {
  const WeightSrc& s;
  const int64_t* r;
  RowsAhead ahead;
  const uint8_t* row[kNR];
  const uint8_t* scales[kNR];  // each row's scale codes, one per 32 columns
  Fp4TileRows(const WeightSrc& src, const int64_t* rows, RowsAhead rows_ahead)
      : s(src), r(rows), ahead(rows_ahead) {
    for (int j = 0; j < kNR; ++j) {
      row[j] = s.data + r[j] * s.row_bytes;
      scales[j] = s.scale + r[j] * s.scale_ld;
    }
  }
  GEMM_INLINE void start_block(int64_t kb) {
    if (ahead.src != nullptr && kb % kLineColumns<WeightFormat::FP4> == 0 && kb < ahead.src->k)
      for (int j = 0; j < kNR; ++j)
        prefetch_line<WeightFormat::FP4>(*ahead.src, r[j] + kPrefetchRows - ahead.shift, kb);
  }
  GEMM_INLINE Block32 load(int j, int64_t kb, __mmask32, __mmask32&) const {
    const __m512 t = _mm512_load_ps(s.fp4_scaled + 16 * scales[j][kb / 32]);
    const __m512i codes =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row[j] + kb / 2)));
    // vpermps reads only the low 4 index bits: the low nibble, then (after >> 4) the high.
    return {_mm512_permutexvar_ps(codes, t), _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), t)};
  }
};

// acc[i][j] += x[i][kb : kb+32] · W[r[j]][kb : kb+32]: each 32-column block of the four
// weight rows is decoded once into registers and used by all MR activation rows.
template <int MR, class Rows>
GEMM_INLINE void direct_step(__m512 (&acc)[MR][kNR], __mmask32 (&nan)[kNR], Rows& rows,
                             const float* x, int64_t ldx, int64_t kb, __mmask32 valid) {
  rows.start_block(kb);
  if constexpr (requires { rows.x_factor; }) {
    if (rows.fold) {  // the rows' scale on x instead: 2·MR multiplies rather than 8
      Block32 xs[MR];
      for (int i = 0; i < MR; ++i)
        xs[i] = {_mm512_mul_ps(_mm512_load_ps(x + i * ldx + kb), rows.x_factor),
                 _mm512_mul_ps(_mm512_load_ps(x + i * ldx + kb + 16), rows.x_factor)};
      for (int j = 0; j < kNR; ++j) {
        const Block32 w = rows.load_unscaled(j, kb, valid);
        for (int i = 0; i < MR; ++i) {
          acc[i][j] = _mm512_fmadd_ps(xs[i].lo, w.lo, acc[i][j]);
          acc[i][j] = _mm512_fmadd_ps(xs[i].hi, w.hi, acc[i][j]);
        }
      }
      return;
    }
  }
  for (int j = 0; j < kNR; ++j) {
    const Block32 w = rows.load(j, kb, valid, nan[j]);
    for (int i = 0; i < MR; ++i) {
      acc[i][j] = _mm512_fmadd_ps(_mm512_load_ps(x + i * ldx + kb), w.lo, acc[i][j]);
      acc[i][j] = _mm512_fmadd_ps(_mm512_load_ps(x + i * ldx + kb + 16), w.hi, acc[i][j]);
    }
  }
}

// out[i] (+)= [Σ_k x[i][k]·W[r[j]][k] for j < 4] over all of K, i < MR, in exactly the
// blocked path's order: one accumulator per dot product along k within each kc-column
// chunk, reduced per chunk, the chunks' sums added in k order (to y's values first when
// accumulating). So a row's result does not depend on whether its batch takes this path
// or the blocked one (tests/kernels/gemm_test.cpp "RowsDoNotDependOnTheBatch").
template <int MR, class Rows>
void direct_tile_rows(const WeightSrc& s, Rows rows, const float* x, int64_t ldx, int64_t kc,
                      bool add, __m128* out) {
  __mmask32 nan[kNR] = {};
  const int64_t k_full = s.k / 32 * 32;
  for (int64_t k0 = 0; k0 < s.k; k0 += kc) {
    __m512 acc[MR][kNR];
    for (auto& row : acc)
      for (__m512& a : row) a = _mm512_setzero_ps();
    const int64_t k_end = std::min(s.k, k0 + kc);
    int64_t kb = k0;
    for (; kb < std::min(k_full, k_end); kb += 32)
      direct_step<MR>(acc, nan, rows, x, ldx, kb, ~__mmask32{0});
    if (kb < k_end) direct_step<MR>(acc, nan, rows, x, ldx, kb, columns_below(s.k - kb));
    for (int i = 0; i < MR; ++i) {
      const __m128 chunk = reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
      out[i] = add || k0 > 0 ? _mm_add_ps(out[i], chunk) : chunk;
    }
  }
  // A NaN weight code makes its whole dot product NaN (NaN·x is NaN for every x).
  __mmask8 nan_rows = 0;
  if constexpr (requires { rows.nan_rows(); }) {
    nan_rows = rows.nan_rows();
  } else {
    for (int j = 0; j < kNR; ++j) nan_rows |= static_cast<__mmask8>((nan[j] != 0) << j);
  }
  for (int i = 0; i < MR; ++i) out[i] = _mm_mask_mov_ps(out[i], nan_rows, _mm_set1_ps(NAN));
}

// direct_tile_rows with the format's row source; ahead: the rows for the row sources to
// fetch ahead (RowsAhead; formats other than FP4 only the weight's own); x_fold: FP8's
// x_fold_ranges.
template <WeightFormat F, int MR>
void direct_tile(const WeightSrc& s, const float* x, int64_t ldx, const uint8_t* x_fold,
                 const int64_t* r, RowsAhead ahead, int64_t kc, bool add, __m128* out) {
  if constexpr (F == WeightFormat::FP4)
    return direct_tile_rows<MR>(s, Fp4TileRows(s, r, ahead), x, ldx, kc, add, out);
  const bool prefetch = ahead.own_rows();
  if constexpr (F == WeightFormat::FP8) {
    if (r[0] / 32 == r[kNR - 1] / 32) {
      if (s.no_nan_codes)
        return direct_tile_rows<MR>(s, E4m3TileRows<F, true, false>(s, r, prefetch, x_fold), x, ldx,
                                    kc, add, out);
      return direct_tile_rows<MR>(s, E4m3TileRows<F, true, true>(s, r, prefetch, x_fold), x, ldx,
                                  kc, add, out);
    }
  }
  if constexpr (F == WeightFormat::FP8 || F == WeightFormat::ROWFP8) {
    direct_tile_rows<MR>(s, E4m3TileRows<F, false, true>(s, r, prefetch), x, ldx, kc, add, out);
  } else {
    direct_tile_rows<MR>(s, TileRows<F>{s, r, prefetch}, x, ldx, kc, add, out);
  }
}

// FP8 direct tiles multiply a block's x by the tile's 2^120·scale (E4m3TileRows) where
// that is exact for every x of the block, so u·(x·f) in the FMA is w·x to the bit (w =
// u·f, the decoded weight) and nothing changes but the multiplies. For UE8M0 code c,
// f = 2^(c - 7) (c <= kMaxFoldedScale); x·f is exact unless it overflows or falls below
// the normals: for a nonzero x with exponent field e (0 for subnormals, 255 for inf /
// NaN: both err on the safe side), 1 <= e + c - 7 <= 254. So block b may fold the codes
// range[2b] = max(0, 8 - min e) .. range[2b + 1] = min(kMaxFoldedScale, 261 - max e)
// over its nonzero x of every row (lo > hi: none). xb: [m, kp] prepared x.
inline void x_fold_ranges(const float* xb, int64_t m, int64_t kp, uint8_t* range) {
  const __m512i magnitude = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t kb = 0; kb < kp; kb += 32) {
    __m512i emax = _mm512_setzero_si512(), emin = _mm512_set1_epi32(255);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t h = 0; h < 32; h += 16) {
        const __m512i bits = _mm512_castps_si512(_mm512_load_ps(xb + i * kp + kb + h));
        const __mmask16 nonzero = _mm512_test_epi32_mask(bits, magnitude);
        const __m512i e = _mm512_srli_epi32(_mm512_and_si512(bits, magnitude), 23);
        emax = _mm512_mask_max_epu32(emax, nonzero, emax, e);
        emin = _mm512_mask_min_epu32(emin, nonzero, emin, e);
      }
    const int hi = std::min(kMaxFoldedScale, 261 - static_cast<int>(_mm512_reduce_max_epu32(emax)));
    const int lo = std::max(0, 8 - static_cast<int>(_mm512_reduce_min_epu32(emin)));
    range[kb / 16] = static_cast<uint8_t>(lo);
    range[kb / 16 + 1] = static_cast<uint8_t>(hi);
  }
}

}  // namespace troupe::kernels::cpu::gemm_direct
