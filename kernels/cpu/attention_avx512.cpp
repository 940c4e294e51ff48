// AVX-512 inner kernels for attention: register-blocked dots (4 heads x 2 keys per
// pass, each key chunk loaded once for all 4 heads) and a weighted sum that keeps
// 2 heads x 4 vectors of accumulators in registers across the whole key tile.
#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu/attention_rows.h"
#include "kernels/cpu/avx512_vec.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::first_lanes;

inline __mmask16 chunk_mask(int64_t d, int64_t dim) {
  return d + 16 <= dim ? __mmask16(0xFFFF) : first_lanes(dim - d);
}

// out[h·ld + t] = q_h · keys[t] for h < H, t < T.
template <int H, int T>
void dot_block(const float* q, int64_t dim, const float* const* keys, float* out, int64_t ld) {
  __m512 acc[H][T];
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t) acc[h][t] = _mm512_setzero_ps();
  for (int64_t d = 0; d < dim; d += 16) {
    const __mmask16 m = chunk_mask(d, dim);
    __m512 kv[T];
    for (int t = 0; t < T; ++t) kv[t] = _mm512_maskz_loadu_ps(m, keys[t] + d);
    for (int h = 0; h < H; ++h) {
      const __m512 qv = _mm512_maskz_loadu_ps(m, q + h * dim + d);
      for (int t = 0; t < T; ++t) acc[h][t] = _mm512_fmadd_ps(qv, kv[t], acc[h][t]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int t = 0; t < T; ++t) out[h * ld + t] = avx512::hsum(acc[h][t]);
}

using DotBlockFn = void (*)(const float*, int64_t, const float* const*, float*, int64_t);
constexpr DotBlockFn kDotBlocks[4][2] = {{dot_block<1, 1>, dot_block<1, 2>},
                                         {dot_block<2, 1>, dot_block<2, 2>},
                                         {dot_block<3, 1>, dot_block<3, 2>},
                                         {dot_block<4, 1>, dot_block<4, 2>}};

void logits(const float* q, int64_t nh, int64_t dim, const float* const* keys, int64_t nt,
            float* out) {
  for (int64_t h = 0; h < nh; h += 4) {
    const int64_t hn = std::min<int64_t>(4, nh - h);
    for (int64_t t = 0; t < nt; t += 2) {
      const int64_t tn = std::min<int64_t>(2, nt - t);
      kDotBlocks[hn - 1][tn - 1](q + h * dim, dim, keys + t, out + h * nt + t, nt);
    }
  }
}

// acc_h[d .. d+16C) += Σ_t w[h·nt + t] · keys[t][d .. d+16C) for h < H; the last
// vector is masked by `last`.
template <int H, int C>
void accumulate_span(const float* w, int64_t nt, int64_t dim, const float* const* keys,
                     int64_t d, float* acc, __mmask16 last) {
  __m512 a[H][C];
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c)
      a[h][c] = _mm512_maskz_loadu_ps(c == C - 1 ? last : 0xFFFF, acc + h * dim + d + 16 * c);
  for (int64_t t = 0; t < nt; ++t) {
    __m512 kv[C];
    for (int c = 0; c < C; ++c)
      kv[c] = _mm512_maskz_loadu_ps(c == C - 1 ? last : 0xFFFF, keys[t] + d + 16 * c);
    for (int h = 0; h < H; ++h) {
      const __m512 wv = _mm512_set1_ps(w[h * nt + t]);
      for (int c = 0; c < C; ++c) a[h][c] = _mm512_fmadd_ps(wv, kv[c], a[h][c]);
    }
  }
  for (int h = 0; h < H; ++h)
    for (int c = 0; c < C; ++c)
      _mm512_mask_storeu_ps(acc + h * dim + d + 16 * c, c == C - 1 ? last : 0xFFFF, a[h][c]);
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
  for (; h + 2 <= nh; h += 2) accumulate_heads<2>(w + h * nt, nt, dim, keys, acc + h * dim);
  if (h < nh) accumulate_heads<1>(w + h * nt, nt, dim, keys, acc + h * dim);
}

}  // namespace

const AttentionKernels& avx512_attention_kernels() {
  static const AttentionKernels k{logits, accumulate};
  return k;
}

}  // namespace troupe::kernels::cpu
