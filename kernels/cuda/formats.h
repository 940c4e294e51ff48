// MODEL.md §3 decoders as host/device functions built from bits, for the CUDA kernels:
// no lookup table in device memory, no branch on the code except NaN and subnormals.
// kernels/quant.h (kernels/ggml_blocks.h for halves) holds the definitions;
// tests/kernels/cuda_host_test.cpp checks these against them for every code on the CPU,
// so the device runs the same values.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"
#include "kernels/weights.h"

namespace troupe::kernels::cuda {

// The bits of a 4-byte value as another 4-byte type (memcpy: a register move on both sides).
template <class To, class From>
TROUPE_HD inline To bit_copy(From v) {
  static_assert(sizeof(To) == sizeof(From));
  To t;
  std::memcpy(&t, &v, sizeof t);
  return t;
}
TROUPE_HD inline float float_from_bits(uint32_t bits) { return bit_copy<float>(bits); }
TROUPE_HD inline uint32_t bits_from_float(float f) { return bit_copy<uint32_t>(f); }

// E4M3 "fn": s eeee mmm, bias 7; e = 0 is subnormal (m · 2^-9); 0x7F / 0xFF are NaN.
TROUPE_HD inline float e4m3_value(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80) << 24;
  const uint32_t e = (code >> 3) & 0xF, m = code & 0x7;
  if (e == 0xF && m == 0x7) return float_from_bits(sign | 0x7FC00000u);
  if (e == 0) return float_from_bits(sign | bits_from_float(static_cast<float>(m) * 0x1p-9f));
  return float_from_bits(sign | ((e + 120u) << 23) | (m << 20));  // 2^(e-7) · 1.m
}

// E2M1: s ee m, bias 1; e = 0 is subnormal (m · 0.5). Low 4 bits of code used.
TROUPE_HD inline float e2m1_value(uint8_t code) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x8) << 28;
  const uint32_t e = (code >> 1) & 0x3, m = code & 0x1;
  if (e == 0) return float_from_bits(sign | (m ? 0x3F000000u : 0u));  // ±0.5 or ±0
  return float_from_bits(sign | ((e + 126u) << 23) | (m << 22));      // 2^(e-1) · 1.m
}

// UE8M0: 2^(e-127); e = 0 is the f32 subnormal 2^-127; 0xFF is NaN.
TROUPE_HD inline float ue8m0_value(uint8_t code) {
  if (code == 0xFF) return float_from_bits(0x7FC00000u);
  if (code == 0) return float_from_bits(0x00400000u);
  return float_from_bits(static_cast<uint32_t>(code) << 23);
}

TROUPE_HD inline float bf16_value(uint16_t bits) {
  return float_from_bits(static_cast<uint32_t>(bits) << 16);
}

// IEEE half: s eeeee mmmmmmmmmm, bias 15; e = 0 is subnormal (m · 2^-24); e = 31 inf/NaN.
TROUPE_HD inline float f16_value(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu, m = h & 0x3FFu;
  if (e == 0x1F) return float_from_bits(sign | 0x7F800000u | (m << 13));
  if (e == 0) return float_from_bits(sign | bits_from_float(static_cast<float>(m) * 0x1p-24f));
  return float_from_bits(sign | ((e + 112u) << 23) | (m << 13));  // 2^(e-15) · 1.m
}

// bf16 round-to-nearest-even of x back in f32 (GemmPrecision::Bf16 activations); NaN
// stays a quiet NaN, as kernels/quant.cpp's bf16_encode.
TROUPE_HD inline float round_to_bf16(float x) {
  const uint32_t b = bits_from_float(x);
  if ((b & 0x7FFFFFFFu) > 0x7F800000u) return float_from_bits((b | 0x00400000u) & 0xFFFF0000u);
  const uint32_t rounded = b + 0x7FFFu + ((b >> 16) & 1u);
  return float_from_bits(rounded & 0xFFFF0000u);
}

// W[r, c] of a stored weight, exactly as dequantize_rows() gives it (MODEL.md §2).
TROUPE_HD inline float weight_at(const WeightView& w, int64_t r, int64_t c) {
  switch (w.format) {
    case WeightFormat::F32:
      return static_cast<const float*>(w.data)[r * w.cols + c];
    case WeightFormat::BF16:
      return bf16_value(static_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case WeightFormat::F16:
      return f16_value(static_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case WeightFormat::FP8: {
      const uint8_t q = static_cast<const uint8_t*>(w.data)[r * w.cols + c];
      return e4m3_value(q) * ue8m0_value(w.scale[(r / 32) * ((w.cols + 31) / 32) + c / 32]);
    }
    case WeightFormat::ROWFP8: {
      const uint8_t q = static_cast<const uint8_t*>(w.data)[r * w.cols + c];
      return e4m3_value(q) * ue8m0_value(w.scale[r * (w.cols / 32) + c / 32]);
    }
    case WeightFormat::FP4: {
      const uint8_t q = static_cast<const uint8_t*>(w.data)[r * (w.cols / 2) + c / 2];
      return e2m1_value((c & 1) ? q >> 4 : q & 0xF) * ue8m0_value(w.scale[r * (w.cols / 32) + c / 32]);
    }
    case WeightFormat::Q8_0:  // GGUF blocks: no CUDA path (cuda::gemm refuses them); a NaN
    case WeightFormat::Q4_0:  // here can only fail a check, never pass one
      return float_from_bits(0x7FC00000u);
  }
  return 0.0f;
}

}  // namespace troupe::kernels::cuda
