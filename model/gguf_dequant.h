// Dequantization of the GGUF tensor types troupe reads, to f32, exactly as the formats
// define them (one block = 32 values unless noted):
//   F16, BF16  IEEE half / bfloat16 -> f32 (exact, both are subsets of f32)
//   Q8_0       { f16 d; int8 q[32] }           x[i] = d * q[i]
//   Q4_0       { f16 d; uint8 qs[16] }         x[i] = d * ((qs[i] & 15) - 8),
//                                              x[i+16] = d * ((qs[i] >> 4) - 8), i < 16
//   MXFP4      { u8 e; uint8 qs[16] }          x[i] = E2M1(qs[i] & 15) * 2^(e-127),
//                                              x[i+16] = E2M1(qs[i] >> 4) * 2^(e-127)
// d * q is one f32 product of the f32 value of d and the small integer, so the result is
// bit-exact for every input.
#pragma once

#include <cstdint>

#include "model/gguf_types.h"

namespace troupe::model {

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float x);  // round to nearest even; overflow -> inf; NaN stays NaN

// n values (a multiple of the type's block) from src to out.
void dequantize_ggml(GgmlType type, const uint8_t* src, int64_t n, float* out);

// The writer's quantizers (tests and bench files; llama.cpp's rounding is not promised,
// only that dequantize_ggml of the result is the stored value).
//   Q8_0: d = amax / 127, q = round(x / d).
//   Q4_0: d = -m / 8 with m the value of largest magnitude (its sign kept), so m is -8·d
//         exactly; q = clamp(round(x / d) + 8, 0, 15).
void quantize_q8_0(const float* x, int64_t n, uint8_t* out);
void quantize_q4_0(const float* x, int64_t n, uint8_t* out);

}  // namespace troupe::model
