// The index arithmetic of the CUDA MoE grouping (kernels/cuda/moe.cu) as host/device
// functions, so the CPU tests check it (tests/kernels/cuda_host_test.cpp):
//
//   counts      [3, 0, 70, 1]        rows per expert
//   offset      [0, 3, 3, 73, 74]    first grouped row of each expert (+ total)
//   tile_start  [0, 1, 1, 3, 4]      first 64-row tile of each expert (+ total tiles)
//   tile 2 -> expert 2, rows [3 + 64, 73): the last e with tile_start[e] <= t
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace troupe::kernels::cuda {

// offset[experts + 1] and tile_start[experts + 1] from counts[experts], tiles of `tile` rows.
TROUPE_HD inline void plan_expert_tiles(const int32_t* counts, int64_t experts, int32_t tile,
                                        int32_t* offset, int32_t* tile_start) {
  int32_t rows = 0, tiles = 0;
  for (int64_t e = 0; e < experts; ++e) {
    offset[e] = rows;
    tile_start[e] = tiles;
    rows += counts[e];
    tiles += (counts[e] + tile - 1) / tile;
  }
  offset[experts] = rows;
  tile_start[experts] = tiles;
}

// The expert owning tile t (t < tile_start[experts]): experts without rows own no tile,
// so among equal tile_start values the last one is the owner.
TROUPE_HD inline int64_t expert_of_tile(const int32_t* tile_start, int64_t experts, int32_t t) {
  int64_t lo = 0, hi = experts;  // tile_start[lo] <= t < tile_start[hi] (or hi = experts)
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    if (tile_start[mid] <= t) lo = mid;
    else hi = mid;
  }
  return lo;
}

}  // namespace troupe::kernels::cuda
