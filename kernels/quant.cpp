// Number formats of MODEL.md §3, bit exact. Everything is scalar: encoders work on
// the IEEE f32 bits or on exact power-of-two rescalings followed by one
// round-to-nearest-even (std::nearbyint under the default rounding mode), so no step
// rounds twice.
#include "kernels/quant.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cfloat>
#include <cmath>

#include "kernels/check.h"

namespace troupe::kernels {

namespace {

constexpr float kE4m3Max = 448.0f;
constexpr float kE2m1Max = 6.0f;

float e4m3_value(uint8_t code) {
  const float sign = (code & 0x80) ? -1.0f : 1.0f;
  const int e = (code >> 3) & 0xF;
  const int m = code & 0x7;
  if (e == 0xF && m == 0x7) return std::copysign(NAN, sign);
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -9);  // 2^-6 · m/8
  return sign * std::ldexp(static_cast<float>(8 + m), e - 10);      // 2^(e-7) · (8+m)/8
}

constexpr std::array<float, 8> kE2m1Magnitudes = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// Magnitude code of E4M3 for a finite a in [0, 448).
uint8_t e4m3_encode_magnitude(float a) {
  if (a < 0x1p-6f) {
    // Subnormal range, step 2^-9; m = 8 lands on the minimum normal, whose code is 8.
    return static_cast<uint8_t>(std::nearbyint(a * 512.0f));
  }
  // Normal: keep the top 3 of the 23 mantissa bits, round the other 20 to nearest even.
  // Codes are monotonic in value, so a mantissa carry moves into the exponent field.
  const uint32_t bits = std::bit_cast<uint32_t>(a);
  const uint32_t exp = (bits >> 23) - 127 + 7;  // E4M3 biased exponent, 1..15
  const uint32_t mant = bits & 0x7FFFFF;
  const uint32_t base = (exp << 3) | (mant >> 20);
  const uint32_t rest = mant & 0xFFFFF;
  const bool up = rest > 0x80000 || (rest == 0x80000 && (base & 1));
  return static_cast<uint8_t>(base + (up ? 1 : 0));
}

// Magnitude code of E2M1 for a in [0, 6]. Each piece of the grid has a uniform step
// and starts at an even code index, so RNE on the step count is "ties to even code".
uint8_t e2m1_encode_magnitude(float a) {
  if (a <= 2.0f) return static_cast<uint8_t>(std::nearbyint(a * 2.0f));      // codes 0..4
  if (a <= 4.0f) return static_cast<uint8_t>(4 + std::nearbyint(a - 2.0f));  // codes 4..6
  return static_cast<uint8_t>(6 + std::nearbyint((a - 4.0f) * 0.5f));        // codes 6..7
}

float abs_max(const float* x, int64_t n) {
  float m = 0.0f;
  for (int64_t i = 0; i < n; ++i) m = std::max(m, std::fabs(x[i]));  // NaN is skipped
  return m;
}

// UE8M0 code of pow2ceil(max(amax, floor) / qmax), the power-of-two scale rule
// shared by fp8_ue8m0, mxfp4 and the checkpoint weight quantizers.
uint8_t pow2_scale_code(float amax, float floor, float qmax) {
  return pow2ceil_ue8m0(std::max(amax, floor) / qmax);
}

// q[i] = E4M3(clamp(x[i]/s, ±448)); the encoder saturates, which is the clamp.
void encode_e4m3_scaled(const float* x, int64_t n, float s, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = e4m3_encode(x[i] / s);
}

// Packed E2M1 of clamp(x/s, ±6), even element in the low nibble; n is even.
void encode_e2m1_scaled(const float* x, int64_t n, float s, uint8_t* q) {
  for (int64_t i = 0; i < n; i += 2) {
    q[i / 2] = static_cast<uint8_t>(e2m1_encode(x[i] / s) | (e2m1_encode(x[i + 1] / s) << 4));
  }
}

void decode_e4m3_scaled(const uint8_t* q, int64_t n, float s, float* out) {
  const float* t = e4m3_table();
  for (int64_t i = 0; i < n; ++i) out[i] = t[q[i]] * s;
}

void decode_e2m1_scaled(const uint8_t* q, int64_t n, float s, float* out) {
  const float* t = e2m1_table();
  for (int64_t i = 0; i < n; i += 2) {
    out[i] = t[q[i / 2] & 0xF] * s;
    out[i + 1] = t[q[i / 2] >> 4] * s;
  }
}

void check_block_args(const void* x, int64_t n, int64_t block, const void* q, const void* scale,
                      const char* fn) {
  TROUPE_CHECK(n >= 0 && n % block == 0, fn, ": n (", n, ") must be a multiple of ", block);
  TROUPE_CHECK(n == 0 || (x && q && scale), fn, ": null input, codes or scale pointer");
}

}  // namespace

// --- scalar codecs ---------------------------------------------------------------------

uint8_t e4m3_encode(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0x00;
  if (std::isnan(x)) return sign | 0x7F;
  const float a = std::fabs(x);
  if (a >= kE4m3Max) return sign | 0x7E;  // saturate, ±Inf included
  return sign | e4m3_encode_magnitude(a);
}

float e4m3_decode(uint8_t code) {
  return e4m3_table()[code];
}

uint8_t e2m1_encode(float x) {
  const uint8_t sign = std::signbit(x) ? 0x8 : 0x0;
  if (std::isnan(x)) return sign;
  return sign | e2m1_encode_magnitude(std::min(std::fabs(x), kE2m1Max));
}

float e2m1_decode(uint8_t code) {
  return e2m1_table()[code & 0xF];
}

float ue8m0_decode(uint8_t code) {
  if (code == 0xFF) return NAN;
  // e = 0 is 2^-127: the f32 subnormal with only mantissa bit 22 set.
  return std::bit_cast<float>(code == 0 ? 0x00400000u : static_cast<uint32_t>(code) << 23);
}

uint8_t pow2ceil_ue8m0(float v) {
  TROUPE_CHECK(v >= FLT_MIN || std::isnan(v),
               "pow2ceil_ue8m0: v must be a positive normal f32, got ", v);
  const uint32_t bits = std::bit_cast<uint32_t>(v);
  const uint32_t biased = (bits >> 23) & 0xFF;
  if (biased == 0xFF) return 0xFF;  // Inf / NaN: no scale exists; NaN propagates on dequant
  // biased 254 with a non-zero mantissa gives 255: 2^128 is not a UE8M0 value either.
  return static_cast<uint8_t>(biased + ((bits & 0x7FFFFF) != 0 ? 1 : 0));
}

uint16_t bf16_encode(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if (std::isnan(x)) return static_cast<uint16_t>((bits >> 16) | 0x0040);  // keep it quiet
  const uint32_t rounding = 0x7FFF + ((bits >> 16) & 1);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_decode(uint16_t bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(bits) << 16);
}

const float* e4m3_table() {
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int c = 0; c < 256; ++c) t[c] = e4m3_value(static_cast<uint8_t>(c));
    return t;
  }();
  return table.data();
}

const float* e2m1_table() {
  static const std::array<float, 16> table = [] {
    std::array<float, 16> t{};
    for (int c = 0; c < 16; ++c) t[c] = (c & 0x8 ? -1.0f : 1.0f) * kE2m1Magnitudes[c & 0x7];
    return t;
  }();
  return table.data();
}

// --- activation / cache quantizers -------------------------------------------------------

void quantize_fp8_ue8m0(const float* x, int64_t n, uint8_t* q, uint8_t* scale) {
  check_block_args(x, n, 32, q, scale, "quantize_fp8_ue8m0");
  for (int64_t b = 0; b < n / 32; ++b) {
    scale[b] = pow2_scale_code(abs_max(x + b * 32, 32), 1e-4f, kE4m3Max);
    encode_e4m3_scaled(x + b * 32, 32, ue8m0_decode(scale[b]), q + b * 32);
  }
}

void dequantize_fp8_ue8m0(const uint8_t* q, const uint8_t* scale, int64_t n, float* out) {
  check_block_args(out, n, 32, q, scale, "dequantize_fp8_ue8m0");
  for (int64_t b = 0; b < n / 32; ++b) {
    decode_e4m3_scaled(q + b * 32, 32, ue8m0_decode(scale[b]), out + b * 32);
  }
}

void quantize_nvfp4(const float* x, int64_t n, uint8_t* q, uint8_t* scale) {
  check_block_args(x, n, 16, q, scale, "quantize_nvfp4");
  for (int64_t b = 0; b < n / 16; ++b) {
    const float amax = std::max(abs_max(x + b * 16, 16), 6.0f * 0x1p-9f);
    scale[b] = e4m3_encode(amax / kE2m1Max);  // RNE, may round down (§3: intended)
    encode_e2m1_scaled(x + b * 16, 16, e4m3_decode(scale[b]), q + b * 8);
  }
}

void dequantize_nvfp4(const uint8_t* q, const uint8_t* scale, int64_t n, float* out) {
  check_block_args(out, n, 16, q, scale, "dequantize_nvfp4");
  for (int64_t b = 0; b < n / 16; ++b) {
    decode_e2m1_scaled(q + b * 8, 16, e4m3_decode(scale[b]), out + b * 16);
  }
}

void quantize_mxfp4(const float* x, int64_t n, uint8_t* q, uint8_t* scale) {
  check_block_args(x, n, 32, q, scale, "quantize_mxfp4");
  for (int64_t b = 0; b < n / 32; ++b) {
    scale[b] = pow2_scale_code(abs_max(x + b * 32, 32), 6.0f * 0x1p-126f, kE2m1Max);
    encode_e2m1_scaled(x + b * 32, 32, ue8m0_decode(scale[b]), q + b * 16);
  }
}

void dequantize_mxfp4(const uint8_t* q, const uint8_t* scale, int64_t n, float* out) {
  check_block_args(out, n, 32, q, scale, "dequantize_mxfp4");
  for (int64_t b = 0; b < n / 32; ++b) {
    decode_e2m1_scaled(q + b * 16, 32, ue8m0_decode(scale[b]), out + b * 32);
  }
}

// Fake quantization works block by block through a small stack buffer: quantize one
// block, dequantize it back in place.
namespace {
using QuantizeFn = void (*)(const float*, int64_t, uint8_t*, uint8_t*);
using DequantizeFn = void (*)(const uint8_t*, const uint8_t*, int64_t, float*);

void fake_quant_blocks(float* x, int64_t n, int64_t block, QuantizeFn quantize,
                       DequantizeFn dequantize, const char* name) {
  check_block_args(x, n, block, x, x, name);
  uint8_t q[32], s[1];  // block <= 32 codes of <= 1 byte, one scale
  for (int64_t b = 0; b < n; b += block) {
    quantize(x + b, block, q, s);
    dequantize(q, s, block, x + b);
  }
}
}  // namespace

void fake_quant_fp8_ue8m0(float* x, int64_t n) {
  fake_quant_blocks(x, n, 32, quantize_fp8_ue8m0, dequantize_fp8_ue8m0, "fake_quant_fp8_ue8m0");
}

void fake_quant_nvfp4(float* x, int64_t n) {
  fake_quant_blocks(x, n, 16, quantize_nvfp4, dequantize_nvfp4, "fake_quant_nvfp4");
}

void fake_quant_mxfp4(float* x, int64_t n) {
  fake_quant_blocks(x, n, 32, quantize_mxfp4, dequantize_mxfp4, "fake_quant_mxfp4");
}

// --- checkpoint-writer weight quantizers ------------------------------------------------

namespace {

constexpr float kWeightAmaxFloor = 0x1p-100f;

void check_weight_args(const float* w, int64_t rows, int64_t cols, const uint8_t* q,
                       const uint8_t* scale, int64_t col_multiple, const char* fn) {
  TROUPE_CHECK(rows >= 0 && cols >= 0, fn, ": negative shape [", rows, ", ", cols, "]");
  TROUPE_CHECK(cols % col_multiple == 0, fn, ": cols (", cols, ") must be a multiple of ",
               col_multiple);
  TROUPE_CHECK(rows * cols == 0 || (w && q && scale), fn, ": null w, q or scale pointer");
}

}  // namespace

void quantize_weight_fp8(const float* w, int64_t rows, int64_t cols, uint8_t* q, uint8_t* scale) {
  check_weight_args(w, rows, cols, q, scale, 1, "quantize_weight_fp8");
  const int64_t tile_cols = (cols + 31) / 32;
  for (int64_t r0 = 0; r0 < rows; r0 += 32) {
    const int64_t nr = std::min<int64_t>(32, rows - r0);
    for (int64_t c0 = 0; c0 < cols; c0 += 32) {
      const int64_t nc = std::min<int64_t>(32, cols - c0);
      float amax = 0.0f;
      for (int64_t r = r0; r < r0 + nr; ++r) amax = std::max(amax, abs_max(w + r * cols + c0, nc));
      uint8_t& code = scale[(r0 / 32) * tile_cols + c0 / 32];
      code = pow2_scale_code(amax, kWeightAmaxFloor, kE4m3Max);
      const float s = ue8m0_decode(code);
      for (int64_t r = r0; r < r0 + nr; ++r)
        encode_e4m3_scaled(w + r * cols + c0, nc, s, q + r * cols + c0);
    }
  }
}

void quantize_weight_fp4(const float* w, int64_t rows, int64_t cols, uint8_t* q, uint8_t* scale) {
  check_weight_args(w, rows, cols, q, scale, 32, "quantize_weight_fp4");
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    scale[b] = pow2_scale_code(abs_max(w + b * 32, 32), kWeightAmaxFloor, kE2m1Max);
    encode_e2m1_scaled(w + b * 32, 32, ue8m0_decode(scale[b]), q + b * 16);
  }
}

void quantize_weight_rowfp8(const float* w, int64_t rows, int64_t cols, uint8_t* q,
                            uint8_t* scale) {
  check_weight_args(w, rows, cols, q, scale, 32, "quantize_weight_rowfp8");
  for (int64_t b = 0; b < rows * cols / 32; ++b) {
    scale[b] = pow2_scale_code(abs_max(w + b * 32, 32), kWeightAmaxFloor, kE4m3Max);
    encode_e4m3_scaled(w + b * 32, 32, ue8m0_decode(scale[b]), q + b * 32);
  }
}

}  // namespace troupe::kernels
