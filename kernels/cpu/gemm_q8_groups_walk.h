// What the row-group kernels of cpu::gemm_q8 share (gemm_q8_groups_avx512.cpp,
// gemm_q8_groups_avx2.cpp): the layout's constants and the tile walk. No intrinsics, and
// each file instantiates the walk with a Tile of its own, so no inline code is shared
// across -m flags (as gemm_q8_tiles.h):
//
//   for each kTileGroups groups of [n0, n1)        (G · 16 weight rows, their blocks
//     for each kTileRows activation rows            read from memory once, then from L1/L2)
//       Tile::run<mr, g>: mr x g · 16 outputs over all K blocks
//
// Tile<F> provides kTileRows, kTileGroups and template <int MR, int G> static void
// run(a, m0, n, n_end) storing y[m0 .. m0 + MR) [n .. min(n + 16G, n_end)); edge tiles
// (fewer rows or groups left) run the smaller instantiations from a table.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/gemm_q8.h"
#include "kernels/q8_row_groups.h"

namespace troupe::kernels::cpu {

// One block of a group (kernels/q8_row_groups.h): kDataBytes of 64-byte code chunks,
// then the 16 rows' f16 scales. A code is the weight plus kBias (q + 128 or the nibble
// q + 8).
template <WeightFormat F>
struct GroupLayout {
  static constexpr bool kQ8 = F == WeightFormat::Q8_0;
  static constexpr int64_t kBlockBytes = kGroupRows * (kQ8 ? kQ8_0Bytes : kQ4_0Bytes);
  static constexpr int64_t kDataBytes = kBlockBytes - 2 * kGroupRows;
  static constexpr int32_t kBias = kQ8 ? 128 : 8;
};

template <class Tile>
void walk_groups(const QGemmArgs& a, int64_t n0, int64_t n1) {
  using Fn = void (*)(const QGemmArgs&, int64_t, int64_t, int64_t);
  constexpr int kRows = Tile::kTileRows, kGroups = Tile::kTileGroups;
  static constexpr auto fns = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Fn, sizeof...(I)>{&Tile::template run<I / kGroups + 1, I % kGroups + 1>...};
  }(std::make_integer_sequence<int, kRows * kGroups>{});
  for (int64_t n = n0; n < n1; n += kGroups * kGroupRows) {
    const int64_t groups = std::min<int64_t>(kGroups, (n1 - n + kGroupRows - 1) / kGroupRows);
    for (int64_t m = 0; m < a.x.m; m += kRows) {
      const int64_t mr = std::min<int64_t>(kRows, a.x.m - m);
      fns[(mr - 1) * kGroups + (groups - 1)](a, m, n, n1);
    }
  }
}

// The row-group kernel of a file's Tile template, per weight format (Q8_0 or Q4_0).
template <template <WeightFormat> class Tile>
void run_groups(const QGemmArgs& a, int64_t n0, int64_t n1) {
  if (a.format == WeightFormat::Q8_0) walk_groups<Tile<WeightFormat::Q8_0>>(a, n0, n1);
  else walk_groups<Tile<WeightFormat::Q4_0>>(a, n0, n1);
}

}  // namespace troupe::kernels::cpu
