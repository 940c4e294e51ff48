// AVX-512 GEMM y[M, N] (+)= x[M, K] · Wᵀ for every weight format (kernels/gemm.h).
//
// One loop nest serves decode and prefill. A thread owns a range of output columns
// (weight rows) and walks it in blocks of [panel rows x kc columns]:
//
//   block:  dequantize W[n0 : n0+panel, k0 : k0+kc] once into a cache-resident buffer
//           (f32, or bf16 for vdpbf16ps), then for every 6-row slab of x and every
//           4-row tile of the panel run a 6x4 micro-kernel of dot products along k
//           (24 zmm accumulators), reduce each accumulator to a scalar, add into y.
//
//   decode  (M <= 16): panel = 4 rows, k inner: each weight row streams from DRAM once,
//           the 16 KiB buffer never leaves L1, x (<= 16 rows) stays in L1/L2.
//   prefill (M > 16):  panel = 64 rows, k outer: the dequantized panel (256 KiB) sits in
//           L2 and is reused by all M rows; one x slab (6 x kc) sits in L1.
//
// Every y element is one accumulator lane-set summed over k in a fixed order, reduced
// by the same shuffle tree, and added into y chunk by chunk in increasing k, so results
// do not depend on the thread count, the tile position or the decode/prefill choice of
// a given M.
//
// FP4 nibbles decode fastest as (even k, odd k) halves of each 32-column block, so for
// FP4 the activations are permuted the same way (prepare_x); a dot product does not
// care about the order of its terms.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12 intrinsic-header warnings
#include "kernels/cpu/gemm_internal.h"
#include "kernels/parallel.h"
#include "kernels/quant.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kNR = 4;                 // weight rows per micro-tile
constexpr int kMR = 6;                 // activation rows per micro-tile
constexpr int64_t kDecodeMaxM = 16;    // up to here: stream weights, panel = one tile
constexpr int64_t kPrefillPanel = 64;  // weight rows dequantized together for prefill
constexpr int64_t kChunkBytes = 4096;  // bytes of one buffered panel row (kc columns)

// Per-thread scratch, grown on demand and reused across calls (64-byte aligned).
class Scratch {
 public:
  ~Scratch() { std::free(p_); }
  template <class T>
  T* get(int64_t count) {
    const size_t bytes = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
    if (bytes > cap_) {
      std::free(p_);
      p_ = std::aligned_alloc(64, bytes);
      cap_ = bytes;
    }
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
  size_t cap_ = 0;
};
thread_local Scratch t_xbuf;  // activations: written before, read inside parallel_for
thread_local Scratch t_wbuf;  // each thread's dequantized panel

// --- vector helpers ------------------------------------------------------------------

// 16 E4M3 codes -> f32. Sign-extending puts the sign in bit 31 and ones above bit 6;
// shifting by 20 and masking leaves the sign and the 7 magnitude bits in f32 bits
// 26..20. That f32 (exponent field e, mantissa m) times 2^120 is exactly the E4M3 value
// 2^(e-7)·(1+m/8), and e = 0 gives the f32 subnormal 2^-126·m/8, i.e. the E4M3
// subnormal 2^-6·m/8 after scaling. Codes 0x7F/0xFF are NaN.
__m512 e4m3x16(__m128i codes) {
  const __m512i d = _mm512_cvtepi8_epi32(codes);
  const __m512i bits =
      _mm512_and_si512(_mm512_slli_epi32(d, 20), _mm512_set1_epi32(static_cast<int>(0x87F00000u)));
  const __m512 v = _mm512_mul_ps(_mm512_castsi512_ps(bits), _mm512_set1_ps(0x1p120f));
  const __mmask16 nan =
      _mm_cmpeq_epi8_mask(_mm_and_si128(codes, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F));
  return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(NAN));
}

__m512 bf16x16_to_f32(__m256i h) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

// Round to the nearest bf16 value (RNE, NaN kept quiet), as bf16_encode/bf16_decode.
__m512 round_to_bf16(__m512 v) {
  const __m512i b = _mm512_castps_si512(v);
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_add_epi32(b, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb));
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(b, _mm512_set1_epi32(0x00400000)));
  return _mm512_castsi512_ps(
      _mm512_and_si512(r, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
}

// Sums of four accumulators -> [Σa, Σb, Σc, Σd]. Each accumulator goes through the
// same tree (512->256->128 bit halves, then within 128 bits), so a sum does not depend
// on which of the four slots it occupied.
__m128 reduce4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xEE));
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xDD));
  const __m512 h = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4E));
  const __m512 s = _mm512_add_ps(h, _mm512_permute_ps(h, 0xB1));
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), s));
}

// Lanes [0, valid) of a 16-lane vector.
__mmask16 lanes_below(int64_t valid) {
  if (valid >= 16) return 0xFFFF;
  return valid <= 0 ? 0 : static_cast<__mmask16>((1u << valid) - 1);
}

// --- weights: 32 columns of one row at a time -------------------------------------------

struct Block32 {
  __m512 lo, hi;  // columns kb..kb+15 and kb+16..kb+31 (FP4: even then odd columns)
};

struct WeightSrc {
  const uint8_t* data;
  const uint8_t* scale;
  int64_t k;          // columns
  int64_t row_bytes;  // bytes per stored row
  int64_t scale_ld;   // scale codes per scale row
  const float* ue8m0; // [256] scale values
  const float* e2m1;  // [16] FP4 values
};

WeightSrc weight_src(const WeightView& w) {
  static const float* ue8m0 = [] {
    static float t[256];
    for (int c = 0; c < 256; ++c) t[c] = ue8m0_decode(static_cast<uint8_t>(c));
    return t;
  }();
  const int64_t k = w.cols;
  int64_t row_bytes = k, scale_ld = k / 32;
  if (w.format == WeightFormat::F32) row_bytes = 4 * k;
  if (w.format == WeightFormat::BF16) row_bytes = 2 * k;
  if (w.format == WeightFormat::FP4) row_bytes = k / 2;
  if (w.format == WeightFormat::FP8) scale_ld = (k + 31) / 32;
  return {static_cast<const uint8_t*>(w.data), w.scale, k, row_bytes, scale_ld, ue8m0, e2m1_table()};
}

// Columns kb..kb+31 of row r as f32 (exact, MODEL.md §3); columns >= K read as 0.
template <WeightFormat F>
Block32 load_block(const WeightSrc& s, int64_t r, int64_t kb) {
  const uint8_t* row = s.data + r * s.row_bytes;
  const __mmask16 lo = lanes_below(s.k - kb), hi = lanes_below(s.k - kb - 16);
  if constexpr (F == WeightFormat::F32) {
    const float* p = reinterpret_cast<const float*>(row) + kb;
    return {_mm512_maskz_loadu_ps(lo, p), _mm512_maskz_loadu_ps(hi, p + 16)};
  } else if constexpr (F == WeightFormat::BF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + kb;
    return {bf16x16_to_f32(_mm256_maskz_loadu_epi16(lo, p)),
            bf16x16_to_f32(_mm256_maskz_loadu_epi16(hi, p + 16))};
  } else if constexpr (F == WeightFormat::FP4) {  // K % 32 == 0: whole blocks only
    const float sc = s.ue8m0[s.scale[r * s.scale_ld + kb / 32]];
    const __m512 table = _mm512_mul_ps(_mm512_loadu_ps(s.e2m1), _mm512_set1_ps(sc));
    const __m512i codes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + kb / 2)));
    // vpermps reads only the low 4 index bits: the low nibble, then (after >> 4) the high.
    return {_mm512_permutexvar_ps(codes, table),
            _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), table)};
  } else {  // FP8 (32x32 scale tiles) or ROWFP8 (scale per 32 columns of a row)
    const int64_t scale_row = F == WeightFormat::FP8 ? r / 32 : r;
    const __m512 sc = _mm512_set1_ps(s.ue8m0[s.scale[scale_row * s.scale_ld + kb / 32]]);
    return {_mm512_mul_ps(e4m3x16(_mm_maskz_loadu_epi8(lo, row + kb)), sc),
            _mm512_mul_ps(e4m3x16(_mm_maskz_loadu_epi8(hi, row + kb + 16)), sc)};
  }
}

void store_block(float* o, Block32 b) {
  _mm512_store_ps(o, b.lo);
  _mm512_store_ps(o + 16, b.hi);
}
void store_block(uint16_t* o, Block32 b) {  // values are exact in bf16 (see round_to_bf16)
  _mm512_store_si512(o, (__m512i)_mm512_cvtne2ps_pbh(b.hi, b.lo));
}

// out[rows_pad, kc] = W[r0 : r0+rows, k0 : k0+kc] in the kernel's element type; rows
// past `rows` and columns past K are zero, so tiles may read them freely.
template <WeightFormat F, class T>
void dequant_panel(const WeightSrc& s, int64_t r0, int rows, int rows_pad, int64_t k0,
                   int64_t kc, T* out) {
  for (int i = 0; i < rows; ++i) {
    T* o = out + i * kc;
    if constexpr (F == WeightFormat::BF16 && std::is_same_v<T, uint16_t>) {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(s.data + (r0 + i) * s.row_bytes);
      for (int64_t kb = k0; kb < k0 + kc; kb += 32) {  // already bf16: copy
        const int64_t valid = s.k - kb;
        const __mmask32 m = valid >= 32 ? ~__mmask32{0} : (__mmask32{1} << valid) - 1;
        _mm512_store_si512(o + (kb - k0), _mm512_maskz_loadu_epi16(m, p + kb));
      }
    } else {
      for (int64_t kb = k0; kb < k0 + kc; kb += 32) store_block(o + (kb - k0), load_block<F>(s, r0 + i, kb));
    }
  }
  std::memset(static_cast<void*>(out + rows * kc), 0, sizeof(T) * kc * (rows_pad - rows));
}

// --- activations ------------------------------------------------------------------------

// xb[M, kp] = x in the weights' column order (FP4: even/odd halves per 32 columns),
// zero-padded to kp, rounded to bf16 values when `round`.
template <class T>
void prepare_x(const GemmShape& sh, const float* x, bool fp4_order, bool round, T* xb, int64_t kp) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  parallel_for(sh.m, std::max<int64_t>(1, 65536 / std::max<int64_t>(kp, 1)), [&](int64_t b, int64_t e) {
    for (int64_t m = b; m < e; ++m) {
      const float* xr = x + m * sh.ldx;
      for (int64_t kb = 0; kb < kp; kb += 32) {
        Block32 v{_mm512_maskz_loadu_ps(lanes_below(sh.k - kb), xr + kb),
                  _mm512_maskz_loadu_ps(lanes_below(sh.k - kb - 16), xr + kb + 16)};
        if (fp4_order) v = {_mm512_permutex2var_ps(v.lo, even, v.hi), _mm512_permutex2var_ps(v.lo, odd, v.hi)};
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
  static __m512 load(const float* p) { return _mm512_load_ps(p); }
  static __m512 madd(__m512 acc, __m512 x, __m512 w) { return _mm512_fmadd_ps(x, w, acc); }
};
struct Bf16Dot {  // 32 columns per step, pairs of bf16 products into f32 lanes
  using T = uint16_t;
  static constexpr int kStep = 32;
  static __m512 load(const uint16_t* p) { return _mm512_castsi512_ps(_mm512_load_si512(p)); }
  static __m512 madd(__m512 acc, __m512 x, __m512 w) {
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
  using Fn = void (*)(const typename D::T*, int64_t, const typename D::T*, int64_t, int64_t, __m128*);
  static constexpr Fn kTiles[kMR + 1] = {nullptr,      tile<D, 1>, tile<D, 2>, tile<D, 3>,
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

// --- loop nest --------------------------------------------------------------------------

struct Plan {  // one call, shared read-only by the threads
  GemmShape sh;
  WeightSrc src;
  const void* xb;  // [M, kp] prepared activations
  int64_t kp;      // K rounded up to 32
  int64_t kc;      // columns per block (a multiple of 32)
  int64_t panel;   // weight rows per block
  float* y;
  bool accumulate;
  bool decode;
};

template <WeightFormat F, class D>
void run_block(const Plan& pl, int64_t n0, int rows, int64_t k0, typename D::T* wbuf) {
  using T = typename D::T;
  const int64_t kc = std::min(pl.kc, pl.kp - k0);
  const int rows_pad = (rows + kNR - 1) / kNR * kNR;
  dequant_panel<F>(pl.src, n0, rows, rows_pad, k0, kc, wbuf);
  const T* xb = static_cast<const T*>(pl.xb);
  const bool add = pl.accumulate || k0 > 0;
  for (int64_t m0 = 0; m0 < pl.sh.m; m0 += kMR) {
    const int mr = static_cast<int>(std::min<int64_t>(kMR, pl.sh.m - m0));
    for (int t = 0; t < rows; t += kNR) {
      __m128 out[kMR];
      run_tile<D>(mr, xb + m0 * pl.kp + k0, pl.kp, wbuf + t * kc, kc, kc, out);
      store_tile(out, mr, std::min(kNR, rows - t), pl.y + m0 * pl.sh.ldy + n0 + t, pl.sh.ldy, add);
    }
  }
}

template <WeightFormat F, class D>
void run_range(const Plan& pl, int64_t nb, int64_t ne) {
  typename D::T* wbuf = t_wbuf.get<typename D::T>(pl.panel * pl.kc);
  auto rows = [&](int64_t n0) { return static_cast<int>(std::min(pl.panel, ne - n0)); };
  if (pl.decode) {
    for (int64_t n0 = nb; n0 < ne; n0 += pl.panel)
      for (int64_t k0 = 0; k0 < pl.kp; k0 += pl.kc) run_block<F, D>(pl, n0, rows(n0), k0, wbuf);
  } else {
    for (int64_t k0 = 0; k0 < pl.kp; k0 += pl.kc)
      for (int64_t n0 = nb; n0 < ne; n0 += pl.panel) run_block<F, D>(pl, n0, rows(n0), k0, wbuf);
  }
}

template <class D>
void run_format(const Plan& pl, WeightFormat f) {
  const int64_t chunk = gemm_min_chunk(pl.sh, kNR);
  parallel_for(pl.sh.n, chunk, [&](int64_t nb, int64_t ne) {
    switch (f) {
      case WeightFormat::F32: return run_range<WeightFormat::F32, D>(pl, nb, ne);
      case WeightFormat::BF16: return run_range<WeightFormat::BF16, D>(pl, nb, ne);
      case WeightFormat::FP8: return run_range<WeightFormat::FP8, D>(pl, nb, ne);
      case WeightFormat::FP4: return run_range<WeightFormat::FP4, D>(pl, nb, ne);
      case WeightFormat::ROWFP8: return run_range<WeightFormat::ROWFP8, D>(pl, nb, ne);
    }
  });
}

template <class D>
void run(const GemmParams& p, const GemmShape& sh, bool round_x) {
  using T = typename D::T;
  Plan pl{sh, weight_src(p.w), nullptr, (sh.k + 31) / 32 * 32, kChunkBytes / int64_t{sizeof(T)},
          sh.m <= kDecodeMaxM ? kNR : kPrefillPanel, p.y, p.accumulate, sh.m <= kDecodeMaxM};
  T* xb = t_xbuf.get<T>(sh.m * pl.kp);
  prepare_x(sh, p.x, p.w.format == WeightFormat::FP4, round_x, xb, pl.kp);
  pl.xb = xb;
  run_format<D>(pl, p.w.format);
}

}  // namespace

void gemm_avx512(const GemmParams& p, bool use_bf16_dot) {
  const GemmShape sh = gemm_shape(p);
  if (sh.m == 0 || sh.n == 0) return;
  if (sh.k == 0) {  // empty sums
    if (!p.accumulate)
      for (int64_t m = 0; m < sh.m; ++m) std::fill(p.y + m * sh.ldy, p.y + m * sh.ldy + sh.n, 0.0f);
    return;
  }
  const bool bf16 = p.precision == GemmPrecision::Bf16;
  // F32-format weights are not bf16 values, and Bf16 rounds only activations, so they
  // take the f32 kernel on rounded activations, as does a CPU without AVX512_BF16.
  if (bf16 && use_bf16_dot && p.w.format != WeightFormat::F32) return run<Bf16Dot>(p, sh, true);
  run<F32Dot>(p, sh, bf16);
}

}  // namespace troupe::kernels::cpu
