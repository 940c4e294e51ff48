// MoE_l (MODEL.md §5.5) checked in isolation against a plain reference written from the
// spec, on the golden checkpoint's real experts: the sqrtsoftplus gate with the bias used
// for selection only (ties -> lower expert), normalised routing weights, the shared FP8
// expert unclamped and the routed FP4 experts with the SwiGLU clamp.
// Tolerances: picks exact (in rank order); output relative L2 1e-5 per row.
#include <gtest/gtest.h>

#include <map>

#include "kernels/dispatch.h"
#include "model/ffn_layers.h"
#include "support/block_ref.h"
#include "support/golden.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;
constexpr double kTol = 1e-5;

struct ExpertRef {
  Dense w1, w3, w2;
};

ExpertRef expert_ref(const kernels::ExpertWeights& e) {
  return {dense(e.w1), dense(e.w3), dense(e.w2)};
}

// Expert(x) of §5.5; limit 0 = unclamped. Counts clamped pre-activations in *clamped.
DVec ref_expert(const ExpertRef& e, const float* x, double limit, int64_t* clamped) {
  DVec a = matvec(e.w1, x), b = matvec(e.w3, x), h(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    if (limit > 0) {
      *clamped += a[i] > limit || std::fabs(b[i]) > limit;
      a[i] = std::min(a[i], limit);
      b[i] = std::clamp(b[i], -limit, limit);
    }
    h[i] = a[i] * sigmoid(a[i]) * b[i];
  }
  return matvec(e.w2, h.data());
}

struct MoeRef {
  const model::ModelConfig& c;
  const model::MoeWeights& w;
  Dense gate;
  ExpertRef shared;
  std::map<int64_t, ExpertRef> routed;  // dequantized on first use
  int64_t clamped = 0;                  // routed pre-activations the clamp changed
  int64_t shared_over_limit = 0;        // shared pre-activations beyond the limit

  MoeRef(const model::ModelConfig& cfg, const model::MoeWeights& mw)
      : c(cfg), w(mw), gate(dense(mw.gate)), shared(expert_ref(mw.shared)) {}

  // pick = first kE of rank(s + bias), s = sqrt(softplus(gate·x)).
  std::vector<int32_t> pick(const float* x, DVec& s) const {
    const DVec logits = matvec(gate, x);
    DVec biased(logits.size());
    s.resize(logits.size());
    for (size_t e = 0; e < logits.size(); ++e) {
      s[e] = std::sqrt(std::log1p(std::exp(logits[e])));
      biased[e] = s[e] + w.gate_bias[e];
    }
    const std::vector<int64_t> order = rank_desc(biased);
    return std::vector<int32_t>(order.begin(), order.begin() + c.top_k);
  }

  DVec out(const float* x, std::vector<int32_t>& picked) {
    DVec s;
    picked = pick(x, s);
    double sum = 0;
    for (int32_t e : picked) sum += s[e];
    int64_t unused = 0;
    DVec y = ref_expert(shared, x, 0.0, &unused);
    count_shared_over_limit(x);
    for (int32_t e : picked) {
      const double we = (c.norm_topk_prob ? s[e] / (sum + 1e-20) : s[e]) * c.routed_scaling_factor;
      if (!routed.count(e)) routed.emplace(e, expert_ref(w.experts[e]));
      const DVec ye = ref_expert(routed.at(e), x, c.swiglu_limit, &clamped);
      for (size_t i = 0; i < y.size(); ++i) y[i] += we * ye[i];
    }
    return y;
  }

  void count_shared_over_limit(const float* x) {
    const DVec a = matvec(shared.w1, x), b = matvec(shared.w3, x);
    for (size_t i = 0; i < a.size(); ++i)
      shared_over_limit += a[i] > c.swiglu_limit || std::fabs(b[i]) > c.swiglu_limit;
  }
};

// Runs moe_layer on x [rows, H] and compares picks and output row by row.
void check_moe(const model::ModelConfig& c, MoeRef& want, int64_t layer,
               const std::vector<float>& x) {
  const int64_t H = c.hidden_size, rows = static_cast<int64_t>(x.size()) / H;
  model::SequenceState st = model::SequenceState::empty(c);
  model::Batch b = make_batch({{&st, token_run(rows, 1)}});
  std::vector<std::vector<float>> picks;
  const model::TraceFn trace = [&](const std::string& name, int64_t, int64_t,
                                   std::span<const float> v) {
    if (name == "moe_pick") picks.emplace_back(v.begin(), v.end());
  };
  b.trace = &trace;
  std::vector<float> out(rows * H, std::numeric_limits<float>::quiet_NaN());
  model::moe_layer(c, want.w, layer, b, x.data(), out.data());
  ASSERT_EQ(static_cast<int64_t>(picks.size()), rows);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<int32_t> picked;
    const DVec y = want.out(&x[r * H], picked);
    EXPECT_EQ(std::vector<int32_t>(picks[r].begin(), picks[r].end()), picked) << "row " << r;
    EXPECT_LT(rel_l2(&out[r * H], y), kTol) << "row " << r;
  }
}

TEST(BlocksMoe, MatchesReferenceOnGoldenLayers) {
  const auto& g = golden_model();
  for (int64_t layer : {0, 5, 11}) {
    MoeRef want(g.config, g.weights.layers[layer].ffn);
    for (int64_t rows : {1, 3, 17}) {
      SCOPED_TRACE("layer " + std::to_string(layer) + ", rows " + std::to_string(rows));
      check_moe(g.config, want, layer,
                random_floats(rows * g.config.hidden_size, 31 * layer + rows));
    }
  }
}

TEST(BlocksMoe, ScalarKernelBackend) {
  // Gate and experts through the kernels' scalar Ref backend instead of the Cpu one.
  kernels::ScopedBackend scalar(kernels::Backend::Ref);
  const auto& g = golden_model();
  MoeRef want(g.config, g.weights.layers[4].ffn);
  check_moe(g.config, want, 4, random_floats(3 * g.config.hidden_size, 44));
  MoeRef big(g.config, g.weights.layers[7].ffn);
  check_moe(g.config, big, 7, random_floats(5 * g.config.hidden_size, 77, 40.0f));
}

TEST(BlocksMoe, ClampAppliesToRoutedExpertsOnly) {
  // Inputs 40x larger than a normalised row push w1·x and w3·x past swiglu_limit = 10.
  const auto& g = golden_model();
  MoeRef want(g.config, g.weights.layers[7].ffn);
  check_moe(g.config, want, 7, random_floats(5 * g.config.hidden_size, 77, 40.0f));
  EXPECT_GT(want.clamped, 0) << "the clamp never changed a routed pre-activation";
  EXPECT_GT(want.shared_over_limit, 0) << "the shared expert never passed the limit";
}

TEST(BlocksMoe, ExactGateTiesGoToTheLowerExpert) {
  // x = 0 gives every expert s = sqrt(ln 2); with the bias 0.01 on every 4th expert and 0
  // elsewhere, the 8 biased experts tie and the lowest 6 of them win (hand-worked).
  const auto& g = golden_model();
  model::MoeWeights w = g.weights.layers[2].ffn;
  for (size_t e = 0; e < w.gate_bias.size(); ++e) w.gate_bias[e] = e % 4 == 0 ? 0.01f : 0.0f;
  MoeRef want(g.config, w);
  DVec s;
  const std::vector<float> zero(g.config.hidden_size, 0.0f);
  EXPECT_EQ(want.pick(zero.data(), s), (std::vector<int32_t>{0, 4, 8, 12, 16, 20}));
  std::vector<float> x = random_floats(3 * g.config.hidden_size, 5);
  std::fill(x.begin() + g.config.hidden_size, x.begin() + 2 * g.config.hidden_size, 0.0f);
  check_moe(g.config, want, 2, x);
  // All-zero bias: a complete tie, experts 0..5.
  std::fill(w.gate_bias.begin(), w.gate_bias.end(), 0.0f);
  MoeRef flat(g.config, w);
  EXPECT_EQ(flat.pick(zero.data(), s), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  check_moe(g.config, flat, 2, x);
}

TEST(BlocksMoe, UnnormalisedRoutingWeights) {
  const auto& g = golden_model();
  model::ModelConfig c = g.config;
  c.norm_topk_prob = false;
  MoeRef want(c, g.weights.layers[9].ffn);
  check_moe(c, want, 9, random_floats(3 * c.hidden_size, 99));
}

}  // namespace
}  // namespace troupe::testing
