#include "model/gguf_dequant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/check.h"
#include "kernels/quant.h"

namespace troupe::model {
namespace {

constexpr int64_t kBlock = 32;

uint16_t load_u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
void store_u16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

void dequant_q8_0(const uint8_t* src, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kBlock; ++b, src += 34, out += kBlock) {
    const float d = f16_to_f32(load_u16(src));
    for (int64_t i = 0; i < kBlock; ++i) out[i] = d * static_cast<float>(static_cast<int8_t>(src[2 + i]));
  }
}

void dequant_q4_0(const uint8_t* src, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kBlock; ++b, src += 18, out += kBlock) {
    const float d = f16_to_f32(load_u16(src));
    for (int64_t i = 0; i < kBlock / 2; ++i) {
      out[i] = d * static_cast<float>((src[2 + i] & 0x0F) - 8);
      out[i + 16] = d * static_cast<float>((src[2 + i] >> 4) - 8);
    }
  }
}

void dequant_mxfp4(const uint8_t* src, int64_t n, float* out) {
  const float* e2m1 = kernels::e2m1_table();
  for (int64_t b = 0; b < n / kBlock; ++b, src += 17, out += kBlock) {
    const float s = kernels::ue8m0_decode(src[0]);
    for (int64_t i = 0; i < kBlock / 2; ++i) {
      out[i] = e2m1[src[1 + i] & 0x0F] * s;
      out[i + 16] = e2m1[src[1 + i] >> 4] * s;
    }
  }
}

}  // namespace

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  uint32_t bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);  // inf / NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {
    // Subnormal half: mant * 2^-24, exact in f32 (a normal there).
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return sign ? -v : v;
  }
  return std::bit_cast<float>(bits);
}

uint16_t f32_to_f16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const float a = std::fabs(x);
  if (std::isnan(x)) return static_cast<uint16_t>(sign | 0x7E00);
  if (a >= 65520.0f) return static_cast<uint16_t>(sign | 0x7C00);  // rounds to inf
  if (a < 0x1p-14f) {
    // Subnormal range: units of 2^-24, nearbyint rounds half to even.
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(a * 0x1p24f)));
  }
  const uint32_t ab = std::bit_cast<uint32_t>(a);
  uint32_t h = ((ab >> 23) - 112) << 10 | ((ab >> 13) & 0x3FF);
  const uint32_t rest = ab & 0x1FFF;
  if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

void dequantize_ggml(GgmlType type, const uint8_t* src, int64_t n, float* out) {
  // A tensor with a zero dimension has no bytes and its f32 buffer may be null (memcpy
  // with a null pointer is undefined even for 0 bytes: found by the gguf fuzz target).
  if (n == 0) return;
  switch (type) {
    case GgmlType::F32:
      std::memcpy(out, src, static_cast<size_t>(n) * 4);
      return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(load_u16(src + 2 * i));
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = kernels::bf16_decode(load_u16(src + 2 * i));
      return;
    case GgmlType::Q8_0:
      TROUPE_CHECK(n % kBlock == 0, "dequantize_ggml: Q8_0 count ", n, " is not a multiple of 32");
      return dequant_q8_0(src, n, out);
    case GgmlType::Q4_0:
      TROUPE_CHECK(n % kBlock == 0, "dequantize_ggml: Q4_0 count ", n, " is not a multiple of 32");
      return dequant_q4_0(src, n, out);
    case GgmlType::MXFP4:
      TROUPE_CHECK(n % kBlock == 0, "dequantize_ggml: MXFP4 count ", n, " is not a multiple of 32");
      return dequant_mxfp4(src, n, out);
  }
  TROUPE_FAIL("dequantize_ggml: unsupported type " << static_cast<uint32_t>(type));
}

void quantize_q8_0(const float* x, int64_t n, uint8_t* out) {
  TROUPE_CHECK(n % kBlock == 0, "quantize_q8_0: count ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 34) {
    float amax = 0;
    for (int64_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const uint16_t dh = f32_to_f16(amax / 127.0f);
    const float d = f16_to_f32(dh);
    store_u16(out, dh);
    for (int64_t i = 0; i < kBlock; ++i) {
      const float q = d == 0.0f ? 0.0f : std::nearbyint(x[i] / d);
      out[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f)));
    }
  }
}

void quantize_q4_0(const float* x, int64_t n, uint8_t* out) {
  TROUPE_CHECK(n % kBlock == 0, "quantize_q4_0: count ", n, " is not a multiple of 32");
  for (int64_t b = 0; b < n / kBlock; ++b, x += kBlock, out += 18) {
    float m = 0;
    for (int64_t i = 0; i < kBlock; ++i)
      if (std::fabs(x[i]) > std::fabs(m)) m = x[i];
    const uint16_t dh = f32_to_f16(m / -8.0f);
    const float d = f16_to_f32(dh);
    store_u16(out, dh);
    auto code = [&](float v) {
      const float q = d == 0.0f ? 8.0f : std::nearbyint(v / d) + 8.0f;
      return static_cast<uint8_t>(std::clamp(q, 0.0f, 15.0f));
    };
    for (int64_t i = 0; i < kBlock / 2; ++i)
      out[2 + i] = static_cast<uint8_t>(code(x[i]) | (code(x[i + 16]) << 4));
  }
}

}  // namespace troupe::model
