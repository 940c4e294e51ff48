// MoE of MODEL.md §5.5: sqrtsoftplus gating with a selection-only bias (noaux_tc)
// and the grouped expert FFN (clamped SwiGLU for routed experts).
#pragma once

#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/weights.h"

namespace troupe::kernels {

struct MoeGateParams {
  const float* logits = nullptr;  // [M, experts] = gate.weight · x
  const float* bias = nullptr;    // [experts] selection bias; null = none
  int32_t* pick = nullptr;        // [M, top_k] picked experts in rank order
  float* weight = nullptr;        // [M, top_k] routing weight of each pick
  int64_t m = 0;
  int64_t experts = 0;
  int64_t top_k = 0;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
};
// s_e = sqrt(softplus(logit_e)); pick = first top_k of rank(s_e + bias_e) (ties -> lower e);
// weight = s_e / (Σ_pick s + 1e-20) · scaling if norm_topk_prob, else s_e · scaling.
void moe_gate(const MoeGateParams& p);

struct ExpertWeights {
  WeightView w1;  // [I, H]
  WeightView w3;  // [I, H]
  WeightView w2;  // [H, I]
};

struct MoeExpertsParams {
  const float* x = nullptr;              // [M, H]
  const int32_t* pick = nullptr;         // [M, top_k] expert ids, -1 = skip
  const float* weight = nullptr;         // [M, top_k]
  const ExpertWeights* experts = nullptr;// [experts]
  float* out = nullptr;                  // [M, H]; out += Σ_k weight·Expert_pick(x)
  int64_t m = 0;
  int64_t hidden = 0;                    // H
  int64_t inter = 0;                     // I
  int64_t experts_count = 0;
  int64_t top_k = 0;
  float swiglu_limit = 0;                // 0 = no clamp (shared expert)
  GemmPrecision precision = GemmPrecision::F32;
};
// Expert(x): a = w1·x, b = w3·x; if limit: a = min(a, limit), b = clamp(b, ±limit);
// h = silu(a) ⊙ b; w2·h. Tokens are grouped per expert so each expert is one GEMM.
void moe_experts(const MoeExpertsParams& p);

// The two halves of moe_experts for expert parallelism (route -> dispatch -> experts ->
// combine): a rank runs the rows dispatched to its experts (moe_expert_rows), sends the
// results home, and the home rank sums them (moe_combine). moe_expert_rows gives each
// row the bits moe_experts computes for it, and moe_combine adds in the same order with
// the same sum, so DEP-R equals DEP-1 bit for bit.
struct MoeExpertRowsParams {
  const float* x = nullptr;               // [n, H]
  const int32_t* pick = nullptr;          // [n] the expert of each row, -1 = none (y row 0)
  const ExpertWeights* experts = nullptr; // [experts_count]
  float* y = nullptr;                     // [n, H] = Expert_pick(x)
  int64_t n = 0;
  int64_t hidden = 0;
  int64_t inter = 0;
  int64_t experts_count = 0;
  float swiglu_limit = 0;
  GemmPrecision precision = GemmPrecision::F32;
};
void moe_expert_rows(const MoeExpertRowsParams& p);

struct MoeCombineParams {
  float* out = nullptr;             // [M, H] += Σ_k weight[t, k] · y[row_of[t, k]], k ascending
  const float* y = nullptr;         // [rows, H] expert outputs
  const int64_t* row_of = nullptr;  // [M, top_k] row of y, -1 = skipped slot
  const float* weight = nullptr;    // [M, top_k]
  int64_t m = 0;
  int64_t top_k = 0;
  int64_t hidden = 0;
};
void moe_combine(const MoeCombineParams& p);

namespace ref {
void moe_gate(const MoeGateParams& p);
void moe_experts(const MoeExpertsParams& p);
void moe_expert_rows(const MoeExpertRowsParams& p);
void moe_combine(const MoeCombineParams& p);
}  // namespace ref
namespace cpu {
void moe_gate(const MoeGateParams& p);
void moe_experts(const MoeExpertsParams& p);
void moe_expert_rows(const MoeExpertRowsParams& p);
void moe_combine(const MoeCombineParams& p);
}  // namespace cpu
namespace cuda {  // experts: a device array of ExpertWeights whose views hold device pointers
void moe_gate(const MoeGateParams& p);
void moe_experts(const MoeExpertsParams& p);
void moe_expert_rows(const MoeExpertRowsParams& p);
void moe_combine(const MoeCombineParams& p);
}  // namespace cuda

}  // namespace troupe::kernels
