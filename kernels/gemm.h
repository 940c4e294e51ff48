// GEMM: y[M, N] = x[M, K] · Wᵀ, W a stored weight [N, K] in any WeightFormat
// (dequantized on the fly, exactly, to f32). Activations and accumulation are f32
// (MODEL.md §5 numerics); the fast CPU backend may use BF16 dot products only
// behind GemmPrecision::Bf16, which callers opt into explicitly. GGUF block weights
// (WeightFormat::Q8_0 / Q4_0) are the exception: their GEMM quantizes x to q8_0 per
// 32-column block and multiplies on int8 dot products, as llama.cpp does
// (kernels/ggml_blocks.h), whatever the precision. GemmPrecision::Int8 runs FP4 weights
// the same way (llama.cpp's MXFP4 numerics): 2 · E2M1 is an integer in [-12, 12], so a
// weight block is exactly int8 codes times 2^(e - 128), and only x is rounded.
#pragma once

#include <cstdint>
#include <span>

#include "kernels/weights.h"

namespace troupe::kernels {

enum class GemmPrecision : uint8_t {
  F32,   // exact f32 products (the model's defined numerics)
  Bf16,  // activations rounded to bf16, f32 accumulation (faster, documented tolerance)
  Int8,  // FP4 weights, M <= kInt8MaxRows or with row groups: activations quantized to
         // q8_0 per 32 columns, int8 dot products (kernels/ggml_blocks.h); larger M without
         // row groups and every other format run exactly as F32. CPU only.
};

// Rows up to which GemmPrecision::Int8 takes FP4 weights without row groups to int8:
// decode and small batches, where the per-block int8 tiles beat the f32 ones; their
// larger GEMMs keep the f32 path (its packed kernels are faster there, and exact). A
// weight with row groups (WeightView::groups, kernels/q8_row_groups.h) takes int8 at any
// M: the row-group kernels run a prefill at ~3x the f32 path's speed (M = 512,
// docs/kernels-bench.md). Per call and per weight view, so every row of one GEMM gets the
// same numerics, and an expert-parallel owner (which runs all rows of its expert in one
// call, on a copy that keeps the groups) computes what one rank would.
constexpr int64_t kInt8MaxRows = 32;

struct GemmParams {
  const float* x = nullptr;  // [M, K], row stride ldx (>= K)
  WeightView w;              // [N, K]
  float* y = nullptr;        // [M, N], row stride ldy (>= N)
  int64_t m = 0;             // rows of x; 0 is allowed (nothing written)
  int64_t ldx = 0;           // 0 means K
  int64_t ldy = 0;           // 0 means N
  bool accumulate = false;   // y += x·Wᵀ instead of y = x·Wᵀ
  GemmPrecision precision = GemmPrecision::F32;
};

// FP4 weights under GemmPrecision::Int8: at most kInt8MaxRows rows, or with row groups.
inline bool fp4_on_int8(const GemmParams& p) {
  return p.precision == GemmPrecision::Int8 && p.w.format == WeightFormat::FP4 &&
         (p.m <= kInt8MaxRows || p.w.groups != nullptr);
}
// Whether the call quantizes x to q8_0 and multiplies on int8 (ref::gemm_q8, cpu::gemm_q8).
inline bool q8_activations(const GemmParams& p) { return is_ggml_block(p.w.format) || fp4_on_int8(p); }
// Whether a GEMM at `precision` reads w's row groups (Q8_0 / Q4_0 always, FP4 under Int8),
// so that a view keeping only its groups (w.data null: a GGUF matrix regrouped in place,
// FP4 experts whose checkpoint bytes went back, model/row_groups_copy.h) can run there.
inline bool reads_row_groups(const WeightView& w, GemmPrecision precision) {
  return w.groups != nullptr &&
         (is_ggml_block(w.format) || (precision == GemmPrecision::Int8 && w.format == WeightFormat::FP4));
}

// Validated, dispatched entry (kernels/dispatch.cpp picks the backend).
void gemm(const GemmParams& p);
// Several weights against one x: each ps[i].y as gemm(ps[i]) gives it, bit for bit. The
// ps share x, m, ldx and precision (checked). On the CPU, weights whose GEMM quantizes x
// (q8_activations) have it quantized once, and one fork-join runs them all (a layer's
// q, k and v projections; an MLP's gate and up); other backends run them one by one.
void gemm_shared_x(std::span<const GemmParams> ps);
// Independent GEMMs (each its own x, m, weight and y): each ps[i].y as gemm(ps[i]) gives
// it, bit for bit. On the CPU those cpu::gemm_joins_group takes run in one fork-join
// (a layer's o-group projections, a decode step's experts); other backends run them one
// by one.
void gemm_grouped(std::span<const GemmParams> ps);

namespace ref {
void gemm(const GemmParams& p);
void gemm_q8(const GemmParams& p);  // the q8_activations() definition (ref::gemm calls it)
}  // namespace ref
namespace cpu {
void gemm(const GemmParams& p);
void gemm_shared_x(std::span<const GemmParams> ps);
// Independent GEMMs (each its own x, m, weight and y; valid, as gemm checks): each y as
// gemm(ps[i]) gives it, bit for bit. Those gemm_joins_group takes (int8 tiles; decode
// rows on the AVX-512 direct tiles) run in one fork-join over all their output columns
// (a decode step's MoE experts, every thread a share of every expert's rows), with x
// prepared once per run of consecutive GEMMs over the same x; the others one by one.
void gemm_grouped(std::span<const GemmParams> ps);
bool gemm_joins_group(const GemmParams& p);
}  // namespace cpu
namespace cuda { void gemm(const GemmParams& p); }

}  // namespace troupe::kernels
