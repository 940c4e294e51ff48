// AVX-512 indexer rows: 16 heads per vector lane group, so each key channel is one
// broadcast multiplied into every head; no horizontal sum until the final score.
// Rows go 4 at a time (8 independent accumulators hide the FMA latency), the tail
// one at a time through the same template, so grouping never changes a score.
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/indexer_rows.h"

namespace troupe::kernels::cpu {
namespace {

using avx512::unroll;

// Adds Σ over the V head vectors starting at head h0 of relu(q_h · key_r) · w_h
// to total[r], for R rows.
template <int R, int V>
void head_chunk(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                int64_t h0, __m512* total) {
  __m512 acc[R][V] = {};
  for (int64_t d = 0; d < dim; ++d) {
    __m512 qv[V];
    unroll<V>([&](auto v) { qv[v] = _mm512_loadu_ps(qT + d * hp + h0 + 16 * v); });
    unroll<R>([&](auto r) {
      const __m512 k = _mm512_set1_ps(keys[r * dim + d]);
      unroll<V>([&](auto v) { acc[r][v] = _mm512_fmadd_ps(k, qv[v], acc[r][v]); });
    });
  }
  const __m512 zero = _mm512_setzero_ps();
  unroll<R>([&](auto r) {
    unroll<V>([&](auto v) {
      const __m512 relu = _mm512_max_ps(acc[r][v], zero);
      total[r] = _mm512_fmadd_ps(relu, _mm512_loadu_ps(w + h0 + 16 * v), total[r]);
    });
  });
}

template <int R>
void score_block(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                 float* out) {
  __m512 total[R] = {};
  int64_t h0 = 0;
  for (; h0 + 32 <= hp; h0 += 32) head_chunk<R, 2>(qT, w, hp, dim, keys, h0, total);
  if (h0 < hp) head_chunk<R, 1>(qT, w, hp, dim, keys, h0, total);
  unroll<R>([&](auto r) { out[r] = avx512::hsum(total[r]); });
}

void rows(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
          int64_t n_rows, float* out) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) score_block<4>(qT, w, hp, dim, keys + r * dim, out + r);
  for (; r < n_rows; ++r) score_block<1>(qT, w, hp, dim, keys + r * dim, out + r);
}

}  // namespace

IndexerRowsFn avx512_indexer_rows() {
  return rows;
}

}  // namespace troupe::kernels::cpu
