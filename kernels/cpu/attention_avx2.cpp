// AVX2 inner kernels for attention, attention_avx512.cpp's on 8-lane vectors fitted to
// 16 ymm registers: dots of 2 heads x 4 keys per pass (each key chunk loaded once for
// both heads, 8 accumulators), and a weighted sum that keeps 4 heads x 2 vectors of
// accumulators in registers across the whole key tile.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/unroll.h"

namespace troupe::kernels::cpu {
namespace {

using avx2::first_lanes;
using avx2::hsum;

// Lanes of the 8 floats from d that lie below n (all 8 but in a ragged tail).
inline __m256i chunk_mask(int64_t d, int64_t n) {
  return first_lanes(std::min<int64_t>(8, n - d));
}

// out[h·ld + t] = q_h · keys[t] for h < H, t < T.
template <int H, int T>
void dot_block(const float* q, int64_t dim, const float* const* keys, float* out, int64_t ld) {
  __m256 acc[H][T];
  for (auto& row : acc)
    for (__m256& a : row) a = _mm256_setzero_ps();
  int64_t d = 0;
  const auto step = [&](auto load) {
    __m256 kv[T];
    unroll<T>([&](auto t) { kv[t] = load(keys[t] + d); });
    unroll<H>([&](auto h) {
      const __m256 qv = load(q + h * dim + d);
      unroll<T>([&](auto t) { acc[h][t] = _mm256_fmadd_ps(qv, kv[t], acc[h][t]); });
    });
  };
  for (; d + 8 <= dim; d += 8) step([](const float* p) { return _mm256_loadu_ps(p); });
  if (d < dim) {
    const __m256i m = chunk_mask(d, dim);
    step([m](const float* p) { return _mm256_maskload_ps(p, m); });
  }
  unroll<H>([&](auto h) { unroll<T>([&](auto t) { out[h * ld + t] = hsum(acc[h][t]); }); });
}

using DotBlockFn = void (*)(const float*, int64_t, const float* const*, float*, int64_t);
template <int H>
constexpr DotBlockFn kDotRow[4] = {dot_block<H, 1>, dot_block<H, 2>, dot_block<H, 3>, dot_block<H, 4>};
constexpr const DotBlockFn* kDotBlocks[2] = {kDotRow<1>, kDotRow<2>};

void logits(const float* q, int64_t nh, int64_t dim, const float* const* keys, int64_t nt, float* out) {
  for (int64_t h = 0; h < nh; h += 2) {
    const int64_t hn = std::min<int64_t>(2, nh - h);
    for (int64_t t = 0; t < nt; t += 4) {
      const int64_t tn = std::min<int64_t>(4, nt - t);
      kDotBlocks[hn - 1][tn - 1](q + h * dim, dim, keys + t, out + h * nt + t, nt);
    }
  }
}

// acc_h[d .. d+8C) += Σ_t w[h·nt + t] · keys[t][d .. d+8C) for h < H; with kTail the
// last vector covers only the lanes of `last`.
template <int H, int C, bool kTail>
void accumulate_span(const float* w, int64_t nt, int64_t dim, const float* const* keys, int64_t d,
                     float* acc, __m256i last) {
  const auto load = [&](const float* p, int c) {
    return kTail && c == C - 1 ? _mm256_maskload_ps(p, last) : _mm256_loadu_ps(p);
  };
  __m256 a[H][C];
  unroll<H>([&](auto h) { unroll<C>([&](auto c) { a[h][c] = load(acc + h * dim + d + 8 * c, c); }); });
  for (int64_t t = 0; t < nt; ++t) {
    __m256 kv[C];
    unroll<C>([&](auto c) { kv[c] = load(keys[t] + d + 8 * c, c); });
    unroll<H>([&](auto h) {
      const __m256 wv = _mm256_broadcast_ss(w + h * nt + t);
      unroll<C>([&](auto c) { a[h][c] = _mm256_fmadd_ps(wv, kv[c], a[h][c]); });
    });
  }
  unroll<H>([&](auto h) {
    unroll<C>([&](auto c) {
      float* out = acc + h * dim + d + 8 * c;
      if (kTail && c == C - 1) _mm256_maskstore_ps(out, last, a[h][c]);
      else _mm256_storeu_ps(out, a[h][c]);
    });
  });
}

template <int H>
void accumulate_heads(const float* w, int64_t nt, int64_t dim, const float* const* keys, float* acc) {
  int64_t d = 0;
  for (; d + 16 <= dim; d += 16) accumulate_span<H, 2, false>(w, nt, dim, keys, d, acc, __m256i{});
  for (; d < dim; d += 8) accumulate_span<H, 1, true>(w, nt, dim, keys, d, acc, chunk_mask(d, dim));
}

void accumulate(const float* w, int64_t nh, int64_t dim, const float* const* keys, int64_t nt, float* acc) {
  int64_t h = 0;
  for (; h + 4 <= nh; h += 4) accumulate_heads<4>(w + h * nt, nt, dim, keys, acc + h * dim);
  for (; h + 2 <= nh; h += 2) accumulate_heads<2>(w + h * nt, nt, dim, keys, acc + h * dim);
  if (h < nh) accumulate_heads<1>(w + h * nt, nt, dim, keys, acc + h * dim);
}

float exp_sum(float* x, int64_t n, float shift) {
  __m256 sum = _mm256_setzero_ps();
  const __m256 vshift = _mm256_set1_ps(shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), vshift));
    _mm256_storeu_ps(x + i, e);
    sum = _mm256_add_ps(sum, e);
  }
  if (i < n) {  // masked: vmaskmovps stores are slow on AMD cores, so only the tail
    const __m256i m = chunk_mask(i, n);
    const __m256 e = avx2::exp(_mm256_sub_ps(_mm256_maskload_ps(x + i, m), vshift));
    _mm256_maskstore_ps(x + i, m, e);
    sum = _mm256_add_ps(sum, _mm256_and_ps(e, _mm256_castsi256_ps(m)));
  }
  return hsum(sum);
}

}  // namespace

const AttentionKernels& avx2_attention_kernels() {
  static const AttentionKernels k{logits, accumulate, exp_sum};
  return k;
}

}  // namespace troupe::kernels::cpu
