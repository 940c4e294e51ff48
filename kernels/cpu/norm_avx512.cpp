// The RMSNorm and softmax row kernels (norm_simd.h) on AVX-512 (selected by
// cpu::rms_norm / cpu::softmax only when cpu_features().has_avx512()).
#include <immintrin.h>

#include "kernels/cpu/avx512_vec.h"
#include "kernels/cpu/norm_simd.h"

namespace troupe::kernels::cpu {

const NormRowKernels& avx512_norm_kernels() {
  static const NormRowKernels k{rms_norm_row_simd<avx512::Simd>, softmax_row_simd<avx512::Simd>};
  return k;
}

}  // namespace troupe::kernels::cpu
