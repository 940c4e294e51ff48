// Validation and dispatch for the MoE family (kernels/moe.h).
#include "kernels/moe.h"

#include <cmath>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"

namespace troupe::kernels {
namespace {

// A view that keeps only its row groups runs only where its GEMM reads them
// (reads_row_groups); elsewhere it would read its null bytes.
void check_weight(const WeightView& w, int64_t rows, int64_t cols, int64_t e, const char* name,
                  GemmPrecision precision) {
  TROUPE_CHECK(w.data != nullptr || reads_row_groups(w, precision), "experts[", e, "].", name,
               ".data is null (expert is picked",
               w.groups ? "; only its row groups are kept, which only GemmPrecision::Int8 reads" : "", ")");
  TROUPE_CHECK(w.rows == rows && w.cols == cols, "experts[", e, "].", name, " is [", w.rows, ", ",
               w.cols, "], expected [", rows, ", ", cols, "]");
}

void check_expert(const ExpertWeights& w, int64_t inter, int64_t hidden, int64_t e, GemmPrecision precision) {
  check_weight(w.w1, inter, hidden, e, "w1", precision);
  check_weight(w.w3, inter, hidden, e, "w3", precision);
  check_weight(w.w2, hidden, inter, e, "w2", precision);
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
    case Backend::Cuda: return cuda::moe_gate(p);
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
  // Under Backend::Cuda picks and expert views are device memory: not read here.
  for (int64_t i = 0; active_backend() != Backend::Cuda && i < p.m * p.top_k; ++i) {
    const int32_t e = p.pick[i];
    TROUPE_CHECK(e >= -1 && e < p.experts_count, "pick[", i / p.top_k, ", ", i % p.top_k,
                 "] = ", e, " with experts_count = ", p.experts_count);
    if (e < 0) continue;
    check_expert(p.experts[e], p.inter, p.hidden, e, p.precision);
  }
  switch (active_backend()) {
    case Backend::Ref: return ref::moe_experts(p);
    case Backend::Cpu: return cpu::moe_experts(p);
    case Backend::Cuda: return cuda::moe_experts(p);
  }
}

void moe_expert_rows(const MoeExpertRowsParams& p) {
  TROUPE_CHECK(p.n >= 0, "n = ", p.n);
  TROUPE_CHECK(p.hidden > 0 && p.inter > 0, "hidden = ", p.hidden, ", inter = ", p.inter);
  TROUPE_CHECK(p.experts_count > 0, "experts_count = ", p.experts_count);
  TROUPE_CHECK(std::isfinite(p.swiglu_limit) && p.swiglu_limit >= 0,
               "swiglu_limit = ", p.swiglu_limit);
  if (p.n == 0) return;
  TROUPE_CHECK(p.x != nullptr && p.pick != nullptr && p.y != nullptr && p.experts != nullptr,
               "moe_expert_rows: a null pointer");
  for (int64_t i = 0; active_backend() != Backend::Cuda && i < p.n; ++i) {
    const int32_t e = p.pick[i];
    TROUPE_CHECK(e >= -1 && e < p.experts_count, "pick[", i, "] = ", e,
                 " with experts_count = ", p.experts_count);
    if (e < 0) continue;
    check_expert(p.experts[e], p.inter, p.hidden, e, p.precision);
  }
  switch (active_backend()) {
    case Backend::Ref: return ref::moe_expert_rows(p);
    case Backend::Cpu: return cpu::moe_expert_rows(p);
    case Backend::Cuda: return cuda::moe_expert_rows(p);
  }
}

void moe_combine(const MoeCombineParams& p) {
  TROUPE_CHECK(p.m >= 0 && p.top_k >= 1 && p.hidden > 0, "m = ", p.m, ", top_k = ", p.top_k,
               ", hidden = ", p.hidden);
  if (p.m == 0) return;
  TROUPE_CHECK(p.out != nullptr && p.row_of != nullptr && p.weight != nullptr,
               "moe_combine: a null pointer");
  switch (active_backend()) {
    case Backend::Ref: return ref::moe_combine(p);
    case Backend::Cpu: return cpu::moe_combine(p);
    case Backend::Cuda: return cuda::moe_combine(p);
  }
}

}  // namespace troupe::kernels
