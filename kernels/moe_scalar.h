// Scalar pieces of MODEL.md §5.5 shared by the reference and the fast CPU MoE so
// both backends round the same way (internal; not part of the kernel API). The
// TROUPE_HD ones also run on the device (kernels/cuda/moe.cu).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"

namespace troupe::kernels::moe_detail {

// sqrt(softplus(x)) with the overflow-safe softplus log1p(exp(-|x|)) + max(x, 0).
TROUPE_HD inline float sqrt_softplus(float x) {
  const float softplus = std::log1p(std::exp(-std::fabs(x))) + std::fmax(x, 0.0f);
  return std::sqrt(softplus);
}

// Selection order of the gate: higher score first, equal scores -> lower expert id.
TROUPE_HD inline bool ranks_before(float score_a, int64_t a, float score_b, int64_t b) {
  return score_a > score_b || (score_a == score_b && a < b);
}

// Routing weight of one pick: s / (Σ_pick s + 1e-20) · scale, or s · scale.
TROUPE_HD inline float routing_weight(float s, float pick_sum, bool norm_topk_prob, float scale) {
  return norm_topk_prob ? s / (pick_sum + 1e-20f) * scale : s * scale;
}

// h = silu(a) · b after the routed-expert clamp (limit 0 = no clamp).
TROUPE_HD inline float swiglu(float a, float b, float limit) {
  if (limit > 0) {
    a = std::fmin(a, limit);
    b = std::fmin(std::fmax(b, -limit), limit);
  }
  return a / (1.0f + std::exp(-a)) * b;
}

// The combine's one sum, shared by every backend and by single- and multi-rank MoE, so
// where an expert ran never changes the bits: out[j] += weight · y[j].
inline void combine_row(float* out, float weight, const float* y, int64_t hidden) {
  for (int64_t j = 0; j < hidden; ++j) out[j] += weight * y[j];
}

}  // namespace troupe::kernels::moe_detail
