// cpu::gemm_q8: the Q8_0 / Q4_0 GEMM of kernels/ggml_blocks.h on int8 dot products, and
// FP4 weights the same way under GemmPrecision::Int8 (kernels/gemm.h), for cpu::gemm. The
// activations are quantized once per call (on the kernel's path: portable C++, AVX2 or
// AVX-512, each checked bit for bit against ref::quantize_row_q8; gemm_q8_shared_x once
// for several weights over the same x), then threads take disjoint output-column ranges
// and run one of three range kernels, picked per weight by CPU features:
//
//   AVX-512 VNNI  vpdpbusd on two blocks per zmm        (gemm_q8_avx512.cpp)
//   AVX2          vpmaddubsw + vpmaddwd, one block per ymm (gemm_q8_avx2.cpp)
//   portable      plain loops the compiler vectorises     (gemm_q8.cpp)
//
// FP4 blocks become int8 by a 16-entry table (2 · E2M1: 0, 1, 2, 3, 4, 6, 8, 12 and their
// negatives; vpshufb in the SIMD kernels), their scale 2^(e - 128), and then run as
// Q8_0 blocks do; the SIMD kernels take the activations in fp4_order (below), so a
// block's nibbles need no interleaving. With M >= kPackedMinRows (a prefill) the AVX-512 VNNI kernel is the packed one
// (gemm_q8_packed_avx512.cpp): each thread repacks 32 weight rows at a time into a panel
// of 16-column x 4-byte interleaved u8 chunks, and 6 x 32 register tiles run vpdpbusd
// with the activation bytes broadcast; its f32 steps are the reference's (bit for bit).
// A weight regrouped at load time (WeightView::groups, kernels/q8_row_groups.h; Q8_0,
// Q4_0 and FP4) runs a row-group kernel at any M, on AVX-512 VNNI (gemm_q8_groups_avx512.cpp: decode tiles up
// to kGroupsDecodeMaxRows rows, the packed kernel's 6 x 32 tiles above) and on AVX2
// (gemm_q8_groups_avx2.cpp): the same products on the codes as the loader laid them
// out, no per-call packing, also bit for bit the reference. On a CPU with AMX-INT8 a
// prefill's row groups run on the tile unit instead (gemm_q8_groups_amx.cpp: a block's
// codes are already the B tile's layout; the same f32 steps, bit for bit).
// The quantizer runs on the pool's threads (rows split between them).
//
// Each range kernel walks tiles of MR activation rows x NR weight rows
// (gemm_q8_tiles.h); a tile reads its NR weight rows' blocks once for all MR rows, and
// a thread's NR rows stay in L1/L2 while it sweeps the activation rows, so a decode
// (M = 1..64) reads each weight byte from memory once.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/gemm.h"
#include "kernels/ggml_blocks.h"

namespace troupe::kernels::cpu {

struct QGemmArgs {
  Q8Rows x;                  // quantized activations [m, k] (off set for Q4_0)
  WeightFormat format;       // Q8_0, Q4_0 or FP4
  const uint8_t* w;          // weight blocks (FP4: packed E2M1 codes), row r at w + r * row_bytes
  const uint8_t* scale;      // FP4: UE8M0 codes [n, k / 32]; else null (scales are inline)
  const float* scale_value;  // FP4: fp4_int8_scales(), looked up once per call (a call in
                             // a tile's loop would spill every vector register)
  const uint8_t* groups;     // the weight's row groups (kernels/q8_row_groups.h), or null
  int64_t row_bytes;
  float* y;                  // [m, n], row stride ldy
  int64_t ldy;
  bool accumulate;
};

// Quantizes x [m, k] (row stride ldx) to q [m, k], d [m, k / 32], when off is not null
// off [m, k / 32, 8], and when sum is not null sum [m, k / 32] (kernels/ggml_blocks.h's
// Q8Rows). fp4_order: each block's q stored as [even columns | odd columns], the order
// the SIMD kernels unpack FP4 codes in (low nibbles, then high). On the calling thread.
void quantize_rows_q8(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q, float* d,
                      int32_t* off, int32_t* sum = nullptr, bool fp4_order = false);
// The same quantizer on AVX-512 (F/BW/DQ) and on AVX2 (+F16C), bit for bit the portable
// one (the same f32 operations per value); gemm_q8 runs the one of the kernel's path.
void quantize_rows_q8_avx512(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q,
                             float* d, int32_t* off, int32_t* sum, bool fp4_order);
void quantize_rows_q8_avx2(const float* x, int64_t m, int64_t k, int64_t ldx, int8_t* q,
                           float* d, int32_t* off, int32_t* sum, bool fp4_order);

// 2 · E2M1(code) for the 16 FP4 codes (bit 3 the sign; code 8 is -0 -> 0), and
// 2^(e - 127) / 2 for the 256 UE8M0 codes (e = 255: NaN), the factors of an FP4 block
// on int8: E2M1(c) · 2^(e - 127) = kFp4Int8[c] · fp4_int8_scales()[e], exactly.
inline constexpr int8_t kFp4Int8[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
const float* fp4_int8_scales();

// Four activation bytes as one int32: the operand the int8 dot kernels broadcast.
inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return v;
}

// Rows from which the AVX-512 VNNI kernel switches to the packed one.
constexpr int64_t kPackedMinRows = 16;
// Rows up to which the AVX-512 VNNI row-group kernel runs its decode tiles (a decode
// step of up to 64 sequences), and above which its prefill ones. The row-group kernel
// serves every M where the weight has row groups: at decode it was 1.7-2.7x the packed
// kernel's speed at M = 16, and at prefill it is the packed kernel without the repack
// (docs/kernels-bench.md). The AVX2 one has a single tile shape: its row-group kernel
// was 1.3-5x faster than its per-block tiles at every M measured from 1 to 2048, and
// level or faster at 4096 (docs/kernels-bench.md).
constexpr int64_t kGroupsDecodeMaxRows = 64;

// Output columns [n0, n1) of one call, per path.
void gemm_q8_range_portable(const QGemmArgs& a, int64_t n0, int64_t n1);
void gemm_q8_range_avx2(const QGemmArgs& a, int64_t n0, int64_t n1);    // AVX2+FMA+F16C
void gemm_q8_range_avx512(const QGemmArgs& a, int64_t n0, int64_t n1);  // + BW/VL/VNNI
void gemm_q8_range_avx512_packed(const QGemmArgs& a, int64_t n0, int64_t n1);  // needs x.sum; no FP4
// On a.groups (needs x.sum; FP4 too, x in column order); n0 a multiple of 16 (kGroupRows).
void gemm_q8_groups_avx512(const QGemmArgs& a, int64_t n0, int64_t n1);
void gemm_q8_groups_avx2(const QGemmArgs& a, int64_t n0, int64_t n1);  // AVX2+FMA+F16C
// AMX-INT8 tiles on the groups (+ AVX-512 for the f32 steps); the same kernel with the
// tile instructions emulated in C++ (any AVX-512 machine: tests).
void gemm_q8_groups_amx(const QGemmArgs& a, int64_t n0, int64_t n1);
void gemm_q8_groups_amx_emulated(const QGemmArgs& a, int64_t n0, int64_t n1);

// Avx512Vnni takes the row-group kernel at any M when the weight has row groups, else
// the packed kernel from kPackedMinRows rows; Avx2 takes its row-group kernel at any M
// when the weight has row groups, else its per-block tiles.
// Avx512VnniPacked takes the packed one and Avx512VnniGroups the row-group one (where the
// weight has them) at any M; Avx2Groups is Avx2, named apart so the kernel tests can say
// which of its two kernels a case runs. On a CPU with AMX-INT8, Avx512Vnni runs a prefill's
// row groups (M > kGroupsDecodeMaxRows) on the AMX kernel; AmxGroups runs it at any M and
// AmxGroupsEmulated the same kernel with its tile instructions emulated (best_q_kernel()
// never returns these five).
enum class QGemmKernel : uint8_t {
  Portable, Avx2, Avx512Vnni, Avx512VnniPacked, Avx512VnniGroups, Avx2Groups, AmxGroups, AmxGroupsEmulated
};
const char* to_string(QGemmKernel k);
QGemmKernel best_q_kernel();             // for active_cpu_path() and the CPU's features
bool q_kernel_supported(QGemmKernel k);  // false: missing_q_kernel_reason says why
const char* missing_q_kernel_reason(QGemmKernel k);

// The whole call on one kernel (cpu::gemm passes best_q_kernel(); tests pick each).
void gemm_q8(const GemmParams& p, QGemmKernel kernel);
// Several weights against the same x (ps share x, m, ldx; all FP4 or none): x quantized
// once, one fork-join over all the weights' columns; each y as gemm_q8 gives it.
void gemm_q8_shared_x(std::span<const GemmParams> ps, QGemmKernel kernel);
// Independent GEMMs (each its own x, m, weight and y) as gemm_q8 gives each, bit for bit,
// in one fork-join over all their columns; consecutive GEMMs over the same x (and all FP4
// or none) have it quantized once (gemm_q8_shared_x is the case of one x).
void gemm_q8_grouped(std::span<const GemmParams> ps, QGemmKernel kernel);

}  // namespace troupe::kernels::cpu
