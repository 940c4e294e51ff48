// The RMSNorm and softmax row kernels (norm_simd.h) on AVX2+FMA.
#include <immintrin.h>

#include "kernels/cpu/avx2_vec.h"
#include "kernels/cpu/norm_simd.h"

namespace troupe::kernels::cpu {

const NormRowKernels& avx2_norm_kernels() {
  static const NormRowKernels k{rms_norm_row_simd<avx2::Simd>, softmax_row_simd<avx2::Simd>};
  return k;
}

}  // namespace troupe::kernels::cpu
