#include "kernels/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {
namespace {

// YaRN blend of MODEL.md §5 (as published): rotation pairs i below `low` keep their
// frequency, pairs above `high` are slowed by `factor`, a linear ramp in between.
// `high` clamps at Dr-1 although i only reaches Dr/2-1; that is the published form.
void apply_yarn(std::vector<double>& f, double theta, int64_t rope_dim, const YarnScaling& s) {
  const double dr = static_cast<double>(rope_dim);
  const double two_log_theta = 2.0 * std::log(theta);
  const double two_pi = 2.0 * std::numbers::pi;
  const double low = std::max(
      std::floor(dr * std::log(s.original_max_position / (s.beta_fast * two_pi)) / two_log_theta),
      0.0);
  const double high = std::min(
      std::ceil(dr * std::log(s.original_max_position / (s.beta_slow * two_pi)) / two_log_theta),
      dr - 1);
  const double span = std::max(high - low, 1e-3);
  for (size_t i = 0; i < f.size(); ++i) {
    const double ramp = std::clamp((static_cast<double>(i) - low) / span, 0.0, 1.0);
    f[i] = f[i] / s.factor * ramp + f[i] * (1.0 - ramp);
  }
}

}  // namespace

std::vector<double> rope_frequencies(double theta, int64_t rope_dim, const YarnScaling& scaling) {
  TROUPE_CHECK(theta > 0 && std::isfinite(theta), "rope_frequencies: theta must be > 0, got ",
               theta);
  TROUPE_CHECK(rope_dim > 0 && rope_dim % 2 == 0,
               "rope_frequencies: rope_dim must be even and > 0, got ", rope_dim);
  TROUPE_CHECK(scaling.factor > 0, "rope_frequencies: YaRN factor must be > 0, got ",
               scaling.factor);
  std::vector<double> f(static_cast<size_t>(rope_dim / 2));
  for (size_t i = 0; i < f.size(); ++i)
    f[i] = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(rope_dim));
  if (scaling.factor != 1.0) {
    TROUPE_CHECK(scaling.original_max_position > 0,
                 "rope_frequencies: YaRN original_max_position must be > 0, got ",
                 scaling.original_max_position);
    TROUPE_CHECK(scaling.beta_fast > 0 && scaling.beta_slow > 0,
                 "rope_frequencies: YaRN beta_fast and beta_slow must be > 0, got ",
                 scaling.beta_fast, " and ", scaling.beta_slow);
    apply_yarn(f, theta, rope_dim, scaling);
  }
  return f;
}

void rope(const RopeParams& p) {
  TROUPE_CHECK(p.count >= 0, "rope: count must be >= 0, got ", p.count);
  TROUPE_CHECK(p.rope_dim >= 0 && p.rope_dim % 2 == 0, "rope: rope_dim must be even and >= 0, got ",
               p.rope_dim);
  TROUPE_CHECK(p.n >= p.rope_dim, "rope: n ", p.n, " < rope_dim ", p.rope_dim);
  TROUPE_CHECK(p.ld == 0 || p.ld >= p.n, "rope: ld ", p.ld, " < n ", p.n);
  TROUPE_CHECK(p.per_position >= 1, "rope: per_position must be >= 1, got ", p.per_position);
  TROUPE_CHECK(p.count % p.per_position == 0, "rope: count ", p.count,
               " is not a multiple of per_position ", p.per_position);
  if (p.count == 0 || p.rope_dim == 0) return;
  TROUPE_CHECK(p.x != nullptr, "rope: x is null");
  TROUPE_CHECK(p.positions != nullptr, "rope: positions is null");
  TROUPE_CHECK(p.freqs != nullptr, "rope: freqs is null");
  switch (active_backend()) {
    case Backend::Ref:
      return ref::rope(p);
    case Backend::Cpu:
      return cpu::rope(p);
    case Backend::Cuda:
      return cuda::rope(p);
  }
}

}  // namespace troupe::kernels
