// Validation and dispatch for the MoE family (kernels/moe.h).
#include "kernels/moe.h"

#include <cmath>

#include "kernels/check.h"
#include "kernels/dispatch.h"

namespace troupe::kernels {
namespace {

void check_weight(const WeightView& w, int64_t rows, int64_t cols, int64_t e, const char* name) {
  TROUPE_CHECK(w.data != nullptr, "experts[", e, "].", name, ".data is null (expert is picked)");
  TROUPE_CHECK(w.rows == rows && w.cols == cols, "experts[", e, "].", name, " is [", w.rows, ", ",
               w.cols, "], expected [", rows, ", ", cols, "]");
}

}  // namespace

void moe_gate(const MoeGateParams& p) {
  TROUPE_CHECK(p.m >= 0, "m = ", p.m);
  TROUPE_CHECK(p.experts > 0, "experts = ", p.experts);
  TROUPE_CHECK(p.top_k >= 1 && p.top_k <= p.experts, "top_k = ", p.top_k, " with experts = ",
               p.experts);
  TROUPE_CHECK(std::isfinite(p.routed_scaling_factor),
               "routed_scaling_factor = ", p.routed_scaling_factor);
  if (p.m == 0) return;
  TROUPE_CHECK(p.logits != nullptr, "logits is null");
  TROUPE_CHECK(p.pick != nullptr, "pick is null");
  TROUPE_CHECK(p.weight != nullptr, "weight is null");
  switch (active_backend()) {
    case Backend::Ref: return ref::moe_gate(p);
    case Backend::Cpu: return cpu::moe_gate(p);
  }
}

// Only picked experts are checked: an expert-parallel rank may hold views for a
// subset of the experts and leave the rest empty.
void moe_experts(const MoeExpertsParams& p) {
  TROUPE_CHECK(p.m >= 0, "m = ", p.m);
  TROUPE_CHECK(p.hidden > 0, "hidden = ", p.hidden);
  TROUPE_CHECK(p.inter > 0, "inter = ", p.inter);
  TROUPE_CHECK(p.experts_count > 0, "experts_count = ", p.experts_count);
  TROUPE_CHECK(p.top_k >= 1, "top_k = ", p.top_k);
  TROUPE_CHECK(std::isfinite(p.swiglu_limit) && p.swiglu_limit >= 0,
               "swiglu_limit = ", p.swiglu_limit, " (must be finite and >= 0; 0 = no clamp)");
  if (p.m == 0) return;
  TROUPE_CHECK(p.x != nullptr, "x is null");
  TROUPE_CHECK(p.pick != nullptr, "pick is null");
  TROUPE_CHECK(p.weight != nullptr, "weight is null");
  TROUPE_CHECK(p.experts != nullptr, "experts is null");
  TROUPE_CHECK(p.out != nullptr, "out is null");
  for (int64_t i = 0; i < p.m * p.top_k; ++i) {
    const int32_t e = p.pick[i];
    TROUPE_CHECK(e >= -1 && e < p.experts_count, "pick[", i / p.top_k, ", ", i % p.top_k,
                 "] = ", e, " with experts_count = ", p.experts_count);
    if (e < 0) continue;
    const ExpertWeights& w = p.experts[e];
    check_weight(w.w1, p.inter, p.hidden, e, "w1");
    check_weight(w.w3, p.inter, p.hidden, e, "w3");
    check_weight(w.w2, p.hidden, p.inter, e, "w2");
  }
  switch (active_backend()) {
    case Backend::Ref: return ref::moe_experts(p);
    case Backend::Cpu: return cpu::moe_experts(p);
  }
}

}  // namespace troupe::kernels
