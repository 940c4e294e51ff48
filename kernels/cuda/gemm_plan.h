// Launch planning for the CUDA GEMM (heuristics apart from the kernels, plain C++ so
// the CPU tests check it): which kernel serves a shape, and its grid.
//
//   m <= 8   decode   one warp per output column n, 8 warps a block; each lane streams
//                     whole 32-wide scale blocks of the weight row (16-byte loads when
//                     the format and K allow), x rows from L1; memory-bound like decode
//   m > 8    tiled    64x64 output tiles, K in steps of 32 (one scale block), weights
//                     dequantized into shared memory, 4x4 outputs a thread (SIMT f32:
//                     the model's numerics are f32 activations; no tensor cores yet)
#pragma once

#include <cstdint>

#include "kernels/weights.h"

namespace troupe::kernels::cuda {

enum class GemmKernel : uint8_t { Decode, Tiled };

struct GemmPlan {
  GemmKernel kernel = GemmKernel::Decode;
  int m_rows = 1;             // decode: x rows per pass, a power of two >= m (1, 2, 4, 8)
  bool vector_loads = false;  // decode: 32-code blocks by 16-byte loads
  unsigned grid_x = 0;        // decode: column groups of 8; tiled: column tiles of 64
  unsigned grid_y = 1;        // tiled: row tiles of 64
  unsigned threads = 256;
};

constexpr int64_t kDecodeMaxRows = 8;
constexpr int kDecodeWarps = 8;
constexpr int kTile = 64;
constexpr int kTileK = 32;

// m, n, k: the GEMM's; data_aligned16: the weight's data pointer is 16-byte aligned.
GemmPlan plan_gemm(int64_t m, int64_t n, int64_t k, WeightFormat format, bool data_aligned16);

}  // namespace troupe::kernels::cuda
