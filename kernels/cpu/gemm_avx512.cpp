// AVX-512 GEMM y[M, N] (+)= x[M, K] · Wᵀ for every weight format (kernels/gemm.h).
// A thread owns a range of output columns (weight rows); three loop nests:
//
//   direct  (M <= 4; FP8, FP4, F32, F16 and BF16 weights with f32 products up to
//           M = 16, in passes of 4 x rows): no buffer; four weight rows are decoded 32 columns
//           at a time in registers and FMA'd into every x row
//           (kernels/cpu/gemm_direct_avx512.h). Memory-bound at M = 1-2: decoding must
//           cost less than streaming the weights from DRAM.
//   blocked (otherwise): W[n0 : n0+panel, k0 : k0+kc] is dequantized once into a
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
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <span>
#include <type_traits>

#include "kernels/check.h"
#include "kernels/cpu/gemm_blocks_avx512.h"
#include "kernels/cpu/gemm_direct_avx512.h"
#include "kernels/cpu/gemm_internal.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
using namespace gemm_blocks;
using namespace gemm_direct;
namespace {

constexpr int kMR = 6;                   // activation rows per micro-tile
constexpr int64_t kDirectMaxM = 4;       // up to here: weights dequantized in registers
constexpr int64_t kDecodeMaxM = 16;      // up to here: stream weights, panel = one tile
constexpr int64_t kPrefillPanel = 64;    // weight rows dequantized together for prefill
constexpr int64_t kPrefillSlab = 516;    // x rows per prefill slab (a multiple of kMR)
constexpr int64_t kChunkBytes = 4096;    // bytes of one buffered panel row (kc columns)

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

// --- loop nests ---------------------------------------------------------------------------

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

// x permuted to the weights' column order (and rounded to bf16 if asked) at xb,
// [M, K rounded up to 32], and for FP8 direct tiles x's fold ranges after it
// (prepared_x_floats: the room this takes, a multiple of 16 floats so that several
// prepared x can sit one after another in one buffer, each 64-byte aligned).
struct PreparedX {
  const void* xb;            // [M, kp]
  const uint8_t* fold;       // FP8 direct tiles: x_fold_ranges of xb, else null
};
inline int64_t prepared_x_floats(const GemmShape& sh) {
  const int64_t kp = (sh.k + 31) / 32 * 32;
  return (sh.m * kp + kp / 32 + 15) / 16 * 16;  // fold ranges: 2 bytes per 32 columns
}
template <class T>
PreparedX prepared_x(const GemmShape& sh, const float* x, ColOrder order, bool round_x, bool fold,
                     T* xb) {
  const int64_t kp = (sh.k + 31) / 32 * 32;
  prepare_x(sh, x, order, round_x, xb, kp);
  const uint8_t* ranges = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    if (fold) {
      uint8_t* r = reinterpret_cast<uint8_t*>(xb + sh.m * kp);
      x_fold_ranges(xb, sh.m, kp, r);
      ranges = r;
    }
  }
  return {xb, ranges};
}
// In the thread's x scratch.
template <class T>
PreparedX prepared_x(const GemmShape& sh, const float* x, ColOrder order, bool round_x, bool fold) {
  return prepared_x<T>(sh, x, order, round_x, fold, gemm_x_scratch().get<T>(prepared_x_floats(sh)));
}

// One weight's plan over x prepared by prepared_x<T>.
template <class T>
Plan make_plan(const GemmParams& p, const GemmShape& sh, const PreparedX& x) {
  const bool decode = sh.m <= kDecodeMaxM;
  return {sh,
          weight_src(p.w),
          x.xb,
          (sh.k + 31) / 32 * 32,
          kChunkBytes / int64_t{sizeof(T)},
          decode ? kNR : kPrefillPanel,
          p.y,
          p.accumulate,
          decode,
          p.w.format == WeightFormat::FP8 ? x.fold : nullptr};
}

// Four weight rows at a time, all of K, straight from memory, for up to kDirectMaxM
// rows of x; more rows (direct_in_passes) run the tile again per kDirectMaxM rows, its
// weight rows then read from L1.
// next: the plan whose first rows the thread runs after row ne, or null.
template <WeightFormat F>
void run_direct(const Plan& pl, int64_t nb, int64_t ne, const Plan* next = nullptr) {
  const float* xb = static_cast<const float*>(pl.xb);
  const int64_t kc = kChunkBytes / int64_t{sizeof(float)};  // the blocked path's f32 chunk
  for (int64_t n0 = nb; n0 < ne; n0 += kNR) {
    const int nr = static_cast<int>(std::min<int64_t>(kNR, ne - n0));
    int64_t r[kNR];  // rows past the range repeat the last one; their sums are dropped
    for (int j = 0; j < kNR; ++j) r[j] = n0 + std::min(j, nr - 1);
    const __mmask8 mask = static_cast<__mmask8>((1u << nr) - 1);
    RowsAhead ahead;
    if (n0 + kPrefetchRows < ne) ahead = {&pl.src, 0};
    else if (next != nullptr) ahead = {&next->src, ne};
    for (int64_t m0 = 0; m0 < pl.sh.m; m0 += kDirectMaxM) {
      const int mr = static_cast<int>(std::min(kDirectMaxM, pl.sh.m - m0));
      const float* x = xb + m0 * pl.kp;
      float* y = pl.y + m0 * pl.sh.ldy + n0;
      __m128 out[kDirectMaxM];
      for (int i = 0; i < mr; ++i)  // accumulating: y's values, added to first as blocks do
        out[i] = pl.accumulate ? _mm_maskz_loadu_ps(mask, y + i * pl.sh.ldy) : _mm_setzero_ps();
      switch (mr) {
        case 1:
          direct_tile<F, 1>(pl.src, x, pl.kp, pl.x_fold, r, ahead, kc, pl.accumulate, out);
          break;
        case 2:
          direct_tile<F, 2>(pl.src, x, pl.kp, pl.x_fold, r, ahead, kc, pl.accumulate, out);
          break;
        case 3:
          direct_tile<F, 3>(pl.src, x, pl.kp, pl.x_fold, r, ahead, kc, pl.accumulate, out);
          break;
        default:
          direct_tile<F, 4>(pl.src, x, pl.kp, pl.x_fold, r, ahead, kc, pl.accumulate, out);
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
  using T = typename D::T;
  const bool fold = p.w.format == WeightFormat::FP8 && direct;
  const Plan pl = make_plan<T>(p, sh, prepared_x<T>(sh, p.x, col_order(p.w.format), round_x, fold));
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

// Heuristic (kept apart from the loops): M = 5..kDecodeMaxM rows of FP8, F32, F16 or
// BF16 weights with f32 products run the direct tiles in passes of kDirectMaxM rows
// rather than the buffered panels. FP8: the decode of a 32x32 scale tile costs about what
// the panel's store and reload of the f32 weights does, and each pass's FMAs run at the
// direct tiles' rate (bench_kernels v41s FP8 M = 8 / 16 on one thread). F32 / F16 / BF16:
// the panel only copies or widens rows the passes read in place, the later passes from
// L2 (2 threads, M = 16: 1.1-1.7x; v41-small's hc mix [24 x 8192] F32 at M = 8 1.26x;
// docs/kernels-bench.md). FP4: four rows decode from a 32-byte tile in registers, where
// the panel stores and reloads 512 bytes of f32 (2 threads, Zen 5, exp_w1 M = 16 1.1-1.3x
// by min time; passes of 6 rows were slower than of 4: 24 accumulators spill). Results
// are the same either way (every row's sums in the same order: "RowsDoNotDependOnTheBatch").
bool direct_in_passes(const GemmParams& p, const GemmShape& sh) {
  const WeightFormat f = p.w.format;
  return sh.m <= kDecodeMaxM && p.precision == GemmPrecision::F32 &&
         (f == WeightFormat::FP8 || f == WeightFormat::FP4 || f == WeightFormat::F32 ||
          f == WeightFormat::F16 || f == WeightFormat::BF16);
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

bool avx512_shares_x(std::span<const GemmParams> ps) {
  return !ps.empty() && std::all_of(ps.begin(), ps.end(), [&](const GemmParams& p) {
    return avx512_direct(p) && col_order(p.w.format) == col_order(ps[0].w.format);
  });
}

void gemm_avx512_shared_x(std::span<const GemmParams> ps) {
  TROUPE_CHECK(avx512_shares_x(ps), "gemm_avx512_shared_x: not decode rows of one column order");
  gemm_avx512_grouped(ps);
}

bool avx512_direct(const GemmParams& p) {
  return !q8_activations(p) && (p.m <= kDirectMaxM || direct_in_passes(p, gemm_shape(p)));
}

namespace {

// Whether b's activations, prepared, are a's: the same x rows, laid out and rounded alike.
bool same_prepared_x(const GemmParams& a, const GemmParams& b) {
  const GemmShape sa = gemm_shape(a), sb = gemm_shape(b);
  return a.x == b.x && sa.m == sb.m && sa.k == sb.k && sa.ldx == sb.ldx &&
         col_order(a.w.format) == col_order(b.w.format) &&
         (a.precision == GemmPrecision::Bf16) == (b.precision == GemmPrecision::Bf16);
}

}  // namespace

void gemm_avx512_grouped(std::span<const GemmParams> ps) {
  TROUPE_CHECK(std::all_of(ps.begin(), ps.end(), avx512_direct),
               "gemm_avx512_grouped: not decode rows");
  // A run of consecutive GEMMs over the same x shares one prepared x: first[i] is the
  // first GEMM of i's run, at[first] where its prepared x starts in the buffer.
  scratch_vector<size_t> first(ps.size());
  scratch_vector<int64_t> at(ps.size());
  scratch_vector<uint8_t> fold(ps.size(), 0);  // a run with FP8 weights: x's fold ranges
  int64_t floats = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    first[i] = i > 0 && same_prepared_x(ps[i - 1], ps[i]) ? first[i - 1] : i;
    if (first[i] == i) {
      at[i] = floats;
      floats += prepared_x_floats(gemm_shape(ps[i]));
    }
    fold[first[i]] |= ps[i].w.format == WeightFormat::FP8;
  }
  float* buf = gemm_x_scratch().get<float>(floats);
  scratch_vector<Plan> plans(ps.size());
  scratch_vector<int64_t> unit_end(ps.size());  // tiles of GEMMs [0, i]
  PreparedX xb{};
  int64_t tiles = 0;
  for (size_t i = 0; i < ps.size(); ++i) {
    const GemmParams& p = ps[i];
    const GemmShape sh = gemm_shape(p);
    if (first[i] == i && sh.m > 0 && sh.k > 0)  // (a run's first GEMM may have N = 0)
      xb = prepared_x<float>(sh, p.x, col_order(p.w.format), p.precision == GemmPrecision::Bf16,
                             fold[i], buf + at[i]);
    if (!gemm_trivial(p, sh)) {
      plans[i] = make_plan<float>(p, sh, xb);
      tiles += (sh.n + kNR - 1) / kNR;
    }
    unit_end[i] = tiles;
  }
  // Threads take runs of tiles across all the GEMMs, at the chunk size one call of the
  // first GEMM's shape would take.
  if (tiles == 0) return gemm_x_scratch().trim(kKeepScratchBytes);
  parallel_for(tiles, gemm_min_chunk(gemm_shape(ps[0]), kNR) / kNR, [&](int64_t t0, int64_t t1) {
    for_each_weight_run(unit_end, t0, t1, [&](size_t i, int64_t a, int64_t b) {
      // A run that goes on into the next GEMM with tiles, of the same format: its first
      // rows are fetched ahead from this one's last tiles.
      size_t j = i + 1;
      while (j < ps.size() && unit_end[j] == unit_end[i]) ++j;
      const bool goes_on = unit_end[i] < t1 && j < ps.size() && ps[j].w.format == ps[i].w.format;
      const Plan* next = goes_on ? &plans[j] : nullptr;
      const Plan& pl = plans[i];
      with_format(ps[i].w.format, [&](auto f) {
        run_direct<f.value>(pl, a * kNR, std::min(pl.sh.n, b * kNR), next);
      });
    });
  });
  gemm_x_scratch().trim(kKeepScratchBytes);
}

}  // namespace troupe::kernels::cpu

#undef GEMM_INLINE
