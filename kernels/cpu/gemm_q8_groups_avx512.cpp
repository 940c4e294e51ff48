// The AVX-512 VNNI kernel of cpu::gemm_q8 on regrouped Q8_0 / Q4_0 / FP4 weights
// (kernels/q8_row_groups.h), decode and prefill: lanes are weight rows. Per 32-column
// block and group of 16 rows, each 64-byte chunk of codes meets 4 broadcast activation
// bytes in one vpdpbusd (4 products into each row's lane); after the block's chunks a
// lane holds the row's Σ (w + c) · x, c = 128 (Q8_0), 8 (Q4_0) or 12 (FP4, whose nibbles
// become 2 · E2M1 + 12 by one vpshufb each), and starting the lane at -c · Σx (the
// quantizer's block sum) leaves Σ w · x exactly. The f32 step is the reference's, lane by
// lane: s += (dw · dx) · float(dot), block after block, no FMA, so the result equals
// ref::gemm_q8's bit for bit (as the packed kernel's does). FP4's dw is its UE8M0 code's
// fp4_int8_scales() value, 2^(e - 128), made exactly by vscalefps (subnormal at e = 0,
// NaN at e = 255).
//
// Two tile shapes, one body (Avx512GroupTile<F, Prefill>):
//   decode  (M <= kGroupsDecodeMaxRows)  4 groups (64 weight rows) at M <= 2, where the
//           accumulators leave registers for 4 streams of codes (one thread, with the
//           prefetch: 1.15-1.3x over 2 groups at M = 1-2), else MR <= 4 x 2 groups; two
//           int32 chains per output (Q4_0's low and high nibbles, Q8_0's even and odd
//           chunks: chains of 4 rather than 8); each tile of the first activation rows
//           prefetches its groups' streams ahead (gemm_q8_groups_walk.h).
//   prefill (more rows)  MR <= 6 x 2 groups, the packed kernel's register tile (6 · 2 f32
//           and 6 · 2 int32 accumulators, one chain each: the 12 independent chains
//           already cover vpdpbusd's latency), without its per-call repack: the codes
//           are already 16 rows side by side; the scales are f16 (one vcvtph2ps per group
//           and block) and Q4_0's nibbles are split in registers. The walk prefetches the
//           next 2 groups a share per row tile, as the packed kernel does its next panel.
// A thread sweeps its groups G at a time, every activation row against them while they
// are in L1/L2.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/cpu/gemm_q8_groups_walk.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;
using avx512::fp4_scales;
using avx512::unroll;

template <WeightFormat F, bool Prefill>
struct Avx512GroupTile {
  // 32 zmm: MR · G f32 and kChains · MR · G int32 accumulators beside the code vectors.
  static constexpr int kTileRows = Prefill ? 6 : 4, kMaxGroups = Prefill ? 2 : 4;
  static constexpr int kChains = Prefill ? 1 : 2;
  static constexpr bool kWalkPrefetch = Prefill;
  static constexpr int groups(int rows) { return Prefill || rows > 2 ? 2 : 4; }

  // y[m0 + i][n + 16g + lane] for rows m0..m0+MR and groups starting at weight row n;
  // only rows below n_end are stored. step: the walk's groups per tile (the prefetch's
  // stride from one tile to the next).
  template <int MR, int G>
  static void run(const QGemmArgs& a, int64_t m0, int64_t n, int64_t n_end, int64_t step);
};

template <WeightFormat F, bool Prefill>
template <int MR, int G>
void Avx512GroupTile<F, Prefill>::run(const QGemmArgs& a, int64_t m0, int64_t n, int64_t n_end, int64_t step) {
  using L = GroupLayout<F>;
  const int64_t blocks = a.x.k / kQBlock, group_bytes = blocks * L::kBlockBytes;
  const uint8_t* gp[G];
  // Byte offsets in a.groups: the tile's first group, and the end of what it prefetches
  // (the thread's range; nothing for rows m0 > 0, which read the groups again from L1/L2).
  const int64_t first = n / kGroupRows * group_bytes;
  unroll<G>([&](auto g) { gp[g] = a.groups + first + g * group_bytes; });
  const int64_t prefetch_end = m0 == 0 ? (n_end + kGroupRows - 1) / kGroupRows * group_bytes : 0;
  const int8_t* xq[MR];
  const float* xd[MR];
  const int32_t* xs[MR];
  unroll<MR>([&](auto i) {
    xq[i] = a.x.q + (m0 + i) * a.x.k;
    xd[i] = a.x.d + (m0 + i) * blocks;
    xs[i] = a.x.sum + (m0 + i) * blocks;
  });
  __m512 acc[MR][G];
  unroll<MR>([&](auto i) { unroll<G>([&](auto g) { acc[i][g] = _mm512_setzero_ps(); }); });
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i fp4_table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Biased)));
  for (int64_t b = 0; b < blocks; ++b) {
    // A plain loop, not unroll<>: inside the lambda GCC 12 dropped the prefetches
    // altogether (docs/kernels-bench.md).
    if constexpr (!kWalkPrefetch) {
      for (int g = 0; g < G; ++g) {
        const int64_t t = first + g * group_bytes + group_prefetch_offset(b * L::kBlockBytes, group_bytes, step);
        if (t + L::kBlockBytes > prefetch_end) continue;
        for (int64_t l = 0; l < L::kBlockBytes; l += 64)
          prefetch_l2(a.groups + t + l);
      }
    }
    // d[kChains - 1] is the second chain, or the first again when there is one.
    __m512i d[kChains][MR][G];
    unroll<MR>([&](auto i) {
      const __m512i init = _mm512_set1_epi32(-xs[i][b] * L::kBias);
      unroll<G>([&](auto g) {
        d[0][i][g] = init;
        if constexpr (kChains == 2) d[1][i][g] = _mm512_setzero_si512();
      });
    });
    const int8_t* xb[MR];
    unroll<MR>([&](auto i) { xb[i] = xq[i] + b * kQBlock; });
    if constexpr (L::kQ8) {
      unroll<4>([&](auto c) {  // chunks 2c and 2c + 1 to the two chains
        __m512i w0[G], w1[G];
        unroll<G>([&](auto g) {
          const uint8_t* p = gp[g] + b * L::kBlockBytes + 128 * c;
          w0[g] = _mm512_loadu_si512(p);
          w1[g] = _mm512_loadu_si512(p + 64);
        });
        unroll<MR>([&](auto i) {
          const __m512i x0 = _mm512_set1_epi32(load_i32(xb[i] + 8 * c));
          const __m512i x1 = _mm512_set1_epi32(load_i32(xb[i] + 8 * c + 4));
          unroll<G>([&](auto g) {
            d[0][i][g] = _mm512_dpbusd_epi32(d[0][i][g], w0[g], x0);
            d[kChains - 1][i][g] = _mm512_dpbusd_epi32(d[kChains - 1][i][g], w1[g], x1);
          });
        });
      });
    } else {
      unroll<4>([&](auto c) {  // low nibbles: chunk c; high nibbles: chunk c + 4
        __m512i lo[G], hi[G];
        unroll<G>([&](auto g) {
          const __m512i v = _mm512_loadu_si512(gp[g] + b * L::kBlockBytes + 64 * c);
          lo[g] = _mm512_and_si512(v, low4);
          hi[g] = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
          if constexpr (L::kFp4) {
            lo[g] = _mm512_shuffle_epi8(fp4_table, lo[g]);
            hi[g] = _mm512_shuffle_epi8(fp4_table, hi[g]);
          }
        });
        unroll<MR>([&](auto i) {
          const __m512i xl = _mm512_set1_epi32(load_i32(xb[i] + 4 * c));
          const __m512i xh = _mm512_set1_epi32(load_i32(xb[i] + 16 + 4 * c));
          unroll<G>([&](auto g) {
            d[0][i][g] = _mm512_dpbusd_epi32(d[0][i][g], lo[g], xl);
            d[kChains - 1][i][g] = _mm512_dpbusd_epi32(d[kChains - 1][i][g], hi[g], xh);
          });
        });
      });
    }
    __m512 dw[G];
    unroll<G>([&](auto g) {
      const uint8_t* scales = gp[g] + b * L::kBlockBytes + L::kDataBytes;
      if constexpr (L::kFp4) dw[g] = fp4_scales(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
      else dw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
    });
    unroll<MR>([&](auto i) {
      const __m512 dx = _mm512_set1_ps(xd[i][b]);
      unroll<G>([&](auto g) {
        __m512i dot = d[0][i][g];
        if constexpr (kChains == 2) dot = _mm512_add_epi32(dot, d[1][i][g]);
        __m512 term = _mm512_mul_ps(_mm512_mul_ps(dw[g], dx), _mm512_cvtepi32_ps(dot));
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
      const int64_t live = std::clamp<int64_t>(n_end - n - kGroupRows * g, 0, kGroupRows);
      if (live == 0) return;
      const __mmask16 mask = first_lanes(live);
      __m512 s = acc[i][g];
      if (a.accumulate) s = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y + kGroupRows * g), s);
      _mm512_mask_storeu_ps(y + kGroupRows * g, mask, s);
    });
  });
}

template <WeightFormat F>
using DecodeTile = Avx512GroupTile<F, false>;
template <WeightFormat F>
using PrefillTile = Avx512GroupTile<F, true>;

}  // namespace

void gemm_q8_groups_avx512(const QGemmArgs& a, int64_t n0, int64_t n1) {
  if (a.x.m > kGroupsDecodeMaxRows) run_groups<PrefillTile>(a, n0, n1);
  else run_groups<DecodeTile>(a, n0, n1);
}

}  // namespace troupe::kernels::cpu
