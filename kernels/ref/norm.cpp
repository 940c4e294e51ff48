// Scalar reference for RMSNorm and softmax: the definition the fast paths are
// tested against. Sums run in f64 so the reference is the more accurate side.
#include "kernels/norm.h"

#include <cmath>
#include <limits>

namespace troupe::kernels::ref {

void rms_norm(const RmsNormParams& p) {
  const int64_t ld = p.ld ? p.ld : p.n;
  const int64_t ld_out = p.ld_out ? p.ld_out : p.n;
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * ld;
    float* out = p.out + r * ld_out;
    double sum_sq = 0;
    for (int64_t i = 0; i < p.n; ++i) sum_sq += double(x[i]) * double(x[i]);
    const float mean = static_cast<float>(sum_sq / double(p.n));
    const float denom = std::sqrt(mean + p.eps);
    for (int64_t i = 0; i < p.n; ++i) {
      const float w = p.weight ? p.weight[i] : 1.0f;
      out[i] = w * (x[i] / denom);
    }
  }
}

void softmax(const SoftmaxParams& p) {
  const int64_t ld = p.ld ? p.ld : p.n;
  for (int64_t r = 0; r < p.rows; ++r) {
    float* x = p.x + r * ld;
    float max = -std::numeric_limits<float>::infinity();
    for (int64_t i = 0; i < p.n; ++i) max = std::fmax(max, x[i]);
    if (max == -std::numeric_limits<float>::infinity()) {
      // Every entry is masked: no probability mass anywhere (not NaN).
      for (int64_t i = 0; i < p.n; ++i) x[i] = 0.0f;
      continue;
    }
    double sum = 0;
    for (int64_t i = 0; i < p.n; ++i) {
      x[i] = std::exp(x[i] - max);  // exp(-inf) = 0: masked entries get 0
      sum += x[i];
    }
    const float total = static_cast<float>(sum);
    for (int64_t i = 0; i < p.n; ++i) x[i] = x[i] / total;
  }
}

}  // namespace troupe::kernels::ref
