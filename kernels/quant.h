// Number formats of MODEL.md §3, bit exact: E4M3 (FP8 "fn"), E2M1 (FP4), UE8M0
// scales, BF16, and the activation/cache quantizers fp8_ue8m0, nvfp4 and mxfp4.
// Encoders take f32, round to nearest even and saturate as §3 says; the sign of
// zero is kept. Everything here is scalar and exact; vectorised dequant lives with
// the kernels that use it (gemm, attention).
#pragma once

#include <cstdint>

namespace troupe::kernels {

// --- scalar codecs ---------------------------------------------------------------------
uint8_t e4m3_encode(float x);   // RNE over the finite grid, |x| > 448 -> ±448, NaN -> 0x7F|sign
float e4m3_decode(uint8_t code);  // 0x7F / 0xFF -> NaN
uint8_t e2m1_encode(float x);   // 4-bit code (bit3 = sign); ties to even code index
float e2m1_decode(uint8_t code);  // low 4 bits used
float ue8m0_decode(uint8_t code);  // 2^(e-127), e = 0 gives the f32 subnormal 2^-127; 0xFF -> NaN
// pow2ceil(v) of §3 for a positive normal f32 v, returned as its UE8M0 code.
uint8_t pow2ceil_ue8m0(float v);
uint16_t bf16_encode(float x);  // RNE; NaN stays NaN (quiet)
float bf16_decode(uint16_t bits);

// Lookup tables for hot loops: all 256 E4M3 codes and all 16 E2M1 codes as f32.
const float* e4m3_table();   // [256]
const float* e2m1_table();   // [16]

// --- activation / cache quantizers (§3). n must be a multiple of the block. ---------
// fp8_ue8m0, block 32: q[n] E4M3 codes, scale[n/32] UE8M0 codes.
void quantize_fp8_ue8m0(const float* x, int64_t n, uint8_t* q, uint8_t* scale);
void dequantize_fp8_ue8m0(const uint8_t* q, const uint8_t* scale, int64_t n, float* out);
// nvfp4, block 16: q[n/2] packed E2M1 (even channel in the low nibble), scale[n/16] E4M3.
void quantize_nvfp4(const float* x, int64_t n, uint8_t* q, uint8_t* scale);
void dequantize_nvfp4(const uint8_t* q, const uint8_t* scale, int64_t n, float* out);
// mxfp4, block 32: q[n/2] packed E2M1, scale[n/32] UE8M0.
void quantize_mxfp4(const float* x, int64_t n, uint8_t* q, uint8_t* scale);
void dequantize_mxfp4(const uint8_t* q, const uint8_t* scale, int64_t n, float* out);

// Quantize-then-dequantize in place (the model's f32 view of a stored row).
void fake_quant_fp8_ue8m0(float* x, int64_t n);
void fake_quant_nvfp4(float* x, int64_t n);
void fake_quant_mxfp4(float* x, int64_t n);

// --- checkpoint-writer weight quantizers (MODEL.md §2) ------------------------------
// Per scale block: s = pow2ceil(max(amax, 2^-100) / qmax), code = E4M3/E2M1 of
// clamp(w/s, ±qmax); loaders only dequantize (kernels/weights.h). w is [rows, cols].
// FP8: q[rows*cols] E4M3, scale[ceil(rows/32) * ceil(cols/32)] UE8M0 for 32x32 tiles;
// amax of a ragged edge tile is over its real elements (zero padding changes nothing).
void quantize_weight_fp8(const float* w, int64_t rows, int64_t cols, uint8_t* q, uint8_t* scale);
// FP4: q[rows*cols/2] packed E2M1 (even column low nibble), scale[rows*cols/32]; cols % 32 == 0.
void quantize_weight_fp4(const float* w, int64_t rows, int64_t cols, uint8_t* q, uint8_t* scale);
// ROWFP8: q[rows*cols] E4M3, scale[rows*cols/32] per 32 columns of a row; cols % 32 == 0.
void quantize_weight_rowfp8(const float* w, int64_t rows, int64_t cols, uint8_t* q,
                            uint8_t* scale);

}  // namespace troupe::kernels
