// Scalar reference indexer score and top-k (MODEL.md §5.4).
#include "kernels/indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace troupe::kernels::ref {
namespace {

// Σ_h relu(q_h · K_j) · w_h; sums in f64, each head's dot and term rounded to f32.
float score_row(const IndexerScoreParams& p, int64_t m, int64_t j) {
  const float* key = p.keys + j * p.dim;
  double total = 0;
  for (int64_t h = 0; h < p.heads; ++h) {
    const float* q = p.q + (m * p.heads + h) * p.dim;
    double dot = 0;
    for (int64_t d = 0; d < p.dim; ++d) dot += double(q[d]) * double(key[d]);
    total += std::max(static_cast<float>(dot), 0.0f) * p.w[m * p.heads + h];
  }
  return static_cast<float>(total);
}

}  // namespace

void indexer_score(const IndexerScoreParams& p) {
  for (int64_t m = 0; m < p.m; ++m) {
    float* row = p.score + m * p.rows;
    std::fill(row, row + p.rows, -std::numeric_limits<float>::infinity());
    if (!p.candidates) {
      for (int64_t j = 0; j < p.visible[m]; ++j) row[j] = score_row(p, m, j);
      continue;
    }
    for (int64_t c = 0; c < p.max_candidates; ++c) {
      const int64_t j = p.candidates[m * p.max_candidates + c];
      if (j >= 0 && j < p.visible[m]) row[j] = score_row(p, m, j);
    }
  }
}

int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out) {
  std::vector<int32_t> idx;
  for (int64_t j = 0; j < n; ++j)
    if (score[j] > -std::numeric_limits<float>::infinity()) idx.push_back(static_cast<int32_t>(j));
  // rank: value descending, equal values (including -0 == +0) -> lower index first.
  std::sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) {
    return score[a] > score[b] || (score[a] == score[b] && a < b);
  });
  const int64_t count = std::min<int64_t>(k, idx.size());
  std::copy(idx.begin(), idx.begin() + count, out);
  return count;
}

}  // namespace troupe::kernels::ref
