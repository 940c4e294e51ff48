// The indexer's row kernel (indexer_simd.h) on AVX-512: 16 lanes, 32 heads a chunk.
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/indexer_simd.h"

namespace troupe::kernels::cpu {

IndexerRowsFn avx512_indexer_rows() {
  return indexer_rows_simd<avx512::Simd>;
}

}  // namespace troupe::kernels::cpu
