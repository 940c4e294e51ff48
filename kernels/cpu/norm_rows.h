// Row kernels behind cpu::rms_norm and cpu::softmax. The AVX-512 set lives in
// norm_avx512.cpp, the AVX2 set in norm_avx2.cpp, the portable set in norm.cpp. Exposed so tests can run the
// portable fallback on a machine that has AVX-512.
#pragma once

#include <cstdint>

#include "kernels/norm.h"

namespace troupe::kernels::cpu {

struct NormRowKernels {
  // out[0..n) = w ⊙ x / sqrt(mean(x²) + eps); w may be null (ones); out may alias x.
  void (*rms_norm_row)(const float* x, const float* w, float* out, int64_t n, float eps);
  // x[0..n) = softmax(x) in place, n >= 1; an all -inf row becomes all 0.
  void (*softmax_row)(float* x, int64_t n);
};

const NormRowKernels& portable_norm_kernels();
const NormRowKernels& avx512_norm_kernels();  // call only when cpu_features().has_avx512()
const NormRowKernels& avx2_norm_kernels();    // call only when cpu_features().has_avx2()

// The ops with an explicit row-kernel set (threads over rows).
void rms_norm(const RmsNormParams& p, const NormRowKernels& k);
void softmax(const SoftmaxParams& p, const NormRowKernels& k);

}  // namespace troupe::kernels::cpu
