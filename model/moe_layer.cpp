// MoE of MODEL.md §5.5: sqrtsoftplus gate with selection-only bias, top-k routed
// experts (FP4, clamped SwiGLU) plus the shared expert (FP8, unclamped).
#include <optional>

#include "kernels/moe.h"
#include "model/ffn_layers.h"
#include "model/op_profile.h"
#include "model/ops.h"

namespace troupe::model {

void moe_layer(const ModelConfig& c, const MoeWeights& w, int64_t layer, const Batch& b,
               const float* x, float* out, int64_t top_k, RoutedExperts* routed) {
  const int64_t rows = b.rows, H = c.hidden_size, kE = top_k > 0 ? top_k : c.top_k;
  const int64_t nE = static_cast<int64_t>(w.experts.size());
  std::optional<ScopedOp> op(std::in_place, Op::MoeGate);
  scratch_vector<float> logits = linear(x, rows, w.gate);
  b.record("moe_gate_logits", layer, logits.data(), nE);
  scratch_vector<int32_t> pick(rows * kE);
  scratch_vector<float> weight(rows * kE);
  kernels::MoeGateParams g;
  g.logits = logits.data();
  g.bias = w.gate_bias.data();
  g.pick = pick.data();
  g.weight = weight.data();
  g.m = rows;
  g.experts = nE;
  g.top_k = kE;
  g.norm_topk_prob = c.norm_topk_prob;
  g.routed_scaling_factor = static_cast<float>(c.routed_scaling_factor);
  kernels::moe_gate(g);
  b.record_ints("moe_pick", layer, pick.data(), kE);

  op.emplace(Op::SharedExpert);
  std::fill(out, out + rows * H, 0.0f);
  scratch_vector<int32_t> shared_pick(rows, 0);
  scratch_vector<float> shared_weight(rows, 1.0f);
  kernels::MoeExpertsParams e;
  e.x = x;
  e.out = out;
  e.m = rows;
  e.hidden = H;
  e.inter = c.moe_intermediate_size;
  e.pick = shared_pick.data();
  e.weight = shared_weight.data();
  e.experts = &w.shared;
  e.experts_count = 1;
  e.top_k = 1;
  e.swiglu_limit = 0.0f;
  e.precision = b.expert_precision;
  kernels::moe_experts(e);
  op.emplace(Op::RoutedExperts);
  if (routed != nullptr) {
    RoutedBatch rb = RoutedBatch::of(c, w, layer, kE, b.expert_precision);
    rb.x = x;
    rb.rows = rows;
    rb.pick = pick.data();
    rb.weight = weight.data();
    rb.out = out;
    routed->run(rb);
    return;
  }
  e.pick = pick.data();
  e.weight = weight.data();
  e.experts = w.experts.data();
  e.experts_count = nE;
  e.top_k = kE;
  e.swiglu_limit = static_cast<float>(c.swiglu_limit);
  kernels::moe_experts(e);
}

}  // namespace troupe::model
