// Scalar reference attention with a sink (MODEL.md §5.3), two passes per (query,
// head): logits and their max, then the weighted sum. Sums and exponentials run
// in f64 so the reference is the more accurate side.
#include "kernels/attention.h"

#include <cmath>
#include <limits>
#include <vector>

namespace troupe::kernels::ref {
namespace {

void attend_one(const AttentionParams& p, int64_t m, int64_t h, std::vector<double>& acc) {
  const float* q = p.q + (m * p.heads + h) * p.dim;
  const float* const* keys = p.keys + m * p.max_keys;
  float* out = p.out + (m * p.heads + h) * p.dim;
  std::vector<float> logit(p.max_keys);
  float max = p.sink ? p.sink[h] : -std::numeric_limits<float>::infinity();
  for (int64_t k = 0; k < p.max_keys; ++k) {
    if (!keys[k]) continue;
    double dot = 0;
    for (int64_t d = 0; d < p.dim; ++d) dot += double(q[d]) * double(keys[k][d]);
    logit[k] = static_cast<float>(dot) * p.scale;
    max = std::fmax(max, logit[k]);
  }
  // The sink is a key with logit sink[h] and a zero value: it only adds to the denominator.
  double denom = p.sink ? std::exp(double(p.sink[h]) - max) : 0.0;
  acc.assign(p.dim, 0.0);
  for (int64_t k = 0; k < p.max_keys; ++k) {
    if (!keys[k]) continue;
    const double w = std::exp(double(logit[k]) - max);
    denom += w;
    for (int64_t d = 0; d < p.dim; ++d) acc[d] += w * keys[k][d];
  }
  // No keys and no sink: nothing to attend to, the output is zero (not 0/0).
  for (int64_t d = 0; d < p.dim; ++d)
    out[d] = denom > 0 ? static_cast<float>(acc[d] / denom) : 0.0f;
}

}  // namespace

void attention(const AttentionParams& p) {
  std::vector<double> acc;
  for (int64_t m = 0; m < p.m; ++m)
    for (int64_t h = 0; h < p.heads; ++h) attend_one(p, m, h, acc);
}

}  // namespace troupe::kernels::ref
