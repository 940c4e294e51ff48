// The dense loops of attention's key tiles (attention_rows.h: AttentionKernels) written
// once over a vector type S (S::V of S::W lanes; zero, set1, load, load_part, store,
// store_part, fma, hsum: avx2_vec.h / avx512_vec.h `Simd`) and instantiated by
// attention_avx2.cpp and attention_avx512.cpp with register blockings that fit their
// register files (everything here sits in an unnamed namespace, each file compiled with
// its own -m flags):
//   logits: DH heads x DT keys per pass, each key chunk loaded once for all DH heads;
//   accumulate: AH heads x AC vectors of accumulators held in registers across the
//   whole key tile.
// Whole vectors go through plain loads and stores, a ragged tail of dim through
// load_part / store_part. exp_sum is norm_simd.h's exp_shift_sum.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/unroll.h"

namespace troupe::kernels::cpu {
namespace {

// out[h·ld + t] = q_h · keys[t] for h < H, t < T.
template <class S, int H, int T>
void attention_dot_block(const float* q, int64_t dim, const float* const* keys, float* out, int64_t ld) {
  using V = typename S::V;
  V acc[H][T];
  for (auto& row : acc)
    for (V& a : row) a = S::zero();
  int64_t d = 0;
  const auto step = [&](auto load) {
    V kv[T];
    unroll<T>([&](auto t) { kv[t] = load(keys[t] + d); });
    unroll<H>([&](auto h) {
      const V qv = load(q + h * dim + d);
      unroll<T>([&](auto t) { acc[h][t] = S::fma(qv, kv[t], acc[h][t]); });
    });
  };
  for (; d + S::W <= dim; d += S::W) step([](const float* p) { return S::load(p); });
  if (d < dim) step([left = dim - d](const float* p) { return S::load_part(p, left); });
  unroll<H>([&](auto h) { unroll<T>([&](auto t) { out[h * ld + t] = S::hsum(acc[h][t]); }); });
}

template <class S, int DH, int DT>
void attention_logits(const float* q, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
                      float* out) {
  using Fn = void (*)(const float*, int64_t, const float* const*, float*, int64_t);
  static const auto blocks = [] {  // blocks[h - 1][t - 1]: h heads x t keys
    std::array<std::array<Fn, DT>, DH> b{};
    unroll<DH>([&](auto h) { unroll<DT>([&](auto t) { b[h][t] = attention_dot_block<S, h + 1, t + 1>; }); });
    return b;
  }();
  for (int64_t h = 0; h < nh; h += DH) {
    const int64_t hn = std::min<int64_t>(DH, nh - h);
    for (int64_t t = 0; t < nt; t += DT) {
      const int64_t tn = std::min<int64_t>(DT, nt - t);
      blocks[hn - 1][tn - 1](q + h * dim, dim, keys + t, out + h * nt + t, nt);
    }
  }
}

// acc_h[d .. d+W·C) += Σ_t w[h·nt + t] · keys[t][d .. d+W·C) for h < H; with kTail the
// last vector holds only the `left` lanes below dim.
template <class S, int H, int C, bool kTail>
void attention_accumulate_span(const float* w, int64_t nt, int64_t dim, const float* const* keys,
                               int64_t d, float* acc, int64_t left) {
  using V = typename S::V;
  const auto load = [&](const float* p, int c) {
    return kTail && c == C - 1 ? S::load_part(p, left) : S::load(p);
  };
  V a[H][C];
  unroll<H>([&](auto h) { unroll<C>([&](auto c) { a[h][c] = load(acc + h * dim + d + S::W * c, c); }); });
  for (int64_t t = 0; t < nt; ++t) {
    V kv[C];
    unroll<C>([&](auto c) { kv[c] = load(keys[t] + d + S::W * c, c); });
    unroll<H>([&](auto h) {
      const V wv = S::set1(w[h * nt + t]);
      unroll<C>([&](auto c) { a[h][c] = S::fma(wv, kv[c], a[h][c]); });
    });
  }
  unroll<H>([&](auto h) {
    unroll<C>([&](auto c) {
      float* out = acc + h * dim + d + S::W * c;
      if (kTail && c == C - 1) S::store_part(out, a[h][c], left);
      else S::store(out, a[h][c]);
    });
  });
}

template <class S, int H, int AC>
void attention_accumulate_heads(const float* w, int64_t nt, int64_t dim, const float* const* keys, float* acc) {
  int64_t d = 0;
  for (; d + AC * S::W <= dim; d += AC * S::W)
    attention_accumulate_span<S, H, AC, false>(w, nt, dim, keys, d, acc, 0);
  for (; d + S::W <= dim; d += S::W) attention_accumulate_span<S, H, 1, false>(w, nt, dim, keys, d, acc, 0);
  if (d < dim) attention_accumulate_span<S, H, 1, true>(w, nt, dim, keys, d, acc, dim - d);
}

template <class S, int AH, int AC>
void attention_accumulate(const float* w, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
                          float* acc) {
  int64_t h = 0;
  for (; h + AH <= nh; h += AH) attention_accumulate_heads<S, AH, AC>(w + h * nt, nt, dim, keys, acc + h * dim);
  for (; h + 2 <= nh; h += 2) attention_accumulate_heads<S, 2, AC>(w + h * nt, nt, dim, keys, acc + h * dim);
  if (h < nh) attention_accumulate_heads<S, 1, AC>(w + h * nt, nt, dim, keys, acc + h * dim);
}

}  // namespace
}  // namespace troupe::kernels::cpu
