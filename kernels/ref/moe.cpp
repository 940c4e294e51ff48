// Scalar reference of the MoE family: the definition the fast path is tested against.
#include <algorithm>
#include <vector>

#include "kernels/moe.h"
#include "kernels/moe_scalar.h"

namespace troupe::kernels::ref {
namespace {

using moe_detail::ranks_before;

// Top-k by repeated arg-max scans over the not yet taken experts.
void gate_row(const MoeGateParams& p, const float* logits, int32_t* pick, float* weight) {
  std::vector<float> s(p.experts), score(p.experts);
  std::vector<bool> taken(p.experts, false);
  for (int64_t e = 0; e < p.experts; ++e) {
    s[e] = moe_detail::sqrt_softplus(logits[e]);
    score[e] = p.bias ? s[e] + p.bias[e] : s[e];
  }
  float sum = 0;
  for (int64_t k = 0; k < p.top_k; ++k) {
    int64_t best = -1;
    for (int64_t e = 0; e < p.experts; ++e) {
      if (!taken[e] && (best < 0 || ranks_before(score[e], e, score[best], best))) best = e;
    }
    taken[best] = true;
    pick[k] = static_cast<int32_t>(best);
    sum += s[best];
  }
  for (int64_t k = 0; k < p.top_k; ++k) {
    weight[k] = moe_detail::routing_weight(s[pick[k]], sum, p.norm_topk_prob,
                                           p.routed_scaling_factor);
  }
}

// One expert on one token: y[H] = w2 · swiglu(w1 · x, w3 · x).
void expert_row(const MoeExpertsParams& p, const ExpertWeights& w, const float* x, float* y) {
  std::vector<float> a(p.inter), b(p.inter);
  GemmParams g;
  g.x = x;
  g.m = 1;
  g.precision = p.precision;
  g.w = w.w1;
  g.y = a.data();
  ref::gemm(g);
  g.w = w.w3;
  g.y = b.data();
  ref::gemm(g);
  for (int64_t i = 0; i < p.inter; ++i) a[i] = moe_detail::swiglu(a[i], b[i], p.swiglu_limit);
  g.x = a.data();
  g.w = w.w2;
  g.y = y;
  ref::gemm(g);
}

}  // namespace

void moe_gate(const MoeGateParams& p) {
  for (int64_t t = 0; t < p.m; ++t) {
    gate_row(p, p.logits + t * p.experts, p.pick + t * p.top_k, p.weight + t * p.top_k);
  }
}

// out[t] += weight[t, k] · Expert_pick[t, k](x[t]), added in slot order k = 0..top_k-1.
void moe_experts(const MoeExpertsParams& p) {
  std::vector<float> y(p.hidden);
  for (int64_t t = 0; t < p.m; ++t) {
    float* out = p.out + t * p.hidden;
    for (int64_t k = 0; k < p.top_k; ++k) {
      const int32_t e = p.pick[t * p.top_k + k];
      if (e < 0) continue;
      expert_row(p, p.experts[e], p.x + t * p.hidden, y.data());
      moe_detail::combine_row(out, p.weight[t * p.top_k + k], y.data(), p.hidden);
    }
  }
}

void moe_expert_rows(const MoeExpertRowsParams& p) {
  MoeExpertsParams e;
  e.hidden = p.hidden;
  e.inter = p.inter;
  e.swiglu_limit = p.swiglu_limit;
  e.precision = p.precision;
  for (int64_t i = 0; i < p.n; ++i) {
    float* y = p.y + i * p.hidden;
    std::fill(y, y + p.hidden, 0.0f);
    if (p.pick[i] >= 0) expert_row(e, p.experts[p.pick[i]], p.x + i * p.hidden, y);
  }
}

void moe_combine(const MoeCombineParams& p) {
  for (int64_t t = 0; t < p.m; ++t)
    for (int64_t k = 0; k < p.top_k; ++k) {
      const int64_t row = p.row_of[t * p.top_k + k];
      if (row >= 0)
        moe_detail::combine_row(p.out + t * p.hidden, p.weight[t * p.top_k + k],
                                p.y + row * p.hidden, p.hidden);
    }
}

}  // namespace troupe::kernels::ref
