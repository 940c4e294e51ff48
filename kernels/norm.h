// Row-wise normalisations: RMSNorm (MODEL.md §5) and softmax.
#pragma once

#include <cstdint>

namespace troupe::kernels {

struct RmsNormParams {
  const float* x = nullptr;       // [rows, n], row stride ld (0 means n)
  const float* weight = nullptr;  // [n]; null means all ones
  float* out = nullptr;           // [rows, n], row stride ld_out (0 means n); may alias x
  int64_t rows = 0;
  int64_t n = 0;
  int64_t ld = 0;
  int64_t ld_out = 0;
  float eps = 1e-6f;
};
// out = weight ⊙ x / sqrt(mean(x²) + eps), all f32.
void rms_norm(const RmsNormParams& p);

struct SoftmaxParams {
  float* x = nullptr;  // [rows, n] in place, row stride ld (0 means n)
  int64_t rows = 0;
  int64_t n = 0;
  int64_t ld = 0;
};
// Max-subtracted softmax per row; -inf entries get probability 0.
void softmax(const SoftmaxParams& p);

namespace ref {
void rms_norm(const RmsNormParams& p);
void softmax(const SoftmaxParams& p);
}  // namespace ref
namespace cpu {
void rms_norm(const RmsNormParams& p);
void softmax(const SoftmaxParams& p);
}  // namespace cpu
namespace cuda {
void rms_norm(const RmsNormParams& p);
void softmax(const SoftmaxParams& p);
}  // namespace cuda

}  // namespace troupe::kernels
