// Independent scalar definitions of the GGUF number formats (for tests): written from the
// formats' definitions with ldexp and plain arithmetic, sharing no code with
// model/gguf_dequant.cpp, so a bug there cannot hide in both.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace troupe::testing {

// IEEE binary16: sign, 5-bit exponent (bias 15), 10-bit mantissa.
inline float ref_f16(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
  double v;
  if (e == 31) v = m ? NAN : INFINITY;
  else if (e == 0) v = std::ldexp(double(m), -24);
  else v = std::ldexp(1.0 + m / 1024.0, e - 15);
  return static_cast<float>(s ? -v : v);
}

inline uint16_t ref_u16(const uint8_t* p) { return uint16_t(p[0] + 256 * p[1]); }

// q8_0: 34-byte blocks {f16 d, int8 q[32]}, x = d * q (one f32 multiply).
inline std::vector<float> ref_dequant_q8_0(const uint8_t* p, int64_t n) {
  std::vector<float> out;
  for (int64_t b = 0; b < n / 32; ++b, p += 34) {
    const float d = ref_f16(ref_u16(p));
    for (int i = 0; i < 32; ++i) out.push_back(d * float(int8_t(p[2 + i])));
  }
  return out;
}

// q4_0: 18-byte blocks {f16 d, 16 bytes}; byte j holds element j (low nibble) and element
// j + 16 (high nibble); x = d * (nibble - 8).
inline std::vector<float> ref_dequant_q4_0(const uint8_t* p, int64_t n) {
  std::vector<float> out;
  for (int64_t b = 0; b < n / 32; ++b, p += 18) {
    const float d = ref_f16(ref_u16(p));
    float block[32];
    for (int j = 0; j < 16; ++j) {
      block[j] = d * float(int(p[2 + j] % 16) - 8);
      block[j + 16] = d * float(int(p[2 + j] / 16) - 8);
    }
    out.insert(out.end(), block, block + 32);
  }
  return out;
}

// bf16: the top 16 bits of an f32.
inline float ref_bf16(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  static_assert(sizeof f == 4);
  __builtin_memcpy(&f, &bits, 4);
  return f;
}

}  // namespace troupe::testing
