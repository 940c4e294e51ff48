// Pieces of cpu::gemm shared by kernels/cpu/gemm.cpp (dispatch + portable path),
// gemm_avx512.cpp and gemm_avx2.cpp, exposed so tests can run each path directly.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>

#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace troupe::kernels::cpu {

// GemmParams with the defaults resolved (ldx = 0 means K, ldy = 0 means N).
struct GemmShape {
  int64_t m, n, k, ldx, ldy;
};
inline GemmShape gemm_shape(const GemmParams& p) {
  return {p.m, p.w.rows, p.w.cols, p.ldx ? p.ldx : p.w.cols, p.ldy ? p.ldy : p.w.rows};
}

// Output columns per parallel_for chunk: enough multiply-adds per chunk (~128K) that a
// thread hand-off pays for itself; a multiple of `tile` so chunks end on tile edges. A
// call of one to a few such chunks would split unevenly (V4.1's hc mix, [24 x 8192] at
// M = 1: 16 + 8 rows on two threads), so where the call has a chunk's work in all, a
// thread's even share is small enough too.
inline int64_t gemm_min_chunk(const GemmShape& s, int64_t tile) {
  constexpr int64_t kChunkMacs = int64_t{1} << 17;
  const int64_t per_col = std::max<int64_t>(1, s.m * s.k);
  int64_t cols = std::max<int64_t>(1, kChunkMacs / per_col);
  const int64_t threads = num_threads();
  if (threads > 1 && s.n * per_col >= kChunkMacs) cols = std::min(cols, (s.n + threads - 1) / threads);
  return (cols + tile - 1) / tile * tile;
}

// Several weights' output columns as one range for one parallel_for (gemm_shared_x):
// weight i owns units [unit_end[i - 1], unit_end[i]) of the range. Calls fn(i, u0, u1),
// u0 and u1 counted from weight i's first unit, for each weight [begin, end) touches.
template <class Fn>
void for_each_weight_run(std::span<const int64_t> unit_end, int64_t begin, int64_t end, Fn&& fn) {
  int64_t first = 0;
  for (size_t i = 0; i < unit_end.size() && begin < end; first = unit_end[i++]) {
    if (begin >= unit_end[i]) continue;
    const int64_t run_end = std::min(end, unit_end[i]);
    fn(i, begin - first, run_end - first);
    begin = run_end;
  }
}

// Handles the calls with nothing to multiply (M = 0, N = 0, or K = 0: y = 0 unless
// accumulating); returns true when it did, so a path returns at once.
bool gemm_trivial(const GemmParams& p, const GemmShape& sh);

// Blocked C++ the compiler vectorises; GemmPrecision::Bf16 rounds x to bf16 first.
void gemm_portable(const GemmParams& p);

// AVX-512 (F/BW/VL/DQ) path. use_bf16_dot: run GemmPrecision::Bf16 with vdpbf16ps
// (needs AVX512_BF16); when false, Bf16 runs f32 FMAs on bf16-rounded activations,
// which is the same definition (weights are exact in bf16 except F32- and F16-format
// weights, which Bf16 never rounds; see gemm_avx512.cpp).
void gemm_avx512(const GemmParams& p, bool use_bf16_dot);
// Whether gemm_avx512_shared_x takes these (gemm_shared_x's checks already passed):
// decode rows (the direct loop nest) and weights whose activations are laid out alike.
bool avx512_shares_x(std::span<const GemmParams> ps);
// Several weights over one x as gemm_avx512 gives each, bit for bit: x prepared once
// and one fork-join over every weight's tiles (a layer's q, k and v; an MLP's gate and up).
void gemm_avx512_shared_x(std::span<const GemmParams> ps);
// Whether gemm_avx512_grouped takes p: decode rows on the direct loop nest.
bool avx512_direct(const GemmParams& p);
// Independent GEMMs (each its own x, m, weight and y; all avx512_direct) as gemm_avx512
// gives each, bit for bit, in one fork-join over all their tiles; consecutive GEMMs over
// the same x have it prepared once (gemm_avx512_shared_x is the case of one x). The MoE
// experts of a decode step: every thread streams a share of every expert's rows.
void gemm_avx512_grouped(std::span<const GemmParams> ps);

// AVX2+FMA path (call only when cpu_features().has_avx2(), and for F16 weights only
// when cpu_features().f16c too): f32 FMAs for both precisions (Bf16 rounds x to bf16
// first, the same definition).
void gemm_avx2(const GemmParams& p);
// Whether gemm_avx2_grouped takes p: decode rows on the direct tiles (M <= 4).
bool avx2_direct(const GemmParams& p);
// Independent GEMMs (all avx2_direct) as gemm_avx2 gives each, bit for bit, in one
// fork-join over all their tiles; consecutive GEMMs over the same x have it prepared
// once (a layer's q / k / v, an MLP's gate and up, a decode step's MoE experts).
void gemm_avx2_grouped(std::span<const GemmParams> ps);

}  // namespace troupe::kernels::cpu
