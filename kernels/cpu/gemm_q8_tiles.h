// The tile walk the SIMD q8 GEMM kernels share (kernels/cpu/gemm_q8.h). Included by
// gemm_q8_avx2.cpp and gemm_q8_avx512.cpp only, with a Tile type of their own, so every
// instantiation is that file's (no inline code is shared across -m flags):
//
//   for each chunk of kMChunk activation rows      (a prefill's x chunk stays in L2)
//     for each NR weight rows of [n0, n1)           (read from memory once per chunk)
//       for each MR activation rows of the chunk    (the NR rows now come from L1)
//         Tile::run<mr, nr>: MR x NR dot products over all K blocks
//
// Tile<F> provides kM, kN and template <int MR, int NR> static void run(a, m0, n0); edge
// tiles (fewer rows left) run the smaller instantiations from a table.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/gemm_q8.h"

namespace troupe::kernels::cpu {

// One finished output (a tile's horizontal sum).
template <class Tile>
inline void store_output(const QGemmArgs& a, int64_t m, int64_t n, float s) {
  float& y = a.y[m * a.ldy + n];
  y = a.accumulate ? y + s : s;
}

template <class Tile>
struct TileWalk {
  using Fn = void (*)(const QGemmArgs&, int64_t, int64_t);
  static constexpr int64_t kMChunk = 64;

  template <size_t... I>
  static constexpr std::array<Fn, sizeof...(I)> table(std::index_sequence<I...>) {
    return {&Tile::template run<int(I / Tile::kN) + 1, int(I % Tile::kN) + 1>...};
  }

  static void run(const QGemmArgs& a, int64_t n0, int64_t n1) {
    static constexpr auto fns = table(std::make_index_sequence<Tile::kM * Tile::kN>{});
    for (int64_t mc = 0; mc < a.x.m; mc += kMChunk) {
      const int64_t mend = std::min(a.x.m, mc + kMChunk);
      for (int64_t n = n0; n < n1; n += Tile::kN) {
        const int64_t nr = std::min<int64_t>(Tile::kN, n1 - n);
        for (int64_t m = mc; m < mend; m += Tile::kM) {
          const int64_t mr = std::min<int64_t>(Tile::kM, mend - m);
          fns[(mr - 1) * Tile::kN + (nr - 1)](a, m, n);
        }
      }
    }
  }
};

// The range kernel of a file's Tile template, per weight format.
template <template <WeightFormat> class Tile>
void run_tiles(const QGemmArgs& a, int64_t n0, int64_t n1) {
  if (a.format == WeightFormat::Q8_0) TileWalk<Tile<WeightFormat::Q8_0>>::run(a, n0, n1);
  else if (a.format == WeightFormat::Q4_0) TileWalk<Tile<WeightFormat::Q4_0>>::run(a, n0, n1);
  else TileWalk<Tile<WeightFormat::FP4>>::run(a, n0, n1);
}

}  // namespace troupe::kernels::cpu
