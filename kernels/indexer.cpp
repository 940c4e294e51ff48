#include "kernels/indexer.h"

#include <limits>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {
namespace {

void check_rows(const IndexerScoreParams& p) {
  for (int64_t m = 0; m < p.m; ++m)
    TROUPE_CHECK(p.visible[m] >= 0 && p.visible[m] <= p.rows, "indexer_score: visible[", m,
                 "] = ", p.visible[m], " is outside [0, rows = ", p.rows, "]");
  if (!p.candidates) return;
  for (int64_t i = 0; i < p.m * p.max_candidates; ++i)
    TROUPE_CHECK(p.candidates[i] >= -1 && p.candidates[i] < p.rows, "indexer_score: candidates[",
                 i / p.max_candidates, ", ", i % p.max_candidates, "] = ", p.candidates[i],
                 " is outside [-1, rows = ", p.rows, ")");
}

}  // namespace

void indexer_score(const IndexerScoreParams& p) {
  TROUPE_CHECK(p.m >= 0, "indexer_score: m must be >= 0, got ", p.m);
  TROUPE_CHECK(p.heads > 0, "indexer_score: heads must be > 0, got ", p.heads);
  TROUPE_CHECK(p.dim > 0, "indexer_score: dim must be > 0, got ", p.dim);
  TROUPE_CHECK(p.rows >= 0, "indexer_score: rows must be >= 0, got ", p.rows);
  TROUPE_CHECK(p.max_candidates >= 0, "indexer_score: max_candidates must be >= 0, got ",
               p.max_candidates);
  if (p.m == 0) return;
  TROUPE_CHECK(p.q != nullptr, "indexer_score: q is null");
  TROUPE_CHECK(p.w != nullptr, "indexer_score: w is null");
  TROUPE_CHECK(p.visible != nullptr, "indexer_score: visible is null");
  TROUPE_CHECK(p.keys != nullptr || p.rows == 0, "indexer_score: keys is null with rows ", p.rows);
  TROUPE_CHECK(p.score != nullptr || p.rows == 0, "indexer_score: score is null");
  if (active_backend() != Backend::Cuda) check_rows(p);  // device arrays: not read here
  if (p.rows == 0) return;
  switch (active_backend()) {
    case Backend::Ref:
      return ref::indexer_score(p);
    case Backend::Cpu:
      return cpu::indexer_score(p);
    case Backend::Cuda:
      return cuda::indexer_score(p);
  }
}

int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out) {
  TROUPE_CHECK(n >= 0 && n <= std::numeric_limits<int32_t>::max(),
               "topk: n must be in [0, 2^31), got ", n);
  TROUPE_CHECK(k >= 0, "topk: k must be >= 0, got ", k);
  if (n == 0 || k == 0) return 0;
  TROUPE_CHECK(score != nullptr, "topk: score is null");
  TROUPE_CHECK(out != nullptr, "topk: out is null");
  switch (active_backend()) {
    case Backend::Ref:
      return ref::topk(score, n, k, out);
    case Backend::Cpu:
      return cpu::topk(score, n, k, out);
    case Backend::Cuda:
      return cuda::topk(score, n, k, out);
  }
  return 0;
}

}  // namespace troupe::kernels
