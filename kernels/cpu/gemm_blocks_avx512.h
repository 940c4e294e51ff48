// Weight decoding for the AVX-512 GEMM (kernels/cpu/gemm_avx512.cpp only; it needs the
// AVX-512 compile flags): 32 columns of one stored weight row -> two f32 vectors, exact
// (MODEL.md §3), in a few instructions per format.
//
// Each format yields its 32 columns in the order that is cheapest to decode, and the
// activations are permuted the same way (ColOrder, used by prepare_x), so every dot
// product is unchanged - it does not care about the order of its terms:
//   Natural (F32, F16)  lo = columns 0..15, hi = 16..31 (vcvtph2ps widens 16 halves in
//           order, so F16 decodes into F32's order and sums as F32 weights do)
//   EvenOdd (BF16, FP8, ROWFP8, FP4)  lo = even columns 0, 2, .., 30; hi = odd columns.
//           Two 16-bit (or 4-bit) values share each 32-bit lane, so a shift or a mask
//           splits them without a shuffle (shuffles are the scarce ports on Zen 4).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12 intrinsic-header warnings
#include "kernels/cpu/gemm_weight_src.h"
#include "kernels/quant.h"
#include "kernels/weights.h"

// These sit in the innermost loops; GCC does not always inline functions returning
// several vectors, and a call per 32 columns cost ~40% of decode time.
#define GEMM_INLINE inline __attribute__((always_inline))

namespace troupe::kernels::cpu::gemm_blocks {

enum class ColOrder : uint8_t { Natural, EvenOdd };

constexpr ColOrder col_order(WeightFormat f) {
  return f == WeightFormat::F32 || f == WeightFormat::F16 ? ColOrder::Natural : ColOrder::EvenOdd;
}

struct Block32 {
  __m512 lo, hi;  // 32 columns in the format's ColOrder
};

// Columns [0, valid) of a 32-column block.
GEMM_INLINE __mmask32 columns_below(int64_t valid) {
  return valid >= 32 ? ~__mmask32{0} : (__mmask32{1} << valid) - 1;
}

// 32 bf16 values (16-bit lanes) -> f32, EvenOdd order: a bf16 is the upper half of its f32.
GEMM_INLINE Block32 bf16x32_to_f32(__m512i h) {
  return {
      _mm512_castsi512_ps(_mm512_slli_epi32(h, 16)),
      _mm512_castsi512_ps(_mm512_and_si512(h, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))))};
}

// 32 E4M3 codes -> f32 up to a factor 2^120, EvenOdd order. Each code is sign-extended
// to 16 bits, two per 32-bit lane; shifting a lane left by 20 (even code) or 4 (odd
// code) and masking leaves that code's sign in bit 31 and its 7 magnitude bits in bits
// 26..20. That f32 (exponent field e, mantissa m) times 2^120 is exactly the E4M3 value
// 2^(e-7)·(1+m/8), and e = 0 gives the f32 subnormal 2^-126·m/8, i.e. the E4M3
// subnormal 2^-6·m/8. NaN codes 0x7F / 0xFF come out finite; their columns are OR-ed
// into `nan` for the caller to patch.
// e4m3x32_bits: the same without the NaN test, for callers that test the codes apart.
GEMM_INLINE Block32 e4m3x32_bits(__m512i w) {  // w: the codes sign-extended to 16 bits
  const __m512i keep = _mm512_set1_epi32(static_cast<int>(0x87F00000u));
  return {_mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(w, 20), keep)),
          _mm512_castsi512_ps(_mm512_and_si512(_mm512_slli_epi32(w, 4), keep))};
}
GEMM_INLINE Block32 e4m3x32_unscaled(__m256i codes, __mmask32& nan) {
  const __m512i w = _mm512_cvtepi8_epi16(codes);
  nan |= _mm512_cmpeq_epi16_mask(_mm512_and_si512(w, _mm512_set1_epi16(0x7F)),
                                 _mm512_set1_epi16(0x7F));
  return e4m3x32_bits(w);
}

// The UE8M0 scale of an E4M3 block, applied to e4m3x32_unscaled's output exactly. Built
// once per block and scale code, so rows sharing a 32x32 tile look it up once.
struct E4m3Scale {
  bool folded;  // one multiply by 2^120·scale: code·scale's one rounding
  __m512 f;
  GEMM_INLINE E4m3Scale(const WeightSrc& s, uint8_t code)
      : folded(code <= kMaxFoldedScale),
        f(_mm512_set1_ps(code <= kMaxFoldedScale ? s.e4m3_scale[code] : s.ue8m0[code])) {}
  GEMM_INLINE Block32 apply(Block32 b) const {
    if (folded) return {_mm512_mul_ps(b.lo, f), _mm512_mul_ps(b.hi, f)};
    // 2^120·scale would overflow: the exact 2^120 first, then the scale.
    const __m512 big = _mm512_set1_ps(0x1p120f);
    return {_mm512_mul_ps(_mm512_mul_ps(b.lo, big), f), _mm512_mul_ps(_mm512_mul_ps(b.hi, big), f)};
  }
};

// Columns kb..kb+31 of row r as f32 in col_order(F); columns outside `valid` read as 0
// (FP4 has whole blocks only: K % 32 == 0). FP8/ROWFP8 NaN codes decode to finite
// values and set their bit in `nan` (natural column order); callers patch them.
template <WeightFormat F>
GEMM_INLINE Block32 load_block(const WeightSrc& s, int64_t r, int64_t kb, __mmask32 valid,
                               __mmask32& nan) {
  const uint8_t* row = s.data + r * s.row_bytes;
  if constexpr (F == WeightFormat::F32) {
    const float* p = reinterpret_cast<const float*>(row) + kb;
    return {_mm512_maskz_loadu_ps(static_cast<__mmask16>(valid), p),
            _mm512_maskz_loadu_ps(static_cast<__mmask16>(valid >> 16), p + 16)};
  } else if constexpr (F == WeightFormat::BF16) {
    return bf16x32_to_f32(
        _mm512_maskz_loadu_epi16(valid, reinterpret_cast<const uint16_t*>(row) + kb));
  } else if constexpr (F == WeightFormat::F16) {
    // Two 16-half loads rather than one of 32 and an extract: no shuffle port.
    // vcvtph2ps is exact, subnormal halves included (GemmPath.F16DecodesEveryCodeExactly).
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + kb;
    return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(valid), p)),
            _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(valid >> 16), p + 16))};
  } else if constexpr (F == WeightFormat::FP4) {
    const __m512 table = _mm512_load_ps(s.fp4_scaled + 16 * s.scale[r * s.scale_ld + kb / 32]);
    const __m512i codes =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + kb / 2)));
    // vpermps reads only the low 4 index bits: the low nibble, then (after >> 4) the high.
    return {_mm512_permutexvar_ps(codes, table),
            _mm512_permutexvar_ps(_mm512_srli_epi32(codes, 4), table)};
  } else {  // FP8 (32x32 scale tiles) or ROWFP8 (scale per 32 columns of a row)
    const int64_t scale_row = F == WeightFormat::FP8 ? r / 32 : r;
    const uint8_t code = s.scale[scale_row * s.scale_ld + kb / 32];
    const __m256i codes = _mm256_maskz_loadu_epi8(valid, row + kb);
    return E4m3Scale(s, code).apply(e4m3x32_unscaled(codes, nan));
  }
}

// Rare path for a buffered row segment whose codes held NaN (0x7F / 0xFF). A NaN weight
// makes every dot product with its row NaN whatever x holds (NaN·0 is NaN), so one NaN
// in the segment reproduces the reference exactly.
template <class T>
void poison_row_segment(T* out) {
  if constexpr (sizeof(T) == 2) {
    *out = 0x7FC0;  // bf16 quiet NaN
  } else {
    *out = NAN;
  }
}

GEMM_INLINE void store_block(float* o, Block32 b) {
  _mm512_store_ps(o, b.lo);
  _mm512_store_ps(o + 16, b.hi);
}

// bf16 copy of a block whose values are already bf16 values (weights of every format
// but F32 and F16; activations after round_to_bf16), so the conversion is exact.
GEMM_INLINE void store_block(uint16_t* o, Block32 b) {
  _mm512_store_si512(o, (__m512i)_mm512_cvtne2ps_pbh(b.hi, b.lo));
}

}  // namespace troupe::kernels::cpu::gemm_blocks
