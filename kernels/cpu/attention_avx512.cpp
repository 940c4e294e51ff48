// AVX-512 inner kernels for attention: register-blocked dots (4 heads x 4 keys per
// pass, each key chunk loaded once for all 4 heads) and a weighted sum that keeps
// 4 heads x 4 vectors of accumulators in registers across the whole key tile.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/avx512_vec.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;
using avx512::hsum;
using avx512::unroll;

inline __mmask16 chunk_mask(int64_t d, int64_t dim) {
  return d + 16 <= dim ? __mmask16(0xFFFF) : first_lanes(dim - d);
}

// out[h·ld + t] = q_h · keys[t] for h < H, t < T.
template <int H, int T>
void dot_block(const float* q, int64_t dim, const float* const* keys, float* out, int64_t ld) {
  __m512 acc[H][T] = {};
  for (int64_t d = 0; d < dim; d += 16) {
    const __mmask16 m = chunk_mask(d, dim);
    __m512 kv[T];
    unroll<T>([&](auto t) { kv[t] = _mm512_maskz_loadu_ps(m, keys[t] + d); });
    unroll<H>([&](auto h) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * dim + d);
      unroll<T>([&](auto t) { acc[h][t] = _mm512_fmadd_ps(qv, kv[t], acc[h][t]); });
    });
  }
  unroll<H>([&](auto h) { unroll<T>([&](auto t) { out[h * ld + t] = hsum(acc[h][t]); }); });
}

using DotBlockFn = void (*)(const float*, int64_t, const float* const*, float*, int64_t);
template <int H>
constexpr DotBlockFn kDotRow[4] = {dot_block<H, 1>, dot_block<H, 2>, dot_block<H, 3>,
                                   dot_block<H, 4>};
constexpr const DotBlockFn* kDotBlocks[4] = {kDotRow<1>, kDotRow<2>, kDotRow<3>, kDotRow<4>};

void logits(const float* q, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
            float* out) {
  for (int64_t h = 0; h < nh; h += 4) {
    const int64_t hn = std::min<int64_t>(4, nh - h);
    for (int64_t t = 0; t < nt; t += 4) {
      const int64_t tn = std::min<int64_t>(4, nt - t);
      kDotBlocks[hn - 1][tn - 1](q + h * dim, dim, keys + t, out + h * nt + t, nt);
    }
  }
}

// acc_h[d .. d+16C) += Σ_t w[h·nt + t] · keys[t][d .. d+16C) for h < H; the last
// vector is masked by `last`.
template <int H, int C>
void accumulate_span(const float* w, int64_t nt, int64_t dim, const float* const* keys, int64_t d,
                     float* acc, __mmask16 last) {
  const auto mask = [last](int c) { return c == C - 1 ? last : __mmask16(0xFFFF); };
  __m512 a[H][C];
  unroll<H>([&](auto h) {
    unroll<C>(
        [&](auto c) { a[h][c] = _mm512_maskz_loadu_ps(mask(c), acc + h * dim + d + 16 * c); });
  });
  for (int64_t t = 0; t < nt; ++t) {
    __m512 kv[C];
    unroll<C>([&](auto c) { kv[c] = _mm512_maskz_loadu_ps(mask(c), keys[t] + d + 16 * c); });
    unroll<H>([&](auto h) {
      const __m512 wv = _mm512_set1_ps(w[h * nt + t]);
      unroll<C>([&](auto c) { a[h][c] = _mm512_fmadd_ps(wv, kv[c], a[h][c]); });
    });
  }
  unroll<H>([&](auto h) {
    unroll<C>([&](auto c) { _mm512_mask_storeu_ps(acc + h * dim + d + 16 * c, mask(c), a[h][c]); });
  });
}

template <int H>
void accumulate_heads(const float* w, int64_t nt, int64_t dim, const float* const* keys,
                      float* acc) {
  int64_t d = 0;
  for (; d + 64 <= dim; d += 64) accumulate_span<H, 4>(w, nt, dim, keys, d, acc, 0xFFFF);
  for (; d < dim; d += 16) accumulate_span<H, 1>(w, nt, dim, keys, d, acc, chunk_mask(d, dim));
}

void accumulate(const float* w, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
                float* acc) {
  int64_t h = 0;
  for (; h + 4 <= nh; h += 4) accumulate_heads<4>(w + h * nt, nt, dim, keys, acc + h * dim);
  for (; h + 2 <= nh; h += 2) accumulate_heads<2>(w + h * nt, nt, dim, keys, acc + h * dim);
  if (h < nh) accumulate_heads<1>(w + h * nt, nt, dim, keys, acc + h * dim);
}

float exp_sum(float* x, int64_t n, float shift) {
  __m512 sum = _mm512_setzero_ps();
  const __m512 vshift = _mm512_set1_ps(shift);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = chunk_mask(i, n);
    const __m512 e = avx512::exp(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), vshift));
    _mm512_mask_storeu_ps(x + i, m, e);
    sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(m, e));
  }
  return hsum(sum);
}

}  // namespace

const AttentionKernels& avx512_attention_kernels() {
  static const AttentionKernels k{logits, accumulate, exp_sum};
  return k;
}

}  // namespace troupe::kernels::cpu
