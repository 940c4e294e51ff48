// Indexer scoring and top-k of MODEL.md §5.4.
//   score[j] = Σ_h relu(q_h · K_j) · w_h   for candidate rows j, else -inf
// and rank(): value descending, equal values -> lower index first. Exact ties are
// common (all-relu-zero rows score exactly 0), so the tie rule is part of the result.
#pragma once

#include <cstdint>

namespace troupe::kernels {

struct IndexerScoreParams {
  const float* q = nullptr;           // [M, heads, dim] (already mxfp4 fake-quantized)
  const float* w = nullptr;           // [M, heads] per-head weights (already scaled)
  const float* keys = nullptr;        // [rows, dim] index keys (dequantized)
  const int64_t* visible = nullptr;   // [M] rows j < visible[m] may be scored
  const int32_t* candidates = nullptr;// [M, max_candidates] rows to score (-1 = none); null = all visible
  int64_t max_candidates = 0;
  float* score = nullptr;             // [M, rows]; -inf where not visible / not a candidate
  int64_t m = 0;
  int64_t heads = 0;
  int64_t dim = 0;
  int64_t rows = 0;
};
void indexer_score(const IndexerScoreParams& p);

// Writes the first min(k, #finite) indices of rank(score[0..n)) whose score > -inf,
// in rank order, to out; returns how many were written. +inf ranks first; NaN is
// left out like -inf; -0 and +0 are equal (ranked by index).
int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out);

namespace ref {
void indexer_score(const IndexerScoreParams& p);
int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out);
}  // namespace ref
namespace cpu {
void indexer_score(const IndexerScoreParams& p);
int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out);
}  // namespace cpu
namespace cuda {
void indexer_score(const IndexerScoreParams& p);
// score and out are device memory; waits for the stream to return the count.
int64_t topk(const float* score, int64_t n, int64_t k, int32_t* out);
}  // namespace cuda

}  // namespace troupe::kernels
