// The AMX-INT8 kernel of cpu::gemm_q8 on regrouped Q8_0 / Q4_0 / FP4 weights
// (kernels/q8_row_groups.h), for prefill: the block products on the tile unit, the f32
// steps on AVX-512, bit for bit ref::gemm_q8 as the VNNI group kernels are.
//
// A group's block is already AMX's B operand: its 8 chunks of 64 bytes are 16 weight rows
// x 4 consecutive codes each, the "VNNI" layout tdp* reads (B row kk holds the codes of
// columns 4kk..4kk+3 of every weight row). Q8_0's codes (q + 128) load from the group as
// they are; Q4_0 / FP4 nibbles are unpacked once per group and thread into that layout
// (low nibbles of chunk c: columns 4c.., high nibbles: 16 + 4c.., as the VNNI kernels pair
// them; FP4 looked up as 2 · E2M1 + 12). The activations' q8 rows are the A operand as
// they are (16 rows x 32 bytes, the row stride K). Per block (32 columns):
//
//   C[a][g] = 0;  C[a][g] += A[a] · B[g]   tdpbsud: s8 activations x u8 codes, int32
//   for each activation row i and group g:   (AVX-512, C stored to L1)
//     dot = C[i][16 lanes] - bias · Σx       the codes' bias off, as the VNNI kernels
//     acc[i][g] += (dw · dx) · float(dot)    the reference's step: no FMA
//
// A tile is up to 32 activation rows (2 A tiles) x 2 groups (2 B tiles, 32 weight rows):
// 4 C tiles, the 8 tile registers. The block scales allow no longer K per instruction, so
// the f32 steps (as many as the VNNI kernels') bound it; the tile unit takes the products
// (4 tdpbsud per block in place of 256 vpdpbusd).
//
// The tile instructions go through an Ops policy: AmxHw runs them (AMX-INT8 with the OS's
// permission, kernels/dispatch.cpp), AmxEmulated does the same arithmetic in C++ so the
// layout, the walk and the f32 steps are checked bit for bit on any AVX-512 machine
// (QGemmKernel::AmxGroupsEmulated); only the hardware's own tile unit needs an AMX CPU.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/avx512_vec.h"  // also silences GCC 12.2's header warnings (PR 105593)
#include "kernels/cpu/gemm_q8.h"
#include "kernels/cpu/gemm_q8_groups_walk.h"
#include "kernels/cpu/gemm_weight_src.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;
using avx512::fp4_scales;

constexpr int kTiles = 8;
constexpr int kBRows = kQBlock / 4;  // B rows per block: 4 codes each
// Tile registers: C (a, g) = 2a + g, A a = 4 + a, B g = 6 + g.
constexpr int c_tile(int a, int g) { return 2 * a + g; }
constexpr int kATile = 4, kBTile = 6;

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

// The tile unit itself. GCC's _tile_* macros paste their tile number into the
// instruction text, so a template parameter cannot name it: the same instructions are
// written here with the number as an immediate operand (%c: printed bare), AT&T order
// (tdpbsud B, A, C).
struct AmxHw {
  static void configure(const TileConfig& c) { _tile_loadconfig(&c); }
  template <int T>
  static void zero() { asm volatile("tilezero %%tmm%c0" ::"i"(T)); }
  template <int T>
  static void load(const void* p, int64_t stride) {
    asm volatile("tileloadd (%0,%1,1), %%tmm%c2" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  template <int C, int A, int B>
  static void dp_sud() { asm volatile("tdpbsud %%tmm%c2, %%tmm%c1, %%tmm%c0" ::"i"(C), "i"(A), "i"(B)); }
  template <int T>
  static void store(void* p, int64_t stride) {
    asm volatile("tilestored %%tmm%c2, (%0,%1,1)" ::"r"(p), "r"(stride), "i"(T) : "memory");
  }
  static void release() { _tile_release(); }
};

// The same instructions in C++ (Intel SDM, TDPBSUD: C[m][n] += Σ_k s8 A[m][4k + j] ·
// u8 B[k][4n + j], int32, wrapping), on this thread's 8 tiles of 16 rows x 64 bytes.
struct AmxEmulated {
  struct State {
    uint8_t t[kTiles][16][64];
    TileConfig c;
  };
  static State& s() {
    thread_local State state;
    return state;
  }
  static void configure(const TileConfig& c) {
    std::memset(s().t, 0, sizeof s().t);
    s().c = c;
  }
  template <int T>
  static void zero() { std::memset(s().t[T], 0, sizeof s().t[T]); }
  template <int T>
  static void load(const void* p, int64_t stride) {
    zero<T>();
    for (int r = 0; r < s().c.rows[T]; ++r)
      std::memcpy(s().t[T][r], static_cast<const uint8_t*>(p) + r * stride, s().c.colsb[T]);
  }
  template <int C, int A, int B>
  static void dp_sud() {
    State& st = s();
    for (int m = 0; m < st.c.rows[C]; ++m)
      for (int n = 0; n < st.c.colsb[C] / 4; ++n) {
        int32_t acc;
        std::memcpy(&acc, st.t[C][m] + 4 * n, 4);
        uint32_t sum = static_cast<uint32_t>(acc);
        for (int k = 0; k < st.c.colsb[A] / 4; ++k)
          for (int j = 0; j < 4; ++j)
            sum += static_cast<uint32_t>(int32_t(int8_t(st.t[A][m][4 * k + j])) * int32_t(st.t[B][k][4 * n + j]));
        acc = static_cast<int32_t>(sum);
        std::memcpy(st.t[C][m] + 4 * n, &acc, 4);
      }
  }
  template <int T>
  static void store(void* p, int64_t stride) {
    for (int r = 0; r < s().c.rows[T]; ++r)
      std::memcpy(static_cast<uint8_t*>(p) + r * stride, s().t[T][r], s().c.colsb[T]);
  }
  static void release() {}
};

// Q4_0 / FP4: a group's nibbles as B tiles, kBRows x 64 bytes per block (see the top).
template <WeightFormat F>
void unpack_nibbles(const uint8_t* group, int64_t blocks, uint8_t* out) {
  using L = GroupLayout<F>;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Biased)));
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = group + b * L::kBlockBytes;
    uint8_t* o = out + b * kBRows * 64;
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(blk + 64 * c);
      __m512i lo = _mm512_and_si512(v, low4), hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
      if constexpr (L::kFp4) lo = _mm512_shuffle_epi8(table, lo), hi = _mm512_shuffle_epi8(table, hi);
      _mm512_storeu_si512(o + 64 * c, lo);
      _mm512_storeu_si512(o + 64 * (c + 4), hi);
    }
  }
}

// C(a, g) = A a · B g of one block, stored to c[C(a, g)] (16 int32 per row).
template <class Ops, int A, int G>
void block_product(int32_t (*c)[16][16]) {
  constexpr int C = c_tile(A, G);
  Ops::template zero<C>();
  Ops::template dp_sud<C, kATile + A, kBTile + G>();
  Ops::template store<C>(c[C], 64);
}

// One tile: activation rows [m0, m0 + mr) x groups [n, n + 16 · groups), mr <= 32,
// groups <= 2; group: the first group's bytes. b_src[g]: group g's B operand for block 0
// and its bytes per block.
template <WeightFormat F, class Ops>
void amx_tile(const QGemmArgs& a, int64_t m0, int mr, int groups, int64_t n, int64_t n_end,
              const uint8_t* group, const uint8_t* const* b_src, int64_t b_step) {
  using L = GroupLayout<F>;
  const int64_t blocks = a.x.k / kQBlock, group_bytes = blocks * L::kBlockBytes;
  const int a_tiles = (mr + 15) / 16;
  const int a_rows[2] = {std::min(mr, 16), std::max(mr - 16, 0)};
  TileConfig cfg;
  for (int t = 0; t < a_tiles; ++t) {
    cfg.rows[kATile + t] = static_cast<uint8_t>(a_rows[t]);
    cfg.colsb[kATile + t] = kQBlock;
    for (int g = 0; g < groups; ++g) {
      cfg.rows[c_tile(t, g)] = static_cast<uint8_t>(a_rows[t]);
      cfg.colsb[c_tile(t, g)] = 64;
    }
  }
  for (int g = 0; g < groups; ++g) {
    cfg.rows[kBTile + g] = kBRows;
    cfg.colsb[kBTile + g] = 64;
  }
  Ops::configure(cfg);
  alignas(64) int32_t c[4][16][16];
  alignas(64) float acc[32][2][16] = {};
  const uint8_t* gp[2] = {group, group + group_bytes};
  for (int64_t b = 0; b < blocks; ++b) {
    const int8_t* xb = a.x.q + m0 * a.x.k + b * kQBlock;
    // The tile indices are immediates: one block_product instance per (a, g).
    Ops::template load<kATile>(xb, a.x.k);
    if (a_tiles == 2) Ops::template load<kATile + 1>(xb + 16 * a.x.k, a.x.k);
    Ops::template load<kBTile>(b_src[0] + b * b_step, 64);
    if (groups == 2) Ops::template load<kBTile + 1>(b_src[1] + b * b_step, 64);
    block_product<Ops, 0, 0>(c);
    if (groups == 2) block_product<Ops, 0, 1>(c);
    if (a_tiles == 2) block_product<Ops, 1, 0>(c);
    if (a_tiles == 2 && groups == 2) block_product<Ops, 1, 1>(c);
    __m512 dw[2];
    for (int g = 0; g < groups; ++g) {
      const uint8_t* scales = gp[g] + b * L::kBlockBytes + L::kDataBytes;
      if constexpr (L::kFp4) dw[g] = fp4_scales(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scales)));
      else dw[g] = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(scales)));
    }
    for (int i = 0; i < mr; ++i) {
      const int64_t row = m0 + i;
      const __m512 dx = _mm512_set1_ps(a.x.d[row * blocks + b]);
      const __m512i off = _mm512_set1_epi32(-a.x.sum[row * blocks + b] * L::kBias);
      for (int g = 0; g < groups; ++g) {
        const __m512i dot = _mm512_add_epi32(_mm512_load_si512(c[c_tile(i / 16, g)][i % 16]), off);
        __m512 term = _mm512_mul_ps(_mm512_mul_ps(dw[g], dx), _mm512_cvtepi32_ps(dot));
        // Opaque to the optimiser: this file has -mfma, and GCC would fuse the multiply
        // into the add (C++ contracts by default), which is not the reference's rounding.
        asm("" : "+v"(term));
        _mm512_store_ps(acc[i][g], _mm512_add_ps(_mm512_load_ps(acc[i][g]), term));
      }
    }
  }
  Ops::release();
  for (int i = 0; i < mr; ++i) {
    float* y = a.y + (m0 + i) * a.ldy + n;
    for (int g = 0; g < groups; ++g) {
      const int64_t live = std::clamp<int64_t>(n_end - n - kGroupRows * g, 0, kGroupRows);
      if (live == 0) continue;
      const __mmask16 mask = first_lanes(live);
      __m512 s = _mm512_load_ps(acc[i][g]);
      if (a.accumulate) s = _mm512_add_ps(_mm512_maskz_loadu_ps(mask, y + kGroupRows * g), s);
      _mm512_mask_storeu_ps(y + kGroupRows * g, mask, s);
    }
  }
}

template <class Ops>
struct AmxTiles {
  template <WeightFormat F>
  struct Tile {
    static constexpr int kTileRows = 32, kMaxGroups = 2;
    static constexpr bool kWalkPrefetch = true;
    static constexpr int groups(int) { return 2; }

    template <int MR, int G>
    static void run(const QGemmArgs& a, int64_t m0, int64_t n, int64_t n_end, int64_t) {
      using L = GroupLayout<F>;
      const int64_t blocks = a.x.k / kQBlock, group_bytes = blocks * L::kBlockBytes;
      const uint8_t* group = a.groups + n / kGroupRows * group_bytes;
      const uint8_t* b_src[2];
      if constexpr (L::kQ8) {  // the codes as the loader laid them out
        for (int g = 0; g < G; ++g) b_src[g] = group + g * group_bytes;
        return amx_tile<F, Ops>(a, m0, MR, G, n, n_end, group, b_src, L::kBlockBytes);
      } else {
        // The walk runs every row tile over these groups before the next ones: the first
        // unpacks them into this thread's scratch, the rest read it there.
        const int64_t bytes = blocks * kBRows * 64;
        auto* unpacked = gemm_w_scratch().get<uint8_t>(2 * bytes);
        for (int g = 0; g < G; ++g) {
          if (m0 == 0) unpack_nibbles<F>(group + g * group_bytes, blocks, unpacked + g * bytes);
          b_src[g] = unpacked + g * bytes;
        }
        return amx_tile<F, Ops>(a, m0, MR, G, n, n_end, group, b_src, kBRows * 64);
      }
    }
  };
};

template <WeightFormat F>
using HwTile = AmxTiles<AmxHw>::Tile<F>;
template <WeightFormat F>
using EmulatedTile = AmxTiles<AmxEmulated>::Tile<F>;

}  // namespace

void gemm_q8_groups_amx(const QGemmArgs& a, int64_t n0, int64_t n1) { run_groups<HwTile>(a, n0, n1); }

void gemm_q8_groups_amx_emulated(const QGemmArgs& a, int64_t n0, int64_t n1) {
  run_groups<EmulatedTile>(a, n0, n1);
}

}  // namespace troupe::kernels::cpu
