// The AVX-512 VNNI range kernel of cpu::gemm_q8 for many activation rows (a prefill):
// a thread repacks 32 weight rows at a time into a panel of its own scratch, then runs
// every activation row against the panel in register tiles of 6 rows x 32 columns.
//
// Panel (per 32-column panel, per weight block b; two groups g of 16 columns):
//   data[b][g][c][j][t]  u8, c = 0..7, j = 0..15, t = 0..3: weight (column n + 16g + j,
//                        k = 32b + 4c + t) made unsigned: Q8_0 q + 128, Q4_0 the nibble
//   scale[b][g][j]       f32, the block's f16 scale
// so one zmm of data holds 4 consecutive k of 16 columns, and vpdpbusd against a
// broadcast 4 bytes of one activation row adds those 4 products into each column's lane.
// After the 8 chunks of a block a lane holds the column's whole block sum of
// (w + c) · x, c = 128 (Q8_0) or 8 (Q4_0); starting the lane at -c · Σx (the
// quantizer's per-block sum) leaves Σ w · x exactly. The f32 step is the reference's,
// lane by lane: s += (dw · dx) · float(dot), in block order, no FMA (the result is
// ref::gemm_q8's bit for bit).
//
// Packing reads each weight byte once per panel, row after row; with M >= kPackedMinRows
// rows it is a small share of the work.
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/gemm_q8.h"
#include "kernels/cpu/gemm_weight_src.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;
using avx512::unroll;

constexpr int kPanelCols = 32;                      // two groups of 16 columns
constexpr int64_t kGroupData = 8 * 64;              // data bytes of one group, one block
constexpr int64_t kPanelBlock = 2 * kGroupData + 2 * 64;  // + two groups' 16 f32 scales
constexpr int kTileRows = 6;

// Packs columns [n, n + cols) (cols <= 32) of the weight into panel p (every block). Rows
// are read one after another, front to back (a stream the prefetcher follows: gathering
// 16 rows at once left the packing waiting on memory, a third of the GEMM's time), and
// each block's 8 dwords scattered to their chunks. Columns past `cols` are zero.
template <WeightFormat F>
void pack_panel(const QGemmArgs& a, int64_t n, int cols, uint8_t* p) {
  constexpr int64_t bb = F == WeightFormat::Q8_0 ? kQ8_0Bytes : kQ4_0Bytes;
  const int64_t blocks = a.x.k / kQBlock;
  if (cols < kPanelCols) std::memset(p, 0, size_t(blocks * kPanelBlock));
  const __m256i chunks = _mm256_setr_epi32(0, 64, 128, 192, 256, 320, 384, 448);
  for (int col = 0; col < cols; ++col) {
    const int g = col / 16, j = col % 16;
    const uint8_t* row = a.w + (n + col) * a.row_bytes;
    uint8_t* data = p + g * kGroupData + 4 * j;
    float* scale = reinterpret_cast<float*>(p + 2 * kGroupData) + col;
    for (int64_t b = 0; b < blocks; ++b) {
      const uint8_t* blk = row + b * bb;
      uint16_t h;
      std::memcpy(&h, blk, 2);
      scale[b * (kPanelBlock / 4)] = _cvtsh_ss(h);
      __m256i v;
      if constexpr (F == WeightFormat::Q8_0) {
        v = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2)),
                             _mm256_set1_epi8(char(0x80)));
      } else {
        const __m128i qs = _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 2));
        const __m128i low4 = _mm_set1_epi8(0x0F);
        v = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), low4), _mm_and_si128(qs, low4));
      }
      _mm256_i32scatter_epi32(data + b * kPanelBlock, chunks, v, 1);
    }
  }
}

// Rows [m0, m0 + MR) against the panel's first 16 · G columns; `cols` of them are stored.
template <WeightFormat F, int MR, int G>
void tile(const QGemmArgs& a, const uint8_t* p, int64_t m0, int64_t n, int cols) {
  constexpr int32_t kShift = F == WeightFormat::Q8_0 ? 7 : 3;  // c = 128 or 8
  const int64_t blocks = a.x.k / kQBlock;
  __m512 acc[MR][G];
  unroll<MR>([&](auto i) { unroll<G>([&](auto g) { acc[i][g] = _mm512_setzero_ps(); }); });
  const int8_t* xq[MR];
  const float* xd[MR];
  const int32_t* xs[MR];
  unroll<MR>([&](auto i) {
    xq[i] = a.x.q + (m0 + i) * a.x.k;
    xd[i] = a.x.d + (m0 + i) * blocks;
    xs[i] = a.x.sum + (m0 + i) * blocks;
  });
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* pb = p + b * kPanelBlock;
    __m512i dot[MR][G];
    unroll<MR>([&](auto i) {
      const __m512i init = _mm512_set1_epi32(-(xs[i][b] * (1 << kShift)));
      unroll<G>([&](auto g) { dot[i][g] = init; });
    });
    unroll<8>([&](auto c) {
      __m512i w[G];
      unroll<G>([&](auto g) { w[g] = _mm512_load_si512(pb + g * kGroupData + 64 * c); });
      unroll<MR>([&](auto i) {
        const __m512i x = _mm512_set1_epi32(load_i32(xq[i] + b * kQBlock + 4 * c));
        unroll<G>([&](auto g) { dot[i][g] = _mm512_dpbusd_epi32(dot[i][g], w[g], x); });
      });
    });
    const float* scale = reinterpret_cast<const float*>(pb + 2 * kGroupData);
    __m512 dw[G];
    unroll<G>([&](auto g) { dw[g] = _mm512_load_ps(scale + 16 * g); });
    unroll<MR>([&](auto i) {
      const __m512 dx = _mm512_set1_ps(xd[i][b]);
      unroll<G>([&](auto g) {
        __m512 term = _mm512_mul_ps(_mm512_mul_ps(dw[g], dx), _mm512_cvtepi32_ps(dot[i][g]));
        // Opaque to the optimiser: this file has -mfma, and GCC would fuse the multiply
        // into the add (C++ contracts by default), which is not the reference's rounding.
        asm("" : "+v"(term));
        acc[i][g] = _mm512_add_ps(acc[i][g], term);
      });
    });
  }
  unroll<MR>([&](auto i) {
    float* y = a.y + (m0 + i) * a.ldy + n;
    unroll<G>([&](auto g) {
      const int live = std::clamp(cols - 16 * int(g), 0, 16);
      if (live == 0) return;
      const __mmask16 mask = first_lanes(live);
      __m512 s = acc[i][g];
      if (a.accumulate) s = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y + 16 * g), s);
      _mm512_mask_storeu_ps(y + 16 * g, mask, s);
    });
  });
}

// Rows of x against the panel, tile after tile; between tiles, `next` bytes of the weight
// rows the next panel packs are prefetched, a share per tile (their rows are adjacent in
// memory), so that packing finds them in cache instead of waiting on DRAM row by row.
template <WeightFormat F, int G>
void sweep_rows(const QGemmArgs& a, const uint8_t* p, int64_t n, int cols, const uint8_t* next,
                int64_t next_bytes) {
  using Fn = void (*)(const QGemmArgs&, const uint8_t*, int64_t, int64_t, int);
  static constexpr std::array<Fn, kTileRows> fns = []<int... I>(std::integer_sequence<int, I...>) {
    return std::array<Fn, kTileRows>{&tile<F, I + 1, G>...};
  }(std::make_integer_sequence<int, kTileRows>{});
  const int64_t tiles = (a.x.m + kTileRows - 1) / kTileRows;
  const int64_t per_tile = (next_bytes / 64 + tiles - 1) / tiles * 64;
  int64_t fetched = 0;
  for (int64_t m = 0; m < a.x.m; m += kTileRows) {
    const int64_t mr = std::min<int64_t>(kTileRows, a.x.m - m);
    fns[mr - 1](a, p, m, n, cols);
    for (const int64_t end = std::min(next_bytes, fetched + per_tile); fetched < end; fetched += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next + fetched), _MM_HINT_T0);
  }
}

template <WeightFormat F>
void run(const QGemmArgs& a, int64_t n0, int64_t n1) {
  const int64_t blocks = a.x.k / kQBlock;
  uint8_t* p = gemm_w_scratch().get<uint8_t>(blocks * kPanelBlock);
  for (int64_t n = n0; n < n1; n += kPanelCols) {
    const int cols = int(std::min<int64_t>(kPanelCols, n1 - n));
    pack_panel<F>(a, n, cols, p);
    const int64_t next_rows = std::clamp<int64_t>(n1 - n - kPanelCols, 0, kPanelCols);
    const uint8_t* next = next_rows > 0 ? a.w + (n + kPanelCols) * a.row_bytes : a.w;
    if (cols > 16) sweep_rows<F, 2>(a, p, n, cols, next, next_rows * a.row_bytes);
    else sweep_rows<F, 1>(a, p, n, cols, next, next_rows * a.row_bytes);
  }
}

}  // namespace

void gemm_q8_range_avx512_packed(const QGemmArgs& a, int64_t n0, int64_t n1) {
  if (a.format == WeightFormat::Q8_0) run<WeightFormat::Q8_0>(a, n0, n1);
  else run<WeightFormat::Q4_0>(a, n0, n1);
}

}  // namespace troupe::kernels::cpu
