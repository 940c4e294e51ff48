// Fast indexer scoring. Work is split into (row range, query) tasks, row-range
// major, so a range of keys stays in cache while every query scores it. A task
// owns score[m, range] outright: it writes -inf there, then the scores of the rows
// it may score (all visible rows, or the visible candidates in the range), so each
// output is written by exactly one task even when candidates repeat.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/indexer_rows.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/scratch.h"

namespace troupe::kernels::cpu {
namespace {

constexpr int64_t kRowTile = 64;          // dense scoring: 64 keys of 128 f32 = 32 KiB
constexpr int64_t kCandidateSplits = 16;  // candidate scoring: row ranges per query

void rows_portable(const float* qT, const float* w, int64_t hp, int64_t dim, const float* keys,
                   int64_t n_rows, float* out) {
  scratch_vector<float> acc(hp);
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* key = keys + r * dim;
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t d = 0; d < dim; ++d)
      for (int64_t h = 0; h < hp; ++h) acc[h] += key[d] * qT[d * hp + h];
    float total = 0;
    for (int64_t h = 0; h < hp; ++h) total += std::max(acc[h], 0.0f) * w[h];
    out[r] = total;
  }
}

// Per query: qT [dim, hp] and w [hp], zero-padded (see indexer_rows.h). Built
// once per call: tasks alternate queries, and re-transposing per task cost ~25%.
struct QueryLayout {
  int64_t hp = 0;
  scratch_vector<float> qT, w;  // [M, dim, hp], [M, hp]
};

QueryLayout transpose_queries(const IndexerScoreParams& p) {
  QueryLayout l;
  l.hp = (p.heads + 15) / 16 * 16;
  l.qT.assign(p.m * p.dim * l.hp, 0.0f);
  l.w.assign(p.m * l.hp, 0.0f);
  for (int64_t m = 0; m < p.m; ++m)
    for (int64_t h = 0; h < p.heads; ++h) {
      l.w[m * l.hp + h] = p.w[m * p.heads + h];
      for (int64_t d = 0; d < p.dim; ++d)
        l.qT[(m * p.dim + d) * l.hp + h] = p.q[(m * p.heads + h) * p.dim + d];
    }
  return l;
}

// Scores the visible candidates of query m that fall in [lo, hi), one call per
// run of consecutive rows (candidate blocks arrive as runs).
void score_candidates(const IndexerScoreParams& p, int64_t m, int64_t lo, int64_t hi,
                      const float* qT, const float* w, int64_t hp, IndexerRowsFn rows_fn) {
  const int32_t* cand = p.candidates + m * p.max_candidates;
  float* row = p.score + m * p.rows;
  hi = std::min(hi, p.visible[m]);
  for (int64_t c = 0; c < p.max_candidates; ++c) {
    const int64_t j = cand[c];
    if (j < lo || j >= hi) continue;
    int64_t len = 1;
    while (c + len < p.max_candidates && cand[c + len] == j + len && j + len < hi) ++len;
    rows_fn(qT, w, hp, p.dim, p.keys + j * p.dim, len, row + j);
    c += len - 1;
  }
}

}  // namespace

IndexerRowsFn portable_indexer_rows() {
  return rows_portable;
}

void indexer_score(const IndexerScoreParams& p, IndexerRowsFn rows_fn) {
  const QueryLayout l = transpose_queries(p);
  const int64_t tile =
      p.candidates ? std::max<int64_t>(1, (p.rows + kCandidateSplits - 1) / kCandidateSplits)
                   : kRowTile;
  const int64_t tiles = (p.rows + tile - 1) / tile;
  parallel_for(tiles * p.m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m = task % p.m;
      const int64_t lo = (task / p.m) * tile;
      const int64_t hi = std::min(lo + tile, p.rows);
      const float* qT = l.qT.data() + m * p.dim * l.hp;
      const float* w = l.w.data() + m * l.hp;
      float* row = p.score + m * p.rows;
      std::fill(row + lo, row + hi, -std::numeric_limits<float>::infinity());
      if (p.candidates) {
        score_candidates(p, m, lo, hi, qT, w, l.hp, rows_fn);
      } else if (lo < p.visible[m]) {
        const int64_t n = std::min(hi, p.visible[m]) - lo;
        rows_fn(qT, w, l.hp, p.dim, p.keys + lo * p.dim, n, row + lo);
      }
    }
  });
}

void indexer_score(const IndexerScoreParams& p) {
  switch (active_cpu_path()) {
    case CpuPath::Avx512: return indexer_score(p, avx512_indexer_rows());
    case CpuPath::Avx2: return indexer_score(p, avx2_indexer_rows());
    case CpuPath::Portable: return indexer_score(p, portable_indexer_rows());
  }
}

}  // namespace troupe::kernels::cpu
