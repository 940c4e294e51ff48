// The 64x64 SIMT tile of the CUDA GEMM, shared by cuda::gemm (rows in order) and the
// grouped expert GEMM of cuda::moe_* (rows gathered per expert). Internal.
//
//   tile rows i in [0, 64): row r = row0 + i < count
//     x row = rows ? rows[r] / x_div : r          y row = rows ? rows[r] : r
//   K in steps of 32 (one UE8M0 block of every format):
//     xs[32][64] <- x[x row][k0 .. k0+32)         (bf16-rounded under GemmPrecision::Bf16)
//     ws[32][64] <- W[n0 + j][k0 .. k0+32)        dequantized exactly (weight_at)
//     thread (ty, tx) of 16x16 adds Σ_k xs[k][ty+16a] · ws[k][tx+16b] for a, b < 4
#pragma once

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/formats.h"
#include "kernels/cuda/gemm_plan.h"

namespace troupe::kernels::cuda {

struct TileRows {
  const int32_t* rows = nullptr;  // [count] gathered entries; null: rows in order
  int64_t row0 = 0;               // first tile row
  int64_t count = 0;              // rows that exist (row0 + i < count)
  int32_t x_div = 1;              // x row = entry / x_div
};

// Needs 256 threads; every thread of the block must call it (barriers inside).
__device__ inline void gemm_tile(const float* __restrict__ x, int64_t ldx, const WeightView& w,
                                 float* __restrict__ y, int64_t ldy, const TileRows& tr,
                                 int64_t n0, bool accumulate, bool bf16) {
  __shared__ float xs[kTileK][kTile + 1];
  __shared__ float ws[kTileK][kTile + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t k_len = w.cols, n_len = w.rows;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < k_len; k0 += kTileK) {
    for (int e = tid; e < kTile * kTileK; e += 256) {
      const int i = e / kTileK, kk = e % kTileK;
      const int64_t r = tr.row0 + i, k = k0 + kk;
      float v = 0.0f;
      if (r < tr.count && k < k_len) {
        const int64_t xr = tr.rows ? tr.rows[r] / tr.x_div : r;
        v = x[xr * ldx + k];
        if (bf16) v = round_to_bf16(v);
      }
      xs[kk][i] = v;
      const int64_t n = n0 + i;
      ws[kk][i] = (n < n_len && k < k_len) ? weight_at(w, n, k) : 0.0f;
    }
    __syncthreads();
#pragma unroll 8
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) a[q] = xs[kk][ty + 16 * q], b[q] = ws[kk][tx + 16 * q];
#pragma unroll
      for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int s = 0; s < 4; ++s) acc[q][s] = fmaf(a[q], b[s], acc[q][s]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    const int64_t r = tr.row0 + ty + 16 * q;
    if (r >= tr.count) continue;
    const int64_t yr = tr.rows ? tr.rows[r] : r;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const int64_t n = n0 + tx + 16 * s;
      if (n >= n_len) continue;
      float& out = y[yr * ldy + n];
      out = accumulate ? out + acc[q][s] : acc[q][s];
    }
  }
}

}  // namespace troupe::kernels::cuda
