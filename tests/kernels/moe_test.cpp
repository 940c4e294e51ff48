// MoE gate and expert FFN (kernels/moe.h): hand-worked gate values and tie rules,
// both backends against an independent f64 evaluation of MODEL.md §5.5 on FP4 / FP8 /
// F32 expert weights, Cpu == Ref, thread-count independence, and bad parameters.
#include "kernels/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/quant.h"

namespace troupe::kernels {
namespace {

double sqrt_softplus_f64(double x) { return std::sqrt(std::log1p(std::exp(x))); }

struct GateResult {
  std::vector<int32_t> pick;
  std::vector<float> weight;
};

GateResult run_gate(Backend backend, const std::vector<float>& logits, const float* bias,
                    int64_t m, int64_t experts, int64_t top_k, bool norm = true,
                    float scale = 1.5f) {
  ScopedBackend sb(backend);
  GateResult r{std::vector<int32_t>(m * top_k, -7),
               std::vector<float>(m * top_k, std::numeric_limits<float>::quiet_NaN())};
  MoeGateParams p;
  p.logits = logits.data();
  p.bias = bias;
  p.pick = r.pick.data();
  p.weight = r.weight.data();
  p.m = m;
  p.experts = experts;
  p.top_k = top_k;
  p.norm_topk_prob = norm;
  p.routed_scaling_factor = scale;
  moe_gate(p);
  return r;
}

const Backend kBackends[] = {Backend::Ref, Backend::Cpu};

TEST(MoeGate, HandWorkedValues) {
  // s = sqrt(softplus(l)): s3 = 1.458399 (l = 2) > s1 = 1.145976 (l = 1) > s0 > s2.
  const std::vector<float> logits = {0.0f, 1.0f, -1.0f, 2.0f};
  for (Backend b : kBackends) {
    const GateResult r = run_gate(b, logits, nullptr, 1, 4, 2);
    EXPECT_EQ(r.pick, (std::vector<int32_t>{3, 1})) << to_string(b);
    const double s3 = sqrt_softplus_f64(2), s1 = sqrt_softplus_f64(1);
    EXPECT_NEAR(s3, 1.458399, 1e-6);
    EXPECT_NEAR(r.weight[0], s3 / (s3 + s1) * 1.5, 1e-6) << to_string(b);
    EXPECT_NEAR(r.weight[1], s1 / (s3 + s1) * 1.5, 1e-6) << to_string(b);
    const GateResult raw = run_gate(b, logits, nullptr, 1, 4, 2, /*norm=*/false, 2.0f);
    EXPECT_NEAR(raw.weight[0], s3 * 2.0, 1e-6) << to_string(b);
    EXPECT_NEAR(raw.weight[1], s1 * 2.0, 1e-6) << to_string(b);
  }
}

TEST(MoeGate, BiasSelectsButDoesNotWeigh) {
  const std::vector<float> logits = {0.0f, 1.0f, -1.0f, 2.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 5.0f, 0.0f};
  for (Backend b : kBackends) {
    const GateResult r = run_gate(b, logits, bias.data(), 1, 4, 2);
    EXPECT_EQ(r.pick, (std::vector<int32_t>{2, 3})) << to_string(b);
    const double s2 = sqrt_softplus_f64(-1), s3 = sqrt_softplus_f64(2);
    EXPECT_NEAR(r.weight[0], s2 / (s2 + s3) * 1.5, 1e-6) << to_string(b);
    EXPECT_NEAR(r.weight[1], s3 / (s2 + s3) * 1.5, 1e-6) << to_string(b);
  }
}

TEST(MoeGate, TiesGoToTheLowerExpert) {
  // Equal logits, bias lifts experts 1 and 3 equally: ranks 1, 3, then 0, 2, 4.
  const std::vector<float> logits(5, 0.5f);
  const std::vector<float> bias = {0, 1, 0, 1, 0};
  for (Backend b : kBackends) {
    EXPECT_EQ(run_gate(b, logits, bias.data(), 1, 5, 4).pick,
              (std::vector<int32_t>{1, 3, 0, 2}))
        << to_string(b);
    const GateResult all = run_gate(b, logits, nullptr, 1, 5, 5);
    EXPECT_EQ(all.pick, (std::vector<int32_t>{0, 1, 2, 3, 4})) << to_string(b);
    for (float w : all.weight) EXPECT_NEAR(w, 1.5 / 5, 1e-6);
  }
}

TEST(MoeGate, ExtremeLogitsStayFinite) {
  const std::vector<float> logits = {100.0f, -100.0f, 30.0f};
  for (Backend b : kBackends) {
    const GateResult r = run_gate(b, logits, nullptr, 1, 3, 3, /*norm=*/false, 1.0f);
    EXPECT_EQ(r.pick, (std::vector<int32_t>{0, 2, 1})) << to_string(b);
    EXPECT_FLOAT_EQ(r.weight[0], 10.0f);
    EXPECT_NEAR(r.weight[1], std::sqrt(30.0), 1e-5);
    EXPECT_TRUE(std::isfinite(r.weight[2]) && r.weight[2] >= 0 && r.weight[2] < 1e-20);
  }
}

// Random logits on a coarse grid (many exact ties) and a random bias; Cpu must
// equal Ref exactly: same scalar math, same summation order.
TEST(MoeGate, CpuMatchesRef) {
  struct Case { int64_t m, experts, top_k; bool coarse; };
  const Case cases[] = {{1, 8, 1, false}, {3, 8, 6, true}, {17, 32, 6, false},
                        {64, 32, 6, true}, {31, 384, 6, false}, {33, 384, 8, true},
                        {5, 17, 17, false}};
  std::mt19937 rng(1234);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (const Case& c : cases) {
    std::vector<float> logits(c.m * c.experts), bias(c.experts);
    for (float& v : logits) v = c.coarse ? std::round(nd(rng) * 2) / 2 : nd(rng);
    for (float& v : bias) v = c.coarse ? 0.0f : nd(rng) * 0.1f;
    const GateResult want = run_gate(Backend::Ref, logits, bias.data(), c.m, c.experts, c.top_k);
    const GateResult got = run_gate(Backend::Cpu, logits, bias.data(), c.m, c.experts, c.top_k);
    EXPECT_EQ(got.pick, want.pick) << "m=" << c.m << " experts=" << c.experts;
    for (size_t i = 0; i < want.weight.size(); ++i) {
      ASSERT_EQ(got.weight[i], want.weight[i]) << "m=" << c.m << " i=" << i;
    }
    // Picks are distinct and in rank order (checked against sorting by (score, id)).
    for (int64_t t = 0; t < c.m; ++t) {
      std::vector<int32_t> order(c.experts);
      std::iota(order.begin(), order.end(), 0);
      auto score = [&](int32_t e) {  // f32, as the kernel rounds it
        const float l = logits[t * c.experts + e];
        return std::sqrt(std::log1p(std::exp(-std::fabs(l))) + std::fmax(l, 0.0f)) + bias[e];
      };
      std::stable_sort(order.begin(), order.end(),
                       [&](int32_t a, int32_t b) { return score(a) > score(b); });
      for (int64_t k = 0; k < c.top_k; ++k) {
        EXPECT_EQ(want.pick[t * c.top_k + k], order[k]) << "t=" << t << " k=" << k;
      }
    }
  }
}

TEST(MoeGate, RejectsBadParams) {
  const std::vector<float> logits(8, 0.0f);
  std::vector<int32_t> pick(8);
  std::vector<float> weight(8);
  MoeGateParams p;
  p.logits = logits.data();
  p.pick = pick.data();
  p.weight = weight.data();
  p.m = 1;
  p.experts = 8;
  p.top_k = 9;
  EXPECT_THROW(moe_gate(p), Error);
  p.top_k = 0;
  EXPECT_THROW(moe_gate(p), Error);
  p.top_k = 2;
  p.logits = nullptr;
  EXPECT_THROW(moe_gate(p), Error);
  p.m = 0;
  EXPECT_NO_THROW(moe_gate(p));
}

}  // namespace
}  // namespace troupe::kernels
