// GGUF's q8_0 / q4_0 weight blocks as the GEMM reads them in place (WeightFormat::Q8_0,
// Q4_0), and the q8_0 activation rows the integer GEMM multiplies them with.
//
//   weight row r of a [rows, cols] matrix: cols / 32 blocks, back to back, no padding
//     Q8_0  34 bytes { f16 d; int8 q[32] }    w[i]      = d · q[i]
//     Q4_0  18 bytes { f16 d; uint8 qs[16] }  w[i]      = d · ((qs[i] & 15) - 8)
//                                             w[i + 16] = d · ((qs[i] >> 4) - 8), i < 16
//
// Activations are quantized per row and 32-column block as llama.cpp does before its
// vec_dot (its numerics, not MODEL.md's f32 ones):
//   amax = max |x[i]|, d = amax / 127 (f32), id = d ? 1 / d : 0,
//   q[i] = round-to-nearest-even(x[i] · id), stored scale = f16(d) (RNE) as f32.
// A product that is NaN or past int32 (a NaN or infinite x, or id = inf where d is an f32
// subnormal) gives q[i] = -128, as x86's conversion does (its "integer indefinite",
// saturated): every path, the reference included, so none converts out of range.
// The product of one weight block with one activation block is then
//   Q8_0: dw · dx · Σ w.q[i] · x.q[i]          Q4_0: dw · dx · (Σ qs_i · x.q[i] - 8 Σ x.q[i])
// with the integer sums exact; y sums the blocks' products in f32 (the order is the
// path's: tests allow for that, see tests/kernels/gemm_q8_test.cpp).
#pragma once

#include <cstdint>

namespace troupe::kernels {

constexpr int64_t kQBlock = 32;        // values per block
constexpr int64_t kQ8_0Bytes = 34;     // bytes per q8_0 block
constexpr int64_t kQ4_0Bytes = 18;     // bytes per q4_0 block

// IEEE half codecs: the blocks' scales, and WeightFormat::F16 weights (kernels/weights.h).
float f16_decode(uint16_t h);   // exact
uint16_t f16_encode(float x);   // RNE; overflow -> inf; NaN stays NaN

// Dequantizes one stored row of `cols` values (cols % 32 == 0), exactly.
void dequant_q8_0_row(const uint8_t* blocks, int64_t cols, float* out);
void dequant_q4_0_row(const uint8_t* blocks, int64_t cols, float* out);

// Activation rows quantized to q8_0, as the CPU kernels lay them out (one buffer each):
//   q   [m, k]       int8, row stride k
//   d   [m, k / 32]  f32 block scales (f16 values)
//   off [m, k / 32, 8] int32, only when made for Q4_0 weights: -8 · (sum of q over the
//                    4 bytes of each 32-bit lane), so a lane's dot product plus its off is
//                    the lane's share of Σ qs_i · x.q[i] - 8 Σ x.q[i]
//   sum [m, k / 32]  int32, only when made for the packed prefill kernel: Σ q over the block
struct Q8Rows {
  const int8_t* q = nullptr;
  const float* d = nullptr;
  const int32_t* off = nullptr;
  const int32_t* sum = nullptr;
  int64_t m = 0, k = 0;
};

// q[i] of a rounded product r: -128 where r is NaN or past int32, else r saturated.
inline int8_t q8_code(float r) {
  if (!(r >= -2147483648.0f && r < 2147483648.0f)) return -128;
  return static_cast<int8_t>(r < -128.0f ? -128.0f : r > 127.0f ? 127.0f : r);
}

namespace ref {
// The definition above for one row of n values (n % 32 == 0): q[n], d[n / 32].
void quantize_row_q8(const float* x, int64_t n, int8_t* q, float* d);
}  // namespace ref

}  // namespace troupe::kernels
