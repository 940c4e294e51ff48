// The indexer's row kernel (indexer_rows.h) written once over a vector type S (S::V of
// S::W lanes; zero, set1, load, fma, max, hsum: avx2_vec.h / avx512_vec.h `Simd`) and
// instantiated by indexer_avx2.cpp and indexer_avx512.cpp, each with its own -m flags
// (everything here sits in an unnamed namespace). Heads go 2·W per chunk (hp, a multiple
// of 16, may end on a chunk of W), so each key channel is one broadcast multiplied into
// every head of the chunk; no horizontal sum until the final score. Rows go 4 at a time
// (8 independent accumulators hide the FMA latency), the tail one at a time through the
// same template, so grouping never changes a score.
#pragma once

#include <cstdint>

#include "kernels/cpu/indexer_rows.h"
#include "kernels/cpu/unroll.h"

namespace troupe::kernels::cpu {
namespace {

// Adds Σ over the NV head vectors from head h0 of relu(q_h · key_r) · w_h to total[r],
// for R rows.
template <class S, int R, int NV>
void indexer_head_chunk(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                        int64_t h0, typename S::V* total) {
  using V = typename S::V;
  V acc[R][NV];
  for (auto& row : acc)
    for (V& a : row) a = S::zero();
  for (int64_t d = 0; d < dim; ++d) {
    V qv[NV];
    unroll<NV>([&](auto v) { qv[v] = S::load(qT + d * hp + h0 + S::W * v); });
    unroll<R>([&](auto r) {
      const V k = S::set1(keys[r * dim + d]);
      unroll<NV>([&](auto v) { acc[r][v] = S::fma(k, qv[v], acc[r][v]); });
    });
  }
  unroll<R>([&](auto r) {
    unroll<NV>([&](auto v) {
      total[r] = S::fma(S::max(acc[r][v], S::zero()), S::load(w + h0 + S::W * v), total[r]);
    });
  });
}

template <class S, int R>
void indexer_score_block(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                         float* out) {
  typename S::V total[R];
  for (auto& t : total) t = S::zero();
  int64_t h0 = 0;
  for (; h0 + 2 * S::W <= hp; h0 += 2 * S::W) indexer_head_chunk<S, R, 2>(qT, w, hp, dim, keys, h0, total);
  if (h0 < hp) indexer_head_chunk<S, R, 1>(qT, w, hp, dim, keys, h0, total);
  unroll<R>([&](auto r) { out[r] = S::hsum(total[r]); });
}

template <class S>
void indexer_rows_simd(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                       int64_t n_rows, float* out) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) indexer_score_block<S, 4>(qT, w, hp, dim, keys + r * dim, out + r);
  for (; r < n_rows; ++r) indexer_score_block<S, 1>(qT, w, hp, dim, keys + r * dim, out + r);
}

}  // namespace
}  // namespace troupe::kernels::cpu
