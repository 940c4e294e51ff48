// Row kernel behind cpu::indexer_score. The query is laid out head-minor so one
// key channel multiplies every head at once:
//
//   qT[d·hp + h] = q_h[d]     (hp = heads rounded up to 16; padded heads are 0,
//   w[h]         = w_h         with w = 0, so they add relu(0)·0 = 0)
//
// The AVX-512 kernel lives in indexer_avx512.cpp, the AVX2 one in indexer_avx2.cpp, the
// portable one in indexer.cpp.
// A row's score must not depend on how rows are grouped into calls, so the cpu
// backend's result is independent of tiling and thread count.
#pragma once

#include <cstdint>

#include "kernels/indexer.h"

namespace troupe::kernels::cpu {

// out[r] = Σ_h relu(Σ_d qT[d·hp + h] · keys[r·dim + d]) · w[h]   for r < n_rows.
using IndexerRowsFn = void (*)(const float* qT, const float* w, int64_t hp, int64_t dim,
                               const float* keys, int64_t n_rows, float* out);

IndexerRowsFn portable_indexer_rows();
IndexerRowsFn avx512_indexer_rows();  // call only when cpu_features().has_avx512()
IndexerRowsFn avx2_indexer_rows();    // call only when cpu_features().has_avx2()

void indexer_score(const IndexerScoreParams& p, IndexerRowsFn rows_fn);

}  // namespace troupe::kernels::cpu
