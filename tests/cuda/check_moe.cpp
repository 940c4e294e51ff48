// cuda::moe_* against ref: the gate (picks exact, weights rel 1e-5: CUDA's expf/log1pf
// differ from the host's by an ulp), the grouped expert FFN and the per-row experts
// (two chained GEMMs: rel 1e-4 / abs 1e-6), and the combine, bit for bit (same adds in
// the same order).
#include <bit>
#include <memory>

#include "kernels/moe.h"
#include "tests/cuda/check.h"
#include "tests/cuda/check_weights.h"

namespace troupe::cuda_check {
namespace {

using kernels::WeightFormat;

void gate_case(DeviceContext& dev, Report& rep, int64_t m, int64_t experts, int64_t top_k,
               bool bias, bool norm, uint32_t seed) {
  char name[96];
  std::snprintf(name, sizeof name, "moe_gate m=%ld experts=%ld top_k=%ld%s%s", long(m),
                long(experts), long(top_k), bias ? " bias" : "", norm ? " norm" : "");
  rep.begin_case(name);
  std::vector<float> logits = normal(m * experts, seed, 2.0f);
  for (int64_t i = 0; i < m * experts; i += 9) logits[i] = 0.5f;  // tied scores: lower id first
  const std::vector<float> b = normal(experts, seed + 1, 0.1f);
  std::vector<int32_t> want_pick(m * top_k, -9);
  std::vector<float> want_w(m * top_k, kNaN);
  kernels::MoeGateParams p;
  p.m = m, p.experts = experts, p.top_k = top_k, p.norm_topk_prob = norm;
  p.routed_scaling_factor = 2.5f;
  p.logits = logits.data(), p.bias = bias ? b.data() : nullptr;
  p.pick = want_pick.data(), p.weight = want_w.data();
  kernels::ref::moe_gate(p);
  const auto dl = upload(dev, logits), db = upload(dev, b);
  auto dpick = upload(dev, std::vector<int32_t>(want_pick.size(), -9));
  auto dw = upload(dev, std::vector<float>(want_w.size(), kNaN));
  p.logits = dl.get(), p.bias = bias ? db.get() : nullptr, p.pick = dpick.get(), p.weight = dw.get();
  kernels::moe_gate(p);
  const auto pick = download(dev, dpick);
  const auto w = download(dev, dw);
  for (size_t i = 0; i < pick.size(); ++i) {
    rep.check(pick[i] == want_pick[i], "pick[" + std::to_string(i) + "] = " +
                                           std::to_string(pick[i]) + ", ref " +
                                           std::to_string(want_pick[i]));
    rep.check(close(w[i], want_w[i], 1e-5f, 1e-30f), "weight[" + std::to_string(i) + "]");
  }
  rep.end_case();
}

struct Experts {
  std::vector<HostWeight> host;  // [experts * 3]: w1, w3, w2
  std::vector<std::unique_ptr<DeviceWeight>> device;
  std::vector<kernels::ExpertWeights> host_views, device_views;
  DeviceBuffer<kernels::ExpertWeights> device_table;
};

Experts make_experts(DeviceContext& dev, WeightFormat f, int64_t count, int64_t hidden,
                     int64_t inter, uint32_t seed) {
  Experts e;
  for (int64_t i = 0; i < count; ++i) {
    e.host.push_back(make_weight(f, inter, hidden, seed + 3 * i));
    e.host.push_back(make_weight(f, inter, hidden, seed + 3 * i + 1));
    e.host.push_back(make_weight(f, hidden, inter, seed + 3 * i + 2));
  }
  for (const HostWeight& h : e.host) e.device.push_back(std::make_unique<DeviceWeight>(dev, h));
  for (int64_t i = 0; i < count; ++i) {
    e.host_views.push_back({e.host[3 * i].view(), e.host[3 * i + 1].view(), e.host[3 * i + 2].view()});
    e.device_views.push_back(
        {e.device[3 * i]->view(), e.device[3 * i + 1]->view(), e.device[3 * i + 2]->view()});
  }
  e.device_table = upload(dev, e.device_views);
  return e;
}

void experts_case(DeviceContext& dev, Report& rep, WeightFormat f, int64_t m, int64_t top_k,
                  int64_t count, int64_t hidden, int64_t inter, float limit, uint32_t seed) {
  char name[128];
  std::snprintf(name, sizeof name, "moe_experts %s m=%ld top_k=%ld experts=%ld H=%ld I=%ld limit=%g",
                kernels::to_string(f), long(m), long(top_k), long(count), long(hidden),
                long(inter), limit);
  rep.begin_case(name);
  Experts ex = make_experts(dev, f, count, hidden, inter, seed);
  const std::vector<float> x = normal(m * hidden, seed + 1000);
  const std::vector<float> out0 = normal(m * hidden, seed + 1001);
  const std::vector<float> weight = normal(m * top_k, seed + 1002, 0.3f);
  std::vector<int32_t> pick(m * top_k);
  std::mt19937 rng(seed);
  for (auto& e : pick) e = rng() % 6 == 0 ? -1 : int32_t(rng() % count);
  std::vector<float> want = out0;
  kernels::MoeExpertsParams p;
  p.m = m, p.hidden = hidden, p.inter = inter, p.experts_count = count, p.top_k = top_k;
  p.swiglu_limit = limit;
  p.x = x.data(), p.pick = pick.data(), p.weight = weight.data();
  p.experts = ex.host_views.data(), p.out = want.data();
  kernels::ref::moe_experts(p);
  const auto dx = upload(dev, x), dweight = upload(dev, weight);
  const auto dpick = upload(dev, pick);
  auto dout = upload(dev, out0);
  p.x = dx.get(), p.pick = dpick.get(), p.weight = dweight.get();
  p.experts = ex.device_table.get(), p.out = dout.get();
  kernels::moe_experts(p);
  const auto got = download(dev, dout);
  for (size_t i = 0; i < got.size(); ++i)
    rep.check(close(got[i], want[i], 1e-4f, 1e-6f),
              "out[" + std::to_string(i) + "] = " + std::to_string(got[i]) + ", ref " +
                  std::to_string(want[i]));

  // The expert-parallel halves on the same data: one pick per row, then the combine.
  std::vector<float> y_want(m * top_k * hidden, kNaN);
  kernels::MoeExpertRowsParams r;
  r.n = m * top_k, r.hidden = hidden, r.inter = inter, r.experts_count = count;
  r.swiglu_limit = limit;
  std::vector<float> xr(m * top_k * hidden);
  for (int64_t i = 0; i < m * top_k; ++i)
    std::copy(x.begin() + (i / top_k) * hidden, x.begin() + (i / top_k + 1) * hidden,
              xr.begin() + i * hidden);
  r.x = xr.data(), r.pick = pick.data(), r.experts = ex.host_views.data(), r.y = y_want.data();
  kernels::ref::moe_expert_rows(r);
  const auto dxr = upload(dev, xr);
  auto dy = upload(dev, std::vector<float>(y_want.size(), kNaN));
  r.x = dxr.get(), r.pick = dpick.get(), r.experts = ex.device_table.get(), r.y = dy.get();
  kernels::moe_expert_rows(r);
  const auto y_got = download(dev, dy);
  for (size_t i = 0; i < y_got.size(); ++i)
    rep.check(close(y_got[i], y_want[i], 1e-4f, 1e-6f), "expert_rows y[" + std::to_string(i) + "]");

  // Combine on the device's y (so only the adds are compared): bit for bit.
  std::vector<int64_t> row_of(m * top_k);
  for (int64_t i = 0; i < m * top_k; ++i) row_of[i] = pick[i] < 0 ? -1 : i;
  std::vector<float> c_want = out0;
  kernels::MoeCombineParams c;
  c.m = m, c.top_k = top_k, c.hidden = hidden;
  c.out = c_want.data(), c.y = y_got.data(), c.row_of = row_of.data(), c.weight = weight.data();
  kernels::ref::moe_combine(c);
  const auto drow = upload(dev, row_of);
  auto dc = upload(dev, out0);
  c.out = dc.get(), c.y = dy.get(), c.row_of = drow.get(), c.weight = dweight.get();
  kernels::moe_combine(c);
  const auto c_got = download(dev, dc);
  for (size_t i = 0; i < c_got.size(); ++i)
    rep.check(std::bit_cast<uint32_t>(c_got[i]) == std::bit_cast<uint32_t>(c_want[i]),
              "combine out[" + std::to_string(i) + "] not bit-identical");
  rep.end_case();
}

}  // namespace

void check_moe(DeviceContext& dev, Report& rep) {
  uint32_t seed = 900;
  for (int64_t experts : {8, 256})
    for (int64_t top_k : {1, 6, 8})
      for (bool bias : {false, true}) gate_case(dev, rep, 37, experts, top_k, bias, top_k > 1, seed++);
  for (WeightFormat f : {WeightFormat::FP4, WeightFormat::FP8, WeightFormat::ROWFP8,
                         WeightFormat::F32})
    for (int64_t m : {1, 5, 70}) experts_case(dev, rep, f, m, 3, 8, 64, 96, 7.0f, seed += 40);
  experts_case(dev, rep, WeightFormat::FP4, 16, 8, 64, 256, 128, 0.0f, seed += 400);
}

}  // namespace troupe::cuda_check
