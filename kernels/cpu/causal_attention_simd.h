// The causal GQA attention algorithm, written once over a vector type S and
// instantiated by each path's file (portable, AVX2, AVX-512) with its own S:
//
//   S::V, S::W (lanes); zero, set1, load, load_part(p, n), store, store_part(p, v, n);
//   add, sub, mul, max, fma(a, b, c) = a·b + c; exp; hsum, hmax;
//   keep_le(s, pos, j): lanes with j <= pos keep s, the others become -inf.
//
// Everything sits in an unnamed namespace: each file gets its own copy, compiled with
// its own -m flags (no inline function shared across flags).
//
// Prefill (tile): the rows of one tile are query rows x the group's heads, one row per
// lane ("rows in lanes"), so the online softmax is all vertical: no horizontal sums.
//
//   qt [hd][R]   q rows transposed, scaled       S[j][R] = Σ_d K_j[d] · qt[d][R]
//   ot [hd][R]   running Σ p · V, transposed     ot[d][R] += V_j[d] · P[j][R]
//
// Every K_j[d] and V_j[d] is broadcast into R/W vector FMAs, and each key block's K and
// V rows are read once per tile for all its rows (heads of the group included).
//
// Decode (one query row): lanes run along hd; each key's K and V rows are loaded once
// for all the group's heads; logits are horizontal sums, the weighted sum is vertical.
// A long decode runs as several items of keys (kDecodeSplitKeys), each leaving its
// partial sums for causal_attention.cpp to merge.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/causal_attention.h"
#include "kernels/cpu/unroll.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kTileKeys = 64;    // keys per online-softmax step of a tile
constexpr int64_t kDecodeKeys = 64;  // the same for decode (a multiple of every W)
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

// Decode reads each key's K and V row slice ([hd] floats at `off`) through its own
// pointer (a paged row, a cache row), which the hardware prefetcher cannot follow: with
// the cache out of L3 each row waited on DRAM in turn. The row kDecodePrefetchKeys keys on
// is fetched ahead, all its lines.
constexpr int64_t kDecodePrefetchKeys = 8;

inline void prefetch_floats(const float* p, int64_t n) {
  for (int64_t d = 0; d < n; d += 16) __builtin_prefetch(p + d);
}

template <class S>
void exp_rows(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + S::W <= n; i += S::W) S::store(y + i, S::exp(S::load(x + i)));
  if (i < n) S::store_part(y + i, S::exp(S::load_part(x + i, n - i)), n - i);
}

// sc[j][R] = Σ_d krows[j][off + d] · qt[d][R] for j < n, KB keys per register block;
// the keys past n in the last block repeat key n - 1, and are stored too (sc has KB - 1
// rows to spare; never read): with the store under `j + b < n` GCC kept 9 of the 16
// AVX-512 accumulators in memory as well, a store each per dimension (1.37x slower).
template <class S, int NV, int KB>
void tile_logits(const float* qt, int64_t hd, const float* const* krows, int64_t off, int64_t n,
                 float* sc) {
  constexpr int64_t R = NV * S::W;
  for (int64_t j = 0; j < n; j += KB) {
    const float* k[KB];
    unroll<KB>([&](auto b) { k[b] = krows[std::min<int64_t>(j + b, n - 1)] + off; });
    typename S::V acc[KB][NV];
    unroll<KB>([&](auto b) { unroll<NV>([&](auto v) { acc[b][v] = S::zero(); }); });
    for (int64_t d = 0; d < hd; ++d) {
      typename S::V q[NV];
      unroll<NV>([&](auto v) { q[v] = S::load(qt + d * R + v * S::W); });
      unroll<KB>([&](auto b) {
        const typename S::V kd = S::set1(k[b][d]);
        unroll<NV>([&](auto v) { acc[b][v] = S::fma(kd, q[v], acc[b][v]); });
      });
    }
    unroll<KB>([&](auto b) {
      unroll<NV>([&](auto v) { S::store(sc + (j + b) * R + v * S::W, acc[b][v]); });
    });
  }
}

// ot[d][R] = ot[d][R] · c[R] + Σ_{j<n} vrows[j][off + d] · p[j][R], DB dims per block.
template <class S, int NV, int DB>
void tile_accumulate(const float* p, const float* const* vrows, int64_t off, int64_t n,
                     int64_t d0, const typename S::V* c, float* ot) {
  constexpr int64_t R = NV * S::W;
  typename S::V acc[DB][NV];
  unroll<DB>([&](auto e) {
    unroll<NV>([&](auto v) { acc[e][v] = S::mul(S::load(ot + (d0 + e) * R + v * S::W), c[v]); });
  });
  for (int64_t j = 0; j < n; ++j) {
    typename S::V pj[NV];
    unroll<NV>([&](auto v) { pj[v] = S::load(p + j * R + v * S::W); });
    const float* vr = vrows[j] + off + d0;
    unroll<DB>([&](auto e) {
      const typename S::V vd = S::set1(vr[e]);
      unroll<NV>([&](auto v) { acc[e][v] = S::fma(vd, pj[v], acc[e][v]); });
    });
  }
  unroll<DB>([&](auto e) {
    unroll<NV>([&](auto v) { S::store(ot + (d0 + e) * R + v * S::W, acc[e][v]); });
  });
}

// One online-softmax step over a key block's logits sc [n][R]: m and l per lane, sc
// turned into weights e^{ℓ - m}, c the factor that rescales the earlier sums.
template <class S, int NV>
void tile_softmax(float* sc, int64_t n, typename S::V* m, typename S::V* l, typename S::V* c) {
  constexpr int64_t R = NV * S::W;
  unroll<NV>([&](auto v) {
    typename S::V bm = S::set1(kMinusInf);
    for (int64_t j = 0; j < n; ++j) bm = S::max(bm, S::load(sc + j * R + v * S::W));
    const typename S::V nm = S::max(m[v], bm);  // finite: key 0 is in every row's first block
    c[v] = S::exp(S::sub(m[v], nm));            // e^{-inf} = 0 on the first block
    m[v] = nm;
    typename S::V sum = S::mul(l[v], c[v]);
    for (int64_t j = 0; j < n; ++j) {
      const typename S::V e = S::exp(S::sub(S::load(sc + j * R + v * S::W), nm));
      S::store(sc + j * R + v * S::W, e);
      sum = S::add(sum, e);
    }
    l[v] = sum;
  });
}

template <class S, int NV, int KB, int DB>
void attend_tile(const CausalAttentionParams& p, const CausalAttentionSeq& sq, int64_t g,
                 int64_t r0, int64_t rows) {
  constexpr int64_t R = NV * S::W;
  const int64_t H = p.heads, hd = p.head_dim, group = H / p.kv_heads,
                off = sq.kv_head_offset(g, hd);
  // sc has room for the last register block's keys past n (tile_logits stores them).
  scratch_vector<float> qt(size_t(hd * R)), ot(size_t(hd * R), 0.0f),
      sc(size_t((kTileKeys + KB - 1) * R));
  float pos[R];
  // Lanes past `rows` repeat the last row: finite values, never written out.
  const auto q_row = [&](int64_t r) {
    const int64_t i = r0 + std::min(r, rows - 1);
    return (i / group * H + g * group + i % group) * hd;
  };
  for (int64_t r = 0; r < R; ++r) {
    const float* q = sq.q + q_row(r);
    for (int64_t d = 0; d < hd; ++d) qt[d * R + r] = q[d] * p.scale;
    pos[r] = static_cast<float>(sq.start + (r0 + std::min(r, rows - 1)) / group);
  }
  typename S::V m[NV], l[NV], c[NV], posv[NV];
  unroll<NV>([&](auto v) {
    m[v] = S::set1(kMinusInf), l[v] = S::zero(), posv[v] = S::load(pos + v * S::W);
  });
  const int64_t first = sq.start + r0 / group, keys = sq.start + (r0 + rows - 1) / group + 1;
  for (int64_t j0 = 0; j0 < keys; j0 += kTileKeys) {
    const int64_t n = std::min(kTileKeys, keys - j0);
    tile_logits<S, NV, KB>(qt.data(), hd, sq.k_rows + j0, off, n, sc.data());
    for (int64_t j = std::max<int64_t>(0, first + 1 - j0); j < n; ++j)  // past some row's position
      unroll<NV>([&](auto v) {
        float* s = sc.data() + j * R + v * S::W;
        S::store(s, S::keep_le(S::load(s), posv[v], S::set1(static_cast<float>(j0 + j))));
      });
    tile_softmax<S, NV>(sc.data(), n, m, l, c);
    int64_t d = 0;
    for (; d + DB <= hd; d += DB)
      tile_accumulate<S, NV, DB>(sc.data(), sq.v_rows + j0, off, n, d, c, ot.data());
    for (; d < hd; ++d) tile_accumulate<S, NV, 1>(sc.data(), sq.v_rows + j0, off, n, d, c, ot.data());
  }
  float inv[R];
  unroll<NV>([&](auto v) { S::store(inv + v * S::W, l[v]); });
  for (int64_t r = 0; r < rows; ++r) {
    float* out = sq.out + q_row(r);
    const float f = 1.0f / inv[r];
    for (int64_t d = 0; d < hd; ++d) out[d] = ot[d * R + r] * f;
  }
}

// Vector c of [0, hd), the last one partial.
template <class S>
typename S::V load_chunk(const float* x, int64_t c, int64_t hd) {
  const int64_t d = c * S::W;
  return d + S::W <= hd ? S::load(x + d) : S::load_part(x + d, hd - d);
}
template <class S>
void store_chunk(float* x, int64_t c, int64_t hd, typename S::V v) {
  const int64_t d = c * S::W;
  if (d + S::W <= hd) S::store(x + d, v);
  else S::store_part(x + d, v, hd - d);
}

// lg[h·kDecodeKeys + j] = scale · q_h · K_j for HB heads from h0, j < n; two keys at a
// time (2·HB independent FMA chains), the second of an odd tail repeating the first.
template <class S, int HB>
void decode_logits(const float* q, int64_t h0, int64_t hd, const float* const* krows,
                   int64_t off, int64_t n, float scale, float* lg) {
  constexpr int KB = 2;
  const int64_t chunks = (hd + S::W - 1) / S::W;
  for (int64_t j = 0; j < n; j += KB) {
    const float* k[KB];
    unroll<KB>([&](auto b) { k[b] = krows[std::min<int64_t>(j + b, n - 1)] + off; });
    for (int64_t a = j + kDecodePrefetchKeys; a < std::min(n, j + KB + kDecodePrefetchKeys); ++a)
      prefetch_floats(krows[a] + off, hd);
    typename S::V acc[KB][HB];
    unroll<KB>([&](auto b) { unroll<HB>([&](auto h) { acc[b][h] = S::zero(); }); });
    for (int64_t c = 0; c < chunks; ++c) {
      typename S::V kc[KB];
      unroll<KB>([&](auto b) { kc[b] = load_chunk<S>(k[b], c, hd); });
      unroll<HB>([&](auto h) {
        const typename S::V qc = load_chunk<S>(q + (h0 + h) * hd, c, hd);
        unroll<KB>([&](auto b) { acc[b][h] = S::fma(qc, kc[b], acc[b][h]); });
      });
    }
    unroll<KB>([&](auto b) {
      if (j + b < n)
        unroll<HB>([&](auto h) { lg[(h0 + h) * kDecodeKeys + j + b] = S::hsum(acc[b][h]) * scale; });
    });
  }
}

// o_h[CH chunks from ch] = o_h · c_h + Σ_{j<n} lg[h][j] · V_j for HB heads from h0:
// HB·CH accumulators, each V chunk loaded once for all the heads.
template <class S, int HB, int CH>
void decode_accumulate_block(const float* lg, int64_t h0, int64_t hd, const float* const* vrows,
                             int64_t off, int64_t n, int64_t ch, const float* c, float* o) {
  typename S::V acc[HB][CH];
  unroll<HB>([&](auto h) {
    unroll<CH>([&](auto e) {
      acc[h][e] = S::mul(load_chunk<S>(o + (h0 + h) * hd, ch + e, hd), S::set1(c[h0 + h]));
    });
  });
  for (int64_t j = 0; j < n; ++j) {
    if (j + kDecodePrefetchKeys < n)
      prefetch_floats(vrows[j + kDecodePrefetchKeys] + off + ch * S::W, std::min<int64_t>(CH * S::W, hd - ch * S::W));
    typename S::V vc[CH];
    unroll<CH>([&](auto e) { vc[e] = load_chunk<S>(vrows[j] + off, ch + e, hd); });
    unroll<HB>([&](auto h) {
      const typename S::V w = S::set1(lg[(h0 + h) * kDecodeKeys + j]);
      unroll<CH>([&](auto e) { acc[h][e] = S::fma(w, vc[e], acc[h][e]); });
    });
  }
  unroll<HB>([&](auto h) {
    unroll<CH>([&](auto e) { store_chunk<S>(o + (h0 + h) * hd, ch + e, hd, acc[h][e]); });
  });
}

template <class S, int HB>
void decode_accumulate(const float* lg, int64_t h0, int64_t hd, const float* const* vrows,
                       int64_t off, int64_t n, const float* c, float* o) {
  const int64_t chunks = (hd + S::W - 1) / S::W;
  int64_t ch = 0;
  for (; ch + 4 <= chunks; ch += 4)
    decode_accumulate_block<S, HB, 4>(lg, h0, hd, vrows, off, n, ch, c, o);
  for (; ch < chunks; ++ch) decode_accumulate_block<S, HB, 1>(lg, h0, hd, vrows, off, n, ch, c, o);
}

// Online-softmax step of one head over lg[0, n): the tail up to a whole vector is -inf
// (weight 0), so the max, exp and sum run on whole vectors.
template <class S>
void decode_softmax(float* lg, int64_t n, float& m, float& l, float& c) {
  const int64_t padded = (n + S::W - 1) / S::W * S::W;
  std::fill(lg + n, lg + padded, kMinusInf);
  typename S::V bm = S::set1(kMinusInf);
  for (int64_t j = 0; j < padded; j += S::W) bm = S::max(bm, S::load(lg + j));
  const float nm = std::max(m, S::hmax(bm));
  float factor;
  S::store_part(&factor, S::exp(S::set1(m - nm)), 1);
  typename S::V sum = S::zero();
  for (int64_t j = 0; j < padded; j += S::W) {
    const typename S::V e = S::exp(S::sub(S::load(lg + j), S::set1(nm)));
    S::store(lg + j, e);
    sum = S::add(sum, e);
  }
  c = factor, m = nm, l = l * factor + S::hsum(sum);
}

template <class S, int HB>
void attend_decode(const CausalAttentionParams& p, const CausalAttentionSeq& sq, int64_t g,
                   int64_t first, int64_t last, const DecodePart* part) {
  const int64_t group = p.heads / p.kv_heads, hd = p.head_dim, off = sq.kv_head_offset(g, hd);
  const float* q = sq.q + g * group * hd;  // the group's heads are adjacent rows
  scratch_vector<float> o(size_t(group * hd), 0.0f), lg(size_t(group * kDecodeKeys));
  scratch_vector<float> m(size_t(group), kMinusInf), l(size_t(group), 0.0f), c(size_t(group), 1.0f);
  for (int64_t j0 = first; j0 < last; j0 += kDecodeKeys) {
    const int64_t n = std::min(kDecodeKeys, last - j0);
    int64_t h = 0;
    for (; h + HB <= group; h += HB)
      decode_logits<S, HB>(q, h, hd, sq.k_rows + j0, off, n, p.scale, lg.data());
    for (; h < group; ++h) decode_logits<S, 1>(q, h, hd, sq.k_rows + j0, off, n, p.scale, lg.data());
    for (h = 0; h < group; ++h) decode_softmax<S>(lg.data() + h * kDecodeKeys, n, m[h], l[h], c[h]);
    for (h = 0; h + HB <= group; h += HB)
      decode_accumulate<S, HB>(lg.data(), h, hd, sq.v_rows + j0, off, n, c.data(), o.data());
    for (; h < group; ++h)
      decode_accumulate<S, 1>(lg.data(), h, hd, sq.v_rows + j0, off, n, c.data(), o.data());
  }
  if (part != nullptr) {
    std::copy(o.begin(), o.end(), part->o);
    std::copy(m.begin(), m.end(), part->m);
    std::copy(l.begin(), l.end(), part->l);
    return;
  }
  for (int64_t h = 0; h < group; ++h) {
    float* out = sq.out + (g * group + h) * hd;
    const float f = 1.0f / l[h];
    for (int64_t d = 0; d < hd; ++d) out[d] = o[h * hd + d] * f;
  }
}

// The kernel table of a path: tiles of NV vectors of rows, KB keys and DB dims per
// register block; decode with HB heads per block.
template <class S, int NV, int KB, int DB, int HB>
CausalAttentionKernels make_causal_attention_kernels() {
  return {attend_tile<S, NV, KB, DB>, NV * S::W, attend_decode<S, HB>, exp_rows<S>};
}

}  // namespace
}  // namespace troupe::kernels::cpu
