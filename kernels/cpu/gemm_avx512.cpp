// AVX-512 GEMM y[M, N] (+)= x[M, K] · Wᵀ for every weight format (kernels/gemm.h).
// A thread owns a range of output columns (weight rows); three loop nests:
//
//   direct  (M <= 4): no buffer; four weight rows are decoded 32 columns at a time in
//           registers and FMA'd into every x row. Memory-bound: decoding must cost less
//           than streaming the weights from DRAM.
//   blocked (M > 4): W[n0 : n0+panel, k0 : k0+kc] is dequantized once into a
//           cache-resident buffer (f32, or bf16 for vdpbf16ps); then for every 6 rows
//           of x and 4-row tile of the panel a 6x4 micro-kernel of dot products along
//           k (24 zmm accumulators), each accumulator reduced and added into y.
//     decode  (M <= 16): panel = 4 rows, k inner: each weight row streams once, the
//             16 KiB buffer stays in L1, x (<= 16 rows) in L1/L2.
//     prefill (M > 16):  panel = 64 rows, k outer: the dequantized panel (256 KiB) sits
//             in L2 and serves a slab of up to 516 x rows; 6 x rows (6 x kc) sit in L1.
//
// Every y element is one accumulator summed over k in a fixed order, reduced by the
// same shuffle tree, and added into y block by block in increasing k - on the direct
// path too - so with f32 products results do not depend on the thread count, the tile an
// element lands in or the batch size M. (Bf16 precision on vdpbf16ps, M > 4 only, sums
// pairs in the dot instruction: its rows differ from the f32 FMAs of M <= 4.)
//
// Weights decode into a per-format column order and the activations are permuted to
// match (kernels/cpu/gemm_blocks_avx512.h).
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cpu/gemm_blocks_avx512.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/parallel.h"

namespace troupe::kernels::cpu {
using namespace gemm_blocks;
namespace {

constexpr int kNR = 4;                   // weight rows per micro-tile
constexpr int kMR = 6;                   // activation rows per micro-tile
constexpr int64_t kDirectMaxM = 4;       // up to here: weights dequantized in registers
constexpr int64_t kDecodeMaxM = 16;      // up to here: stream weights, panel = one tile
constexpr int64_t kPrefillPanel = 64;    // weight rows dequantized together for prefill
constexpr int64_t kPrefillSlab = 516;    // x rows per prefill slab (a multiple of kMR)
constexpr int64_t kChunkBytes = 4096;    // bytes of one buffered panel row (kc columns)
constexpr int64_t kPrefetchBytes = 512;  // direct decode, last tiles: how far ahead in the row

// --- vector helpers ------------------------------------------------------------------

// Round to the nearest bf16 value (RNE, NaN kept quiet), as bf16_encode/bf16_decode.
GEMM_INLINE __m512 round_to_bf16(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(b, _mm512_set1_epi32(0x00400000)));
  return _mm512_castsi512_ps(_mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

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
// thread's rows).
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
  _mm_prefetch(reinterpret_cast<const char*>(s.data + r * s.row_bytes + code_bytes), _MM_HINT_T0);
  if (kb % (64 * 32) == 0) {
    const int64_t scale_row = F == WeightFormat::FP8 ? r / 32 : r;
    _mm_prefetch(reinterpret_cast<const char*>(s.scale + scale_row * s.scale_ld + kb / 32), _MM_HINT_T0);
  }
}

// out[rows_pad, kc] = W[r0 : r0+rows, k0 : k0+kc] in the kernel's element type; rows
// past `rows` and columns past K are zero, so tiles may read them freely.
// prefetch_next: FP4 / FP8 decode panels prefetch the rows kPrefetchRows on (prefetch_line).
template <WeightFormat F, class T>
void dequant_panel(const WeightSrc& s, int64_t r0, int rows, int rows_pad, int64_t k0, int64_t kc,
                   bool prefetch_next, T* out) {
  // Whole blocks with constant masks, then the ragged last block of K, if any.
  const int64_t k_end = k0 + kc, k_full = std::min(k_end, s.k / 32 * 32);
  for (int i = 0; i < rows; ++i) {
    T* o = out + i * kc;
    __mmask32 nan = 0;
    int64_t kb = k0;
    for (; kb < k_full; kb += 32) {
      if constexpr (F == WeightFormat::FP4 || F == WeightFormat::FP8 || F == WeightFormat::ROWFP8)
        if (prefetch_next && kb % kLineColumns<F> == 0) prefetch_line<F>(s, r0 + i + kPrefetchRows, kb);
      store_block(o + (kb - k0), load_block<F>(s, r0 + i, kb, ~__mmask32{0}, nan));
    }
    for (; kb < k_end; kb += 32)
      store_block(o + (kb - k0), load_block<F>(s, r0 + i, kb, columns_below(s.k - kb), nan));
    if (nan) [[unlikely]]
      poison_row_segment(o);
  }
  std::memset(static_cast<void*>(out + rows * kc), 0, sizeof(T) * kc * (rows_pad - rows));
}

// --- activations ------------------------------------------------------------------------

// xb[M, kp] = x with each 32-column block in `order` (see gemm_blocks_avx512.h),
// zero-padded to kp, rounded to bf16 values when `round`.
template <class T>
void prepare_x(const GemmShape& sh, const float* x, ColOrder order, bool round, T* xb, int64_t kp) {
  // vpermt2ps indices into the concatenation [columns 0..15 | columns 16..31].
  __m512i lo = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i hi = _mm512_add_epi32(lo, _mm512_set1_epi32(16));
  if (order == ColOrder::EvenOdd) {
    lo = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    hi = _mm512_add_epi32(lo, _mm512_set1_epi32(1));
  }
  parallel_for(sh.m, std::max<int64_t>(1, 65536 / std::max<int64_t>(kp, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t m = b; m < e; ++m) {
                   const float* xr = x + m * sh.ldx;
                   for (int64_t kb = 0; kb < kp; kb += 32) {
                     const __mmask32 valid = columns_below(sh.k - kb);
                     const __m512 a = _mm512_maskz_loadu_ps(static_cast<__mmask16>(valid), xr + kb);
                     const __m512 c =
                         _mm512_maskz_loadu_ps(static_cast<__mmask16>(valid >> 16), xr + kb + 16);
                     Block32 v{_mm512_permutex2var_ps(a, lo, c), _mm512_permutex2var_ps(a, hi, c)};
                     if (round) v = {round_to_bf16(v.lo), round_to_bf16(v.hi)};
                     store_block(xb + m * kp + kb, v);
                   }
                 }
               });
}

// --- micro-kernel -----------------------------------------------------------------------

struct F32Dot {  // 16 columns per step, one FMA
  using T = float;
  static constexpr int kStep = 16;
  GEMM_INLINE static __m512 load(const float* p) { return _mm512_load_ps(p); }
  GEMM_INLINE static __m512 madd(__m512 acc, __m512 x, __m512 w) {
    return _mm512_fmadd_ps(x, w, acc);
  }
};
struct Bf16Dot {  // 32 columns per step, pairs of bf16 products into f32 lanes
  using T = uint16_t;
  static constexpr int kStep = 32;
  GEMM_INLINE static __m512 load(const uint16_t* p) {
    return _mm512_castsi512_ps(_mm512_load_si512(p));
  }
  GEMM_INLINE static __m512 madd(__m512 acc, __m512 x, __m512 w) {
    return _mm512_dpbf16_ps(acc, (__m512bh)x, (__m512bh)w);
  }
};

// out[i] = [Σ_k x[i][k]·w[j][k] for j < 4], i < MR, k < kc (kc a multiple of kStep).
template <class D, int MR>
void tile(const typename D::T* x, int64_t ldx, const typename D::T* w, int64_t ldw, int64_t kc,
          __m128* out) {
  __m512 acc[MR][kNR];
  for (auto& row : acc)
    for (__m512& a : row) a = _mm512_setzero_ps();
  for (int64_t k = 0; k < kc; k += D::kStep) {
    __m512 wv[kNR];
    for (int j = 0; j < kNR; ++j) wv[j] = D::load(w + j * ldw + k);
    for (int i = 0; i < MR; ++i) {
      const __m512 xv = D::load(x + i * ldx + k);
      for (int j = 0; j < kNR; ++j) acc[i][j] = D::madd(acc[i][j], xv, wv[j]);
    }
  }
  for (int i = 0; i < MR; ++i) out[i] = reduce4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
}

template <class D>
void run_tile(int mr, const typename D::T* x, int64_t ldx, const typename D::T* w, int64_t ldw,
              int64_t kc, __m128* out) {
  using Fn =
      void (*)(const typename D::T*, int64_t, const typename D::T*, int64_t, int64_t, __m128*);
  static constexpr Fn kTiles[kMR + 1] = {nullptr,    tile<D, 1>, tile<D, 2>, tile<D, 3>,
                                         tile<D, 4>, tile<D, 5>, tile<D, 6>};
  kTiles[mr](x, ldx, w, ldw, kc, out);
}

// y[i][0 : nr] (+)= out[i] for i < mr; never touches y past nr columns.
void store_tile(const __m128* out, int mr, int nr, float* y, int64_t ldy, bool add) {
  const __mmask8 mask = static_cast<__mmask8>((1u << nr) - 1);
  for (int i = 0; i < mr; ++i) {
    float* yi = y + i * ldy;
    const __m128 v = add ? _mm_add_ps(_mm_maskz_loadu_ps(mask, yi), out[i]) : out[i];
    _mm_mask_storeu_ps(yi, mask, v);
  }
}

// --- decode, M <= 4: weights dequantized in registers -----------------------------------

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
      _mm_prefetch(prefetch_next ? at + kPrefetchRows * s.row_bytes : at + kPrefetchBytes, _MM_HINT_T0);
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
template <WeightFormat F, bool kShared>
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
          _mm_prefetch(reinterpret_cast<const char*>(row[j] + kb) + kPrefetchBytes, _MM_HINT_T0);
        }
        const __m512i codes = _mm512_maskz_loadu_epi8(line, row[j] + kb);
        probe = _mm512_min_epu8(probe, _mm512_andnot_si512(codes, _mm512_set1_epi8(0x7F)));
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
    if (_mm512_cmpeq_epi8_mask(probe, _mm512_setzero_si512()) == 0) [[likely]]
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
// kPrefetchRows on are fetched ahead (prefetch_line).
struct Fp4TileRows {
  const WeightSrc& s;
  const int64_t* r;
  bool prefetch;
  const uint8_t* row[kNR];
  const uint8_t* scales[kNR];  // each row's scale codes, one per 32 columns
  __m512 table = _mm512_loadu_ps(s.e2m1);
  Fp4TileRows(const WeightSrc& src, const int64_t* rows, bool prefetch_next)
      : s(src), r(rows), prefetch(prefetch_next) {
    for (int j = 0; j < kNR; ++j) {
      row[j] = s.data + r[j] * s.row_bytes;
      scales[j] = s.scale + r[j] * s.scale_ld;
    }
  }
  GEMM_INLINE void start_block(int64_t kb) {
    if (prefetch && kb % kLineColumns<WeightFormat::FP4> == 0)
      for (int j = 0; j < kNR; ++j) prefetch_line<WeightFormat::FP4>(s, r[j] + kPrefetchRows, kb);
  }
  GEMM_INLINE Block32 load(int j, int64_t kb, __mmask32, __mmask32&) const {
    const __m512 t = _mm512_mul_ps(table, _mm512_set1_ps(s.ue8m0[scales[j][kb / 32]]));
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

// direct_tile_rows with the format's row source; prefetch: the rows kPrefetchRows on are
// the thread's, for the row sources to fetch ahead; x_fold: FP8's x_fold_ranges.
template <WeightFormat F, int MR>
void direct_tile(const WeightSrc& s, const float* x, int64_t ldx, const uint8_t* x_fold,
                 const int64_t* r, bool prefetch, int64_t kc, bool add, __m128* out) {
  if constexpr (F == WeightFormat::FP4)
    return direct_tile_rows<MR>(s, Fp4TileRows(s, r, prefetch), x, ldx, kc, add, out);
  if constexpr (F == WeightFormat::FP8) {
    if (r[0] / 32 == r[kNR - 1] / 32)
      return direct_tile_rows<MR>(s, E4m3TileRows<F, true>(s, r, prefetch, x_fold), x, ldx, kc, add, out);
  }
  if constexpr (F == WeightFormat::FP8 || F == WeightFormat::ROWFP8) {
    direct_tile_rows<MR>(s, E4m3TileRows<F, false>(s, r, prefetch), x, ldx, kc, add, out);
  } else {
    direct_tile_rows<MR>(s, TileRows<F>{s, r, prefetch}, x, ldx, kc, add, out);
  }
}

// --- loop nests ---------------------------------------------------------------------------

// FP8 direct tiles multiply a block's x by the tile's 2^120·scale (E4m3TileRows) where
// that is exact for every x of the block, so u·(x·f) in the FMA is w·x to the bit (w =
// u·f, the decoded weight) and nothing changes but the multiplies. For UE8M0 code c,
// f = 2^(c - 7) (c <= kMaxFoldedScale); x·f is exact unless it overflows or falls below
// the normals: for a nonzero x with exponent field e (0 for subnormals, 255 for inf /
// NaN: both err on the safe side), 1 <= e + c - 7 <= 254. So block b may fold the codes
// range[2b] = max(0, 8 - min e) .. range[2b + 1] = min(kMaxFoldedScale, 261 - max e)
// over its nonzero x of every row (lo > hi: none). xb: [m, kp] prepared x.
void x_fold_ranges(const float* xb, int64_t m, int64_t kp, uint8_t* range) {
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

struct Plan {  // one call, shared read-only by the threads
  GemmShape sh;
  WeightSrc src;
  const void* xb;  // [M, kp] prepared activations
  int64_t kp;      // K rounded up to 32
  int64_t kc;      // columns per buffered block (a multiple of 32)
  int64_t panel;   // weight rows per buffered block
  float* y;
  bool accumulate;
  bool decode;
  const uint8_t* x_fold = nullptr;  // FP8, M <= kDirectMaxM: x_fold_ranges of xb
};

template <class T>
Plan make_plan(const GemmParams& p, const GemmShape& sh, bool round_x, bool direct) {
  const bool decode = sh.m <= kDecodeMaxM;
  Plan pl{sh,
          weight_src(p.w),
          nullptr,
          (sh.k + 31) / 32 * 32,
          kChunkBytes / int64_t{sizeof(T)},
          decode ? kNR : kPrefillPanel,
          p.y,
          p.accumulate,
          decode};
  // FP8 direct tiles: x's fold ranges (2 bytes per block) after x in the same scratch.
  const bool fold = p.w.format == WeightFormat::FP8 && direct;
  T* xb = gemm_x_scratch().get<T>(sh.m * pl.kp + (fold ? pl.kp / 32 : 0));
  prepare_x(sh, p.x, col_order(p.w.format), round_x, xb, pl.kp);
  pl.xb = xb;
  if constexpr (std::is_same_v<T, float>) {
    if (fold) {
      uint8_t* ranges = reinterpret_cast<uint8_t*>(xb + sh.m * pl.kp);
      x_fold_ranges(xb, sh.m, pl.kp, ranges);
      pl.x_fold = ranges;
    }
  }
  return pl;
}

// Four weight rows at a time, all of K, straight from memory, for up to kDirectMaxM
// rows of x; more rows (direct_in_passes) run the tile again per kDirectMaxM rows, its
// weight rows then read from L1.
template <WeightFormat F>
void run_direct(const Plan& pl, int64_t nb, int64_t ne) {
  const float* xb = static_cast<const float*>(pl.xb);
  const int64_t kc = kChunkBytes / int64_t{sizeof(float)};  // the blocked path's f32 chunk
  for (int64_t n0 = nb; n0 < ne; n0 += kNR) {
    const int nr = static_cast<int>(std::min<int64_t>(kNR, ne - n0));
    int64_t r[kNR];  // rows past the range repeat the last one; their sums are dropped
    for (int j = 0; j < kNR; ++j) r[j] = n0 + std::min(j, nr - 1);
    const __mmask8 mask = static_cast<__mmask8>((1u << nr) - 1);
    const bool prefetch = n0 + kPrefetchRows < ne;
    for (int64_t m0 = 0; m0 < pl.sh.m; m0 += kDirectMaxM) {
      const int mr = static_cast<int>(std::min(kDirectMaxM, pl.sh.m - m0));
      const float* x = xb + m0 * pl.kp;
      float* y = pl.y + m0 * pl.sh.ldy + n0;
      __m128 out[kDirectMaxM];
      for (int i = 0; i < mr; ++i)  // accumulating: y's values, added to first as blocks do
        out[i] = pl.accumulate ? _mm_maskz_loadu_ps(mask, y + i * pl.sh.ldy) : _mm_setzero_ps();
      switch (mr) {
        case 1:
          direct_tile<F, 1>(pl.src, x, pl.kp, pl.x_fold, r, prefetch, kc, pl.accumulate, out);
          break;
        case 2:
          direct_tile<F, 2>(pl.src, x, pl.kp, pl.x_fold, r, prefetch, kc, pl.accumulate, out);
          break;
        case 3:
          direct_tile<F, 3>(pl.src, x, pl.kp, pl.x_fold, r, prefetch, kc, pl.accumulate, out);
          break;
        default:
          direct_tile<F, 4>(pl.src, x, pl.kp, pl.x_fold, r, prefetch, kc, pl.accumulate, out);
          break;
      }
      store_tile(out, mr, nr, y, pl.sh.ldy, /*add=*/false);
    }
  }
}

// Rows [m_begin, m_end) of y, columns [n0, n0 + rows), k block [k0, k0 + kc).
struct Block {
  int64_t m_begin, m_end, n0;
  int rows;
  int64_t k0;
};

// prefetch_next: a decode panel whose rows kPrefetchRows on are in the thread's range.
template <WeightFormat F, class D>
void run_block(const Plan& pl, const Block& b, bool prefetch_next, typename D::T* wbuf) {
  using T = typename D::T;
  const int64_t kc = std::min(pl.kc, pl.kp - b.k0);
  const int rows_pad = (b.rows + kNR - 1) / kNR * kNR;
  dequant_panel<F>(pl.src, b.n0, b.rows, rows_pad, b.k0, kc, prefetch_next, wbuf);
  const T* xb = static_cast<const T*>(pl.xb);
  const bool add = pl.accumulate || b.k0 > 0;
  for (int64_t m0 = b.m_begin; m0 < b.m_end; m0 += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, b.m_end - m0));
    for (int t = 0; t < b.rows; t += kNR) {
      __m128 out[kMR];
      run_tile<D>(mr, xb + m0 * pl.kp + b.k0, pl.kp, wbuf + t * kc, kc, kc, out);
      store_tile(out, mr, std::min(kNR, b.rows - t), pl.y + m0 * pl.sh.ldy + b.n0 + t, pl.sh.ldy,
                 add);
    }
  }
}

// Buffered blocks. Decode order streams each weight row once (k inner). Prefill order
// keeps one dequantized panel in L2 for a slab of up to kPrefillSlab rows of x (k
// outer); slabs bound the x and y working set (each weight panel is dequantized once
// per slab, ~2% of the slab's FMAs).
template <WeightFormat F, class D>
void run_buffered(const Plan& pl, int64_t nb, int64_t ne) {
  typename D::T* wbuf = gemm_w_scratch().get<typename D::T>(pl.panel * pl.kc);
  auto rows = [&](int64_t n0) { return static_cast<int>(std::min(pl.panel, ne - n0)); };
  const int64_t m = pl.sh.m;
  if (pl.decode) {
    for (int64_t n0 = nb; n0 < ne; n0 += pl.panel)
      for (int64_t k0 = 0; k0 < pl.kp; k0 += pl.kc)
        run_block<F, D>(pl, {0, m, n0, rows(n0), k0}, n0 + kPrefetchRows < ne, wbuf);
    return;
  }
  for (int64_t m0 = 0; m0 < m; m0 += kPrefillSlab)
    for (int64_t k0 = 0; k0 < pl.kp; k0 += pl.kc)
      for (int64_t n0 = nb; n0 < ne; n0 += pl.panel)
        run_block<F, D>(pl, {m0, std::min(m, m0 + kPrefillSlab), n0, rows(n0), k0}, false, wbuf);
}

// Calls fn(std::integral_constant<WeightFormat, f>{}) so loops are compiled per format.
template <class Fn>
void with_format(WeightFormat f, Fn&& fn) {
  using WF = WeightFormat;
  switch (f) {
    case WF::F32:
      return fn(std::integral_constant<WF, WF::F32>{});
    case WF::BF16:
      return fn(std::integral_constant<WF, WF::BF16>{});
    case WF::F16:
      return fn(std::integral_constant<WF, WF::F16>{});
    case WF::FP8:
      return fn(std::integral_constant<WF, WF::FP8>{});
    case WF::FP4:
      return fn(std::integral_constant<WF, WF::FP4>{});
    case WF::ROWFP8:
      return fn(std::integral_constant<WF, WF::ROWFP8>{});
    case WF::Q8_0:
    case WF::Q4_0:
      return;  // cpu::gemm sends these to gemm_q8 (kernels/cpu/gemm_q8.h)
  }
}

template <class D>
void run(const GemmParams& p, const GemmShape& sh, bool round_x, bool direct) {
  const Plan pl = make_plan<typename D::T>(p, sh, round_x, direct);
  parallel_for(sh.n, gemm_min_chunk(sh, kNR), [&](int64_t nb, int64_t ne) {
    with_format(p.w.format, [&](auto f) {
      if (direct) {
        run_direct<f.value>(pl, nb, ne);
      } else {
        run_buffered<f.value, D>(pl, nb, ne);
      }
    });
  });
}

// Heuristic (kept apart from the loops): M = 5..kDecodeMaxM rows of FP8 weights with
// f32 products run the direct tiles in passes of kDirectMaxM rows rather than the
// buffered panels (the decode of a 32x32 scale tile costs about what the panel's
// store and reload of the f32 weights does, and each pass's FMAs run at the direct
// tiles' rate): bench_kernels v41s FP8 M = 8 / 16 on one thread, docs/kernels-bench.md.
// Other formats have not been measured this way. Results are the same either way
// (every row's sums in the same order: "RowsDoNotDependOnTheBatch").
bool direct_in_passes(const GemmParams& p, const GemmShape& sh) {
  return sh.m <= kDecodeMaxM && p.w.format == WeightFormat::FP8 && p.precision == GemmPrecision::F32;
}

}  // namespace

void gemm_avx512(const GemmParams& p, bool use_bf16_dot) {
  const GemmShape sh = gemm_shape(p);
  if (gemm_trivial(p, sh)) return;
  const bool bf16 = p.precision == GemmPrecision::Bf16;
  // Memory-bound decode gains nothing from bf16 dots: f32 FMAs on the rounded x are the
  // same Bf16 definition. F32- and F16-format weights are not bf16 values and Bf16
  // rounds only activations, so they also take f32 FMAs, as does a CPU without
  // AVX512_BF16.
  const bool bf16_weights = p.w.format != WeightFormat::F32 && p.w.format != WeightFormat::F16;
  if (sh.m <= kDirectMaxM || direct_in_passes(p, sh)) {
    run<F32Dot>(p, sh, bf16, true);
  } else if (bf16 && use_bf16_dot && bf16_weights) {
    run<Bf16Dot>(p, sh, true, false);
  } else {
    run<F32Dot>(p, sh, bf16, false);
  }
  gemm_x_scratch().trim(kKeepScratchBytes);
}

}  // namespace troupe::kernels::cpu

#undef GEMM_INLINE
