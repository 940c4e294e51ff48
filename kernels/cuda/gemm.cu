// cuda::gemm: y[M, N] (=|+=) x[M, K] · Wᵀ on the calling thread's device, the kernel
// chosen by plan_gemm (kernels/cuda/gemm_plan.h). f32 products and sums as the model's
// numerics say; the sums run in another order than ref::gemm (parallel, fused
// multiply-add), so results match it within the CPU paths' tolerance, not bit for bit.
#include "kernels/gemm.h"

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/formats.h"
#include "kernels/cuda/gemm_plan.h"
#include "kernels/cuda/gemm_tile.cuh"

namespace troupe::kernels::cuda {
namespace {

struct GemmArgs {
  const float* x;
  WeightView w;
  float* y;
  int64_t m, ldx, ldy;
  bool accumulate, bf16;
};

// 32 weights of scale block `blk` of row n, dequantized (vector path: K % 32 == 0).
__device__ inline void load_block(const WeightView& w, int64_t n, int64_t blk, float (&v)[32]) {
  const int64_t blocks = w.cols / 32;
  if (w.format == WeightFormat::FP4) {
    const uint4 raw = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) +
                                                     n * (w.cols / 2))[blk];
    const float s = ue8m0_value(w.scale[n * blocks + blk]);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 32; ++i) v[i] = e2m1_value((words[i / 8] >> (4 * (i % 8))) & 0xF) * s;
    return;
  }
  const uint4* row = reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(w.data) + n * w.cols);
  const uint4 lo = row[2 * blk], hi = row[2 * blk + 1];
  const uint8_t sc = w.format == WeightFormat::FP8 ? w.scale[(n / 32) * blocks + blk]
                                                   : w.scale[n * blocks + blk];  // ROWFP8
  const float s = ue8m0_value(sc);
  const uint32_t words[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
  for (int i = 0; i < 32; ++i) v[i] = e4m3_value((words[i / 4] >> (8 * (i % 4))) & 0xFF) * s;
}

__device__ inline float x_at(const GemmArgs& a, int64_t m, int64_t k) {
  const float v = a.x[m * a.ldx + k];
  return a.bf16 ? round_to_bf16(v) : v;
}

// One warp per output column n; lane partial sums for each of the MR x rows, then a
// warp reduction.
template <int MR, bool kVector>
__global__ void __launch_bounds__(256) gemm_decode(GemmArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t n = int64_t(blockIdx.x) * kDecodeWarps + (threadIdx.x >> 5);
  if (n >= a.w.rows) return;  // whole warps leave together
  float acc[MR] = {};
  if constexpr (kVector) {
    for (int64_t blk = lane; blk < a.w.cols / 32; blk += 32) {
      float v[32];
      load_block(a.w, n, blk, v);
#pragma unroll
      for (int m = 0; m < MR; ++m) {
        if (m >= a.m) break;
#pragma unroll
        for (int i = 0; i < 32; ++i) acc[m] = fmaf(x_at(a, m, blk * 32 + i), v[i], acc[m]);
      }
    }
  } else {
    for (int64_t k = lane; k < a.w.cols; k += 32) {
      const float v = weight_at(a.w, n, k);
#pragma unroll
      for (int m = 0; m < MR; ++m)
        if (m < a.m) acc[m] = fmaf(x_at(a, m, k), v, acc[m]);
    }
  }
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const float s = warp_sum(acc[m]);
    if (lane == 0 && m < a.m) {
      float& out = a.y[m * a.ldy + n];
      out = a.accumulate ? out + s : s;
    }
  }
}

__global__ void __launch_bounds__(256) gemm_tiled(GemmArgs a) {
  TileRows tr;
  tr.row0 = int64_t(blockIdx.y) * kTile;
  tr.count = a.m;
  gemm_tile(a.x, a.ldx, a.w, a.y, a.ldy, tr, int64_t(blockIdx.x) * kTile, a.accumulate, a.bf16);
}

template <int MR>
void launch_decode(const GemmPlan& plan, const GemmArgs& a, cudaStream_t s) {
  if (plan.vector_loads)
    gemm_decode<MR, true><<<plan.grid_x, plan.threads, 0, s>>>(a);
  else
    gemm_decode<MR, false><<<plan.grid_x, plan.threads, 0, s>>>(a);
}

}  // namespace

void gemm(const GemmParams& p) {
  TROUPE_CHECK(!is_ggml_block(p.w.format), "cuda::gemm: ", to_string(p.w.format),
               " (GGUF blocks) has no CUDA path yet");
  if (p.m == 0 || p.w.rows == 0) return;
  const Launch l = launch_on_current("cuda::gemm");
  GemmArgs a{p.x, p.w, p.y, p.m, p.ldx ? p.ldx : p.w.cols, p.ldy ? p.ldy : p.w.rows,
             p.accumulate, p.precision == GemmPrecision::Bf16};
  if (p.w.cols == 0) {  // empty sums: y = 0 (or unchanged when accumulating)
    if (!p.accumulate)
      TROUPE_CUDA_CHECK(cudaMemset2DAsync(p.y, a.ldy * sizeof(float), 0, p.w.rows * sizeof(float),
                                          p.m, l.stream));
    return;
  }
  const bool aligned = reinterpret_cast<uintptr_t>(p.w.data) % 16 == 0;
  const GemmPlan plan = plan_gemm(p.m, p.w.rows, p.w.cols, p.w.format, aligned);
  if (plan.kernel == GemmKernel::Tiled) {
    gemm_tiled<<<dim3(plan.grid_x, plan.grid_y), plan.threads, 0, l.stream>>>(a);
  } else {
    switch (plan.m_rows) {
      case 1: launch_decode<1>(plan, a, l.stream); break;
      case 2: launch_decode<2>(plan, a, l.stream); break;
      case 4: launch_decode<4>(plan, a, l.stream); break;
      default: launch_decode<8>(plan, a, l.stream); break;
    }
  }
  TROUPE_CUDA_LAUNCHED(gemm);
}

}  // namespace troupe::kernels::cuda
