// The AVX2 kernel of cpu::gemm_q8 on regrouped Q8_0 / Q4_0 / FP4 weights
// (kernels/q8_row_groups.h), the AVX-512 VNNI one's layout and f32 steps on ymm: a
// 64-byte chunk of 16 rows x 4 codes is two ymm of 8 rows each, one int32 lane per row.
// AVX2 has no vpdpbusd; vpmaddubsw (u8 x s8 -> adjacent pairs summed in int16, saturating)
// then vpmaddwd by ones (-> the 4 products' sum in the row's lane) stands in:
//
//   Q8_0  the code q + 128 against x could reach 2 · 255 · 127 in a pair and saturate, so
//         the code becomes q again (xor 0x80) and the u8 operand is |q| (<= 128) against
//         x with q's sign (vpsignb): a pair is at most 2 · 128 · 127 = 32512. One
//         vpmaddwd per chunk; the lane starts at 0. Prefill gives x the sign by a xor
//         instead, off the multiply pipes (dots_q8_unpacked).
//   Q4_0  the nibble q + 8 is already u8: a pair is at most 2 · 15 · 127 = 3810, so the
//         block's 8 chunks add up in int16 (<= 30480) and one vpmaddwd per block widens
//         them; the lane starts at -8 · Σx (the quantizer's block sum), as on AVX-512.
//   FP4   the nibble looked up as 2 · E2M1 + 12 (vpshufb, 0..24): a pair is at most
//         2 · 24 · 127 = 6096, so the int16 sums widen every 2 chunk pairs (24384); the
//         lane starts at -12 · Σx. The 8 rows' UE8M0 codes become 2^(e - 128) in
//         registers (fp4_scales).
//
// All integer sums are exact, so a lane holds the block's dot product exactly, and the
// f32 step is the reference's: s += (dw · dx) · float(dot), no FMA. The result equals
// ref::gemm_q8's bit for bit.
//
// A tile is MR <= 4 activation rows x 1 group (16 weight rows, 2 ymm): 16 ymm registers
// hold 8 int32 and 8 f32 accumulators at MR = 4, so wider tiles would only spill. Each
// block prefetches its group's stream ahead (gemm_q8_groups_walk.h).
//
// Prefill (more activation rows than a tile): the walk runs every row tile over a group
// before the next group, and each tile would redo the codes' unpacking (Q8_0: the xor,
// the sign mask and |q|; Q4_0: the nibbles' and / shift / and, 6 ops per chunk) for only 4
// rows' products. So the first row tile unpacks the group once into this thread's scratch
// (layout at kUnpackedBlockBytes below) and every row tile loads the codes from there, in
// the form its products take them.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/gemm_q8.h"
#include "kernels/cpu/gemm_q8_groups_walk.h"
#include "kernels/cpu/gemm_weight_src.h"
#include "kernels/cpu/unroll.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int kHalves = 2;  // ymm per group: rows 0..7 and 8..15
constexpr int64_t kHalfRows = kGroupRows / kHalves;

inline __m256i broadcast_i32(const int8_t* p) { return _mm256_set1_epi32(load_i32(p)); }

// fp4_int8_scales()[e] of 8 UE8M0 codes: 2^(e - 128) as f32 bits, e - 1 in the exponent
// field for e >= 2, the subnormals 2^-127 (e = 1) and 2^-128 (e = 0) apart, e = 255 the
// quiet NaN.
inline __m256 fp4_scales(const uint8_t* codes) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes)));
  __m256i bits = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i one = _mm256_set1_epi32(1), zero = _mm256_setzero_si256();
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00400000), _mm256_cmpeq_epi32(e, one));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x00200000), _mm256_cmpeq_epi32(e, zero));
  bits = _mm256_blendv_epi8(bits, _mm256_set1_epi32(0x7FC00000), _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
  return _mm256_castsi256_ps(bits);
}

// A group's codes unpacked (prefill), per block of the group, 64-byte chunks of 2 halves:
//   Q8_0  chunk 2c: chunk c's sign masks (0xFF where q < 0, q the code without its bias),
//         chunk 2c + 1: its |q|; then 64 bytes: per row (int32 lanes, 2 halves) the
//         block's -Σ_{q<0} q (dots_q8_unpacked says why)
//   Q4_0  chunk c < 4: chunk c's low nibbles (x's codes 4c..), chunk c + 4: its high ones
//         (x's codes 16 + 4c..); each a u8 value 0..15
//   FP4   as Q4_0, each nibble looked up as 2 · E2M1 + 12 (0..24)
// The scales stay in the group.
template <WeightFormat F>
constexpr int64_t kUnpackedBlockBytes = F == WeightFormat::Q8_0 ? 16 * 64 + 64 : 8 * 64;

template <WeightFormat F>
void unpack_group(const uint8_t* group, int64_t blocks, uint8_t* out) {
  using L = GroupLayout<F>;
  const __m256i bias = _mm256_set1_epi8(char(0x80)), low4 = _mm256_set1_epi8(0x0F);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Biased)));
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = group + b * L::kBlockBytes;
    auto* o = reinterpret_cast<__m256i*>(out + b * kUnpackedBlockBytes<F>);  // 32-byte units
    __m256i negative_sum[kHalves] = {};  // Q8_0: Σ_{q<0} q per row
    for (int c = 0; c < (L::kQ8 ? 8 : 4); ++c)
      for (int h = 0; h < kHalves; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * c + 32 * h));
        if constexpr (L::kQ8) {
          const __m256i q = _mm256_xor_si256(v, bias), zero = _mm256_setzero_si256();
          _mm256_store_si256(o + 4 * c + h, _mm256_cmpgt_epi8(zero, q));
          _mm256_store_si256(o + 4 * c + 2 + h, _mm256_abs_epi8(q));
          // The 4 codes' negative parts summed into the row's lane (u8 1 x s8 <= 0).
          const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), _mm256_min_epi8(q, zero));
          negative_sum[h] =
              _mm256_add_epi32(negative_sum[h], _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        } else {
          __m256i lo = _mm256_and_si256(v, low4), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          if constexpr (L::kFp4) lo = _mm256_shuffle_epi8(table, lo), hi = _mm256_shuffle_epi8(table, hi);
          _mm256_store_si256(o + 2 * c + h, lo);
          _mm256_store_si256(o + 2 * (c + 4) + h, hi);
        }
      }
    if constexpr (L::kQ8)
      for (int h = 0; h < kHalves; ++h)
        _mm256_store_si256(o + 32 + h, _mm256_sub_epi32(_mm256_setzero_si256(), negative_sum[h]));
  }
}

inline __m256i load_unpacked(const uint8_t* blk, int chunk, int h) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(blk + 64 * chunk + 32 * h));
}

template <WeightFormat F>
struct Avx2GroupTile {
  static constexpr int kTileRows = 4, kMaxGroups = 1;
  static constexpr bool kWalkPrefetch = false;
  static constexpr int groups(int) { return 1; }

  // y[m0 + i][n + 8h + lane] for rows m0..m0+MR and the group starting at weight row n;
  // only rows below n_end are stored. step: the walk's groups per tile (1).
  template <int MR, int G>
  static void run(const QGemmArgs& a, int64_t m0, int64_t n, int64_t n_end, int64_t step);
};

// One block's exact dot products from the thread's unpacked copy (prefill), lanes = rows:
// d[i][h] for activation row i and half h. dots_q8 moves each weight's sign onto x by
// vpsignb, which shares the two vector multiply pipes with vpmaddubsw and vpmaddwd: 3
// of their instructions per 32 products (0.62 such steps a cycle in an asm loop on a Zen
// 4). Here x ^ m, m = 0xFF where q < 0, is x where q >= 0 and -x - 1 where q < 0, by a
// xor on any vector pipe. So |q| · (x ^ m) sums to Σ q·x + Σ_{q<0} q, and the block's
// Σ_{q<0} q, a property of the weights, is subtracted up front (the lanes start at its
// negation, unpack_group's). x ^ 0xFF = -x - 1 holds for every int8 x, and a pair stays
// within int16: |q| <= 128 and x ^ m is in [-128, 127], so a pair is in [-32768, 32512]
// (tests/kernels/gemm_q8_test.cpp, Q8_0ExtremeCodesStayExact). Exact, as dots_q8.
template <int MR>
inline void dots_q8_unpacked(const uint8_t* blk, const int8_t* const* xb,
                             __m256i (&d)[MR][kHalves]) {
  const __m256i ones = _mm256_set1_epi16(1);
  unroll<kHalves>([&](auto h) {
    const __m256i start = load_unpacked(blk, 16, h);
    unroll<MR>([&](auto i) { d[i][h] = start; });
  });
#pragma GCC unroll 1
  for (int c = 0; c < 8; ++c) {  // a loop, as in dots_q8
    __m256i m[kHalves], u[kHalves];
    unroll<kHalves>([&](auto h) {
      m[h] = load_unpacked(blk, 2 * c, h);
      u[h] = load_unpacked(blk, 2 * c + 1, h);
    });
    unroll<MR>([&](auto i) {
      const __m256i x = broadcast_i32(xb[i] + 4 * c);
      unroll<kHalves>([&](auto h) {
        const __m256i pairs = _mm256_maddubs_epi16(u[h], _mm256_xor_si256(x, m[h]));
        d[i][h] = _mm256_add_epi32(d[i][h], _mm256_madd_epi16(pairs, ones));
      });
    });
  }
}

// One block's exact dot products, lanes = rows: d[i][h] for activation row i and half h.
// blk: the block in the group (decode rows; prefill reads the unpacked copy through
// dots_q8_unpacked).
template <int MR>
inline void dots_q8(const uint8_t* blk, const int8_t* const* xb, __m256i (&d)[MR][kHalves]) {
  const __m256i ones = _mm256_set1_epi16(1), bias = _mm256_set1_epi8(char(0x80));
  unroll<MR>([&](auto i) { unroll<kHalves>([&](auto h) { d[i][h] = _mm256_setzero_si256(); }); });
  // Loops over the chunks, not unroll<>: unrolled at MR = 4, GCC 12 hoists every chunk's
  // loads and unpacking and spills them to the stack (16 ymm registers).
#pragma GCC unroll 1
  for (int c = 0; c < 8; ++c) {
    __m256i q[kHalves], u[kHalves];
    unroll<kHalves>([&](auto h) {
      q[h] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * c + 32 * h)), bias);
      u[h] = _mm256_abs_epi8(q[h]);  // -128 -> 0x80, read as u8 128
    });
    unroll<MR>([&](auto i) {
      const __m256i x = broadcast_i32(xb[i] + 4 * c);
      unroll<kHalves>([&](auto h) {
        const __m256i pairs = _mm256_maddubs_epi16(u[h], _mm256_sign_epi8(x, q[h]));
        d[i][h] = _mm256_add_epi32(d[i][h], _mm256_madd_epi16(pairs, ones));
      });
    });
  }
}

// Q4_0 and FP4 (nibbles; FP4's looked up as 2 · E2M1 + 12, kFp4Biased). The int16 pair
// sums widen once per block for Q4_0 (8 chunks <= 8 · 3810), twice for FP4 (a pair of
// 24 · 127 · 2 = 6096 allows 4 chunks, 24384, below 32767).
template <WeightFormat F, int MR, bool kUnpacked>
inline void dots_nibbles(const uint8_t* blk, const int8_t* const* xb, const int32_t* const* xs, int64_t b,
                         __m256i (&d)[MR][kHalves]) {
  constexpr bool kFp4 = F == WeightFormat::FP4;
  constexpr int kWidenEvery = kFp4 ? 2 : 4;  // chunk pairs (lo + hi) per widening
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kFp4Biased)));
  unroll<MR>([&](auto i) {
    const __m256i init = _mm256_set1_epi32(-xs[i][b] * GroupLayout<F>::kBias);
    unroll<kHalves>([&](auto h) { d[i][h] = init; });
  });
  for (int c0 = 0; c0 < 4; c0 += kWidenEvery) {
    __m256i p[MR][kHalves];  // int16 pair sums of kWidenEvery chunk pairs
    unroll<MR>([&](auto i) { unroll<kHalves>([&](auto h) { p[i][h] = _mm256_setzero_si256(); }); });
#pragma GCC unroll 1
    for (int c = c0; c < c0 + kWidenEvery; ++c) {  // (a loop: see dots_q8) low nibbles: chunk c; high: c + 4
      __m256i lo[kHalves], hi[kHalves];
      unroll<kHalves>([&](auto h) {
        if constexpr (kUnpacked) {
          lo[h] = load_unpacked(blk, c, h);
          hi[h] = load_unpacked(blk, c + 4, h);
          return;
        }
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 64 * c + 32 * h));
        lo[h] = _mm256_and_si256(v, low4);
        hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
        if constexpr (kFp4) {
          lo[h] = _mm256_shuffle_epi8(table, lo[h]);
          hi[h] = _mm256_shuffle_epi8(table, hi[h]);
        }
      });
      unroll<MR>([&](auto i) {
        const __m256i xl = broadcast_i32(xb[i] + 4 * c), xh = broadcast_i32(xb[i] + 16 + 4 * c);
        unroll<kHalves>([&](auto h) {
          p[i][h] = _mm256_add_epi16(p[i][h], _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], xl),
                                                               _mm256_maddubs_epi16(hi[h], xh)));
        });
      });
    }
    unroll<MR>([&](auto i) {
      unroll<kHalves>([&](auto h) { d[i][h] = _mm256_add_epi32(d[i][h], _mm256_madd_epi16(p[i][h], ones)); });
    });
  }
}

// The tile of Avx2GroupTile<F>::run; unpacked: the group's codes in this thread's
// unpacked copy (prefill), else null.
template <WeightFormat F, int MR>
void group_tile(const QGemmArgs& a, int64_t m0, int64_t n, int64_t n_end, int64_t step,
                const uint8_t* unpacked) {
  using L = GroupLayout<F>;
  const int64_t blocks = a.x.k / kQBlock, group_bytes = blocks * L::kBlockBytes;
  // Byte offsets in a.groups, as on AVX-512: the group, the end of what it prefetches.
  const int64_t first = n / kGroupRows * group_bytes;
  const uint8_t* group = a.groups + first;
  const int64_t prefetch_end = m0 == 0 ? (n_end + kGroupRows - 1) / kGroupRows * group_bytes : 0;
  const int8_t* xq[MR];
  const float* xd[MR];
  const int32_t* xs[MR];
  unroll<MR>([&](auto i) {
    xq[i] = a.x.q + (m0 + i) * a.x.k;
    xd[i] = a.x.d + (m0 + i) * blocks;
    xs[i] = a.x.sum + (m0 + i) * blocks;
  });
  __m256 acc[MR][kHalves];
  unroll<MR>([&](auto i) { unroll<kHalves>([&](auto h) { acc[i][h] = _mm256_setzero_ps(); }); });
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* blk = group + b * L::kBlockBytes;
    if (const int64_t t = first + group_prefetch_offset(b * L::kBlockBytes, group_bytes, step);
        t + L::kBlockBytes <= prefetch_end)
      for (int64_t l = 0; l < L::kBlockBytes; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(a.groups + t + l), _MM_HINT_T0);
    const int8_t* xb[MR];
    unroll<MR>([&](auto i) { xb[i] = xq[i] + b * kQBlock; });
    __m256i d[MR][kHalves];
    if (unpacked != nullptr) {
      const uint8_t* u = unpacked + b * kUnpackedBlockBytes<F>;
      if constexpr (L::kQ8)
        dots_q8_unpacked<MR>(u, xb, d);
      else dots_nibbles<F, MR, true>(u, xb, xs, b, d);
    } else if constexpr (L::kQ8) {
      dots_q8<MR>(blk, xb, d);
    } else {
      dots_nibbles<F, MR, false>(blk, xb, xs, b, d);
    }
    __m256 dw[kHalves];
    unroll<kHalves>([&](auto h) {
      if constexpr (L::kFp4) dw[h] = fp4_scales(blk + L::kDataBytes + 8 * h);
      else dw[h] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + L::kDataBytes + 16 * h)));
    });
    unroll<MR>([&](auto i) {
      const __m256 dx = _mm256_set1_ps(xd[i][b]);
      unroll<kHalves>([&](auto h) {
        __m256 term = _mm256_mul_ps(_mm256_mul_ps(dw[h], dx), _mm256_cvtepi32_ps(d[i][h]));
        // Opaque to the optimiser: this file has -mfma, and GCC would fuse the multiply
        // into the add (C++ contracts by default), which is not the reference's rounding.
        asm("" : "+x"(term));
        acc[i][h] = _mm256_add_ps(acc[i][h], term);
      });
    });
  }
  unroll<MR>([&](auto i) {
    float* y = a.y + (m0 + i) * a.ldy + n;
    unroll<kHalves>([&](auto h) {
      const int64_t live = std::clamp<int64_t>(n_end - n - kHalfRows * h, 0, kHalfRows);
      if (live == 0) return;
      const __m256i mask = avx2::first_lanes(live);
      __m256 s = acc[i][h];
      if (a.accumulate) s = _mm256_add_ps(_mm256_maskload_ps(y + kHalfRows * h, mask), s);
      _mm256_maskstore_ps(y + kHalfRows * h, mask, s);
    });
  });
}

template <WeightFormat F>
template <int MR, int G>
void Avx2GroupTile<F>::run(const QGemmArgs& a, int64_t m0, int64_t n, int64_t n_end, int64_t step) {
  static_assert(G == 1);
  if (a.x.m <= kTileRows) return group_tile<F, MR>(a, m0, n, n_end, step, nullptr);
  // Prefill: the walk's first row tile of the group unpacks it (gemm_q8_groups_walk.h:
  // every row tile of a group runs on this thread before its next group).
  const int64_t blocks = a.x.k / kQBlock;
  auto* unpacked = gemm_w_scratch().get<uint8_t>(blocks * kUnpackedBlockBytes<F>);
  if (m0 == 0)
    unpack_group<F>(a.groups + n / kGroupRows * blocks * GroupLayout<F>::kBlockBytes, blocks, unpacked);
  group_tile<F, MR>(a, m0, n, n_end, step, unpacked);
}

}  // namespace

void gemm_q8_groups_avx2(const QGemmArgs& a, int64_t n0, int64_t n1) { run_groups<Avx2GroupTile>(a, n0, n1); }

}  // namespace troupe::kernels::cpu
