// The indexer's row kernel (indexer_simd.h) on AVX2+FMA: 8 lanes, 16 heads a chunk.
#include <immintrin.h>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/indexer_simd.h"

namespace troupe::kernels::cpu {

IndexerRowsFn avx2_indexer_rows() {
  return indexer_rows_simd<avx2::Simd>;
}

}  // namespace troupe::kernels::cpu
