// Scalar pieces of kernels/ggml_blocks.h: IEEE half codecs, the exact q8_0 / q4_0 row
// dequantizers, and the reference activation quantizer (the definition the CPU
// kernels' quantizer is tested against bit for bit).
#include "kernels/ggml_blocks.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace troupe::kernels {

// Bit moves, no library call: dequantize_rows decodes every F16 weight through here
// (the portable GEMM path and the reference), so it must be cheap as well as exact.
float f16_decode(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));  // inf, NaN
  // Subnormal (exp 0): mant · 2^-24, an exact product; +-0 keeps its sign.
  if (exp == 0) return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(float(mant) * 0x1p-24f));
  return std::bit_cast<float>(sign | ((exp + (127 - 15)) << 23) | (mant << 13));  // rebias
}

uint16_t f16_encode(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000u);
  const uint32_t mag = bits & 0x7FFFFFFFu;
  if (mag > 0x7F800000u) return sign | 0x7E00u;              // NaN (quiet)
  if (mag >= 0x477FF000u) return sign | 0x7C00u;             // rounds to >= 65520: inf
  if (mag < 0x38800000u) {                                    // below 2^-14: a subnormal half
    // Adding 0.5 puts the half's subnormal ulp (2^-24) at f32's last place; the FPU rounds.
    const float shifted = std::bit_cast<float>(mag) + 0.5f;
    return sign | uint16_t(std::bit_cast<uint32_t>(shifted) - 0x3F000000u);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped bits to even.
  const uint32_t odd = (mag >> 13) & 1u;
  const uint32_t rounded = mag - (uint32_t(127 - 15) << 23) + 0xFFFu + odd;
  return sign | uint16_t(rounded >> 13);
}

void dequant_q8_0_row(const uint8_t* blocks, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const uint8_t* blk = blocks + b * kQ8_0Bytes;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const float d = f16_decode(h);
    const int8_t* q = reinterpret_cast<const int8_t*>(blk + 2);
    for (int i = 0; i < kQBlock; ++i) out[b * kQBlock + i] = d * float(q[i]);
  }
}

void dequant_q4_0_row(const uint8_t* blocks, int64_t cols, float* out) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const uint8_t* blk = blocks + b * kQ4_0Bytes;
    uint16_t h;
    std::memcpy(&h, blk, 2);
    const float d = f16_decode(h);
    float* o = out + b * kQBlock;
    for (int i = 0; i < 16; ++i) {
      o[i] = d * float(int(blk[2 + i] & 0xF) - 8);
      o[i + 16] = d * float(int(blk[2 + i] >> 4) - 8);
    }
  }
}

namespace ref {

void quantize_row_q8(const float* x, int64_t n, int8_t* q, float* d) {
  for (int64_t b = 0; b < n / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0;
    for (int i = 0; i < kQBlock; ++i) amax = std::fmax(amax, std::fabs(xb[i]));
    const float scale = amax / 127.0f;
    const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
    for (int i = 0; i < kQBlock; ++i)
      q[b * kQBlock + i] = q8_code(std::nearbyint(xb[i] * inv));  // default mode: to even
    d[b] = f16_decode(f16_encode(scale));
  }
}

}  // namespace ref

}  // namespace troupe::kernels
