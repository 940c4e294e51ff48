// What the row-group kernels of cpu::gemm_q8 share (gemm_q8_groups_avx512.cpp,
// gemm_q8_groups_avx2.cpp): the layout's constants, the tile walk and where a tile
// prefetches. No intrinsics, and each file instantiates the walk with a Tile of its own,
// so no inline code is shared across -m flags (as gemm_q8_tiles.h) but
// group_prefetch_offset's integer arithmetic (as gemm_q8.h's load_i32):
//
//   G = Tile::groups(min(M, kTileRows))            (wider tiles when few rows leave
//   for each G groups of [n0, n1)                   registers free: more streams)
//     for each kTileRows activation rows            (G · 16 weight rows, their blocks
//       Tile::run<mr, g>: mr x g · 16 outputs        read from memory once, then from L1/L2)
//
// Tile<F> provides kTileRows, kMaxGroups, static constexpr int groups(int rows) (the
// tile width at that many rows, non-increasing in rows, <= kMaxGroups), kWalkPrefetch
// (below) and template <int MR, int G> static void run(a, m0, n, n_end, step) storing
// y[m0 .. m0 + MR) [n .. min(n + 16G, n_end)) (step: the walk's G, the prefetch's
// stride); edge tiles (fewer rows or groups left) run the smaller instantiations from a
// table.
//
// Where the groups are prefetched: at decode (kWalkPrefetch false) the tiles of the first
// kTileRows activation rows prefetch along each group's stream as they read it
// (group_prefetch_offset), since they are all the work the groups get. At prefill
// (kWalkPrefetch true) many row tiles reuse the G groups from L1/L2, so the walk
// prefetches the next G groups (the bytes right after: groups are adjacent) a share
// after each row tile, and the first row tile of the next G finds them in cache.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/gemm_q8.h"
#include "kernels/q8_row_groups.h"

namespace troupe::kernels::cpu {

// One block of a group (kernels/q8_row_groups.h): kDataBytes of 64-byte code chunks,
// then the 16 rows' scales (f16, or FP4's UE8M0 bytes). A code's value is the weight
// plus kBias: q + 128, the nibble q + 8, or for FP4 the value the kernel looks the code
// up as, 2 · E2M1 + 12 (0..24; kFp4Biased).
template <WeightFormat F>
struct GroupLayout {
  static constexpr bool kQ8 = F == WeightFormat::Q8_0, kFp4 = F == WeightFormat::FP4;
  static constexpr int64_t kBlockBytes = kGroupRows * (kQ8 ? kQ8_0Bytes : kFp4 ? kQBlock / 2 + 1 : kQ4_0Bytes);
  static constexpr int64_t kDataBytes = kBlockBytes - (kFp4 ? 1 : 2) * kGroupRows;
  static constexpr int32_t kBias = kQ8 ? 128 : kFp4 ? 12 : 8;
};

// FP4 codes looked up as kFp4Int8 + 12: unsigned, for the u8 operand of vpdpbusd.
inline constexpr uint8_t kFp4Biased[16] = {12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0};

// Software prefetch. A tile reads its G groups side by side, block by block: G streams,
// each restarting every 4 KiB page for the hardware prefetcher (a Q4_0 group at K = 1024
// is 9 KiB), and at M = 1 the loop waited on them (measured on one thread: the kernel at
// 55-60% of the speed of a plain read of the same bytes, 1.4x faster with this;
// docs/kernels-bench.md).
// So while a tile reads the block at byte `at` of a group, it prefetches the block
// kGroupPrefetchBytes further along that group's stream: the group's own blocks, then
// the same slot of the next tile (`step` groups on), whose start the walk would
// otherwise reach cold. Offset from the group's start; the kernel skips targets past its
// range (another thread's rows, or past the matrix).
constexpr int64_t kGroupPrefetchBytes = 4096;
constexpr int64_t group_prefetch_offset(int64_t at, int64_t group_bytes, int64_t step) {
  const int64_t t = at + kGroupPrefetchBytes;
  return t < group_bytes ? t : t + (step - 1) * group_bytes;
}

template <class Tile>
void walk_groups(const QGemmArgs& a, int64_t n0, int64_t n1) {
  using Fn = void (*)(const QGemmArgs&, int64_t, int64_t, int64_t, int64_t);
  constexpr int kRows = Tile::kTileRows, kMax = Tile::kMaxGroups;
  // Only the (rows, groups) pairs a walk can ask for: groups <= groups(rows).
  static constexpr auto fns = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Fn, sizeof...(I)>{[] {
      constexpr int mr = I / kMax + 1, g = I % kMax + 1;
      if constexpr (g <= Tile::groups(mr)) return &Tile::template run<mr, g>;
      else return static_cast<Fn>(nullptr);
    }()...};
  }(std::make_integer_sequence<int, kRows * kMax>{});
  const int64_t step = Tile::groups(static_cast<int>(std::min<int64_t>(kRows, a.x.m)));
  const int64_t group_bytes = a.x.k / kQBlock * q8_group_block_bytes(a.format);
  const int64_t row_tiles = (a.x.m + kRows - 1) / kRows;
  for (int64_t n = n0; n < n1; n += step * kGroupRows) {
    const int64_t groups = std::min<int64_t>(step, (n1 - n + kGroupRows - 1) / kGroupRows);
    // The next tile's groups inside [n0, n1) (another thread's rows are its own business).
    const int64_t next_groups =
        Tile::kWalkPrefetch ? std::clamp<int64_t>((n1 - n + kGroupRows - 1) / kGroupRows - groups, 0, step) : 0;
    const uint8_t* next = a.groups + (n / kGroupRows + groups) * group_bytes;
    const int64_t next_bytes = next_groups * group_bytes;
    const int64_t share = (next_bytes / 64 + row_tiles - 1) / row_tiles * 64;
    int64_t fetched = 0;
    for (int64_t m = 0; m < a.x.m; m += kRows) {
      const int64_t mr = std::min<int64_t>(kRows, a.x.m - m);
      fns[(mr - 1) * kMax + (groups - 1)](a, m, n, n1, step);
      for (const int64_t end = std::min(next_bytes, fetched + share); fetched < end; fetched += 64)
        __builtin_prefetch(next + fetched, 0, 3);
    }
  }
}

// The row-group kernel of a file's Tile template, per weight format (Q8_0, Q4_0 or FP4).
template <template <WeightFormat> class Tile>
void run_groups(const QGemmArgs& a, int64_t n0, int64_t n1) {
  if (a.format == WeightFormat::Q8_0) walk_groups<Tile<WeightFormat::Q8_0>>(a, n0, n1);
  else if (a.format == WeightFormat::Q4_0) walk_groups<Tile<WeightFormat::Q4_0>>(a, n0, n1);
  else walk_groups<Tile<WeightFormat::FP4>>(a, n0, n1);
}

}  // namespace troupe::kernels::cpu
