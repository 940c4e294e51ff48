// AVX2 indexer rows: indexer_avx512.cpp's kernel on 8-lane vectors. 16 heads (the
// padding of hp) are two vectors, so each key channel is one broadcast multiplied into
// 16 heads; no horizontal sum until the final score. Rows go 4 at a time (8 independent
// accumulators hide the FMA latency), the tail one at a time through the same template,
// so grouping never changes a score.
#include <immintrin.h>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/indexer_rows.h"
#include "kernels/cpu/unroll.h"

namespace troupe::kernels::cpu {
namespace {

// Adds Σ over the 16 heads from h0 of relu(q_h · key_r) · w_h to total[r], for R rows.
template <int R>
void head_chunk(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                int64_t h0, __m256* total) {
  __m256 acc[R][2];
  for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
  for (int64_t d = 0; d < dim; ++d) {
    const __m256 q0 = _mm256_loadu_ps(qT + d * hp + h0), q1 = _mm256_loadu_ps(qT + d * hp + h0 + 8);
    unroll<R>([&](auto r) {
      const __m256 k = _mm256_broadcast_ss(keys + r * dim + d);
      acc[r][0] = _mm256_fmadd_ps(k, q0, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(k, q1, acc[r][1]);
    });
  }
  const __m256 zero = _mm256_setzero_ps();
  unroll<R>([&](auto r) {
    total[r] = _mm256_fmadd_ps(_mm256_max_ps(acc[r][0], zero), _mm256_loadu_ps(w + h0), total[r]);
    total[r] = _mm256_fmadd_ps(_mm256_max_ps(acc[r][1], zero), _mm256_loadu_ps(w + h0 + 8), total[r]);
  });
}

template <int R>
void score_block(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys, float* out) {
  __m256 total[R];
  for (__m256& t : total) t = _mm256_setzero_ps();
  for (int64_t h0 = 0; h0 < hp; h0 += 16) head_chunk<R>(qT, w, hp, dim, keys, h0, total);
  unroll<R>([&](auto r) { out[r] = avx2::hsum(total[r]); });
}

void rows(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys, int64_t n_rows,
          float* out) {
  int64_t r = 0;
  for (; r + 4 <= n_rows; r += 4) score_block<4>(qT, w, hp, dim, keys + r * dim, out + r);
  for (; r < n_rows; ++r) score_block<1>(qT, w, hp, dim, keys + r * dim, out + r);
}

}  // namespace

IndexerRowsFn avx2_indexer_rows() {
  return rows;
}

}  // namespace troupe::kernels::cpu
