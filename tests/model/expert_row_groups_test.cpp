// model::add_expert_row_groups (model/row_groups_copy.h): under int8 experts the loader
// gives every FP4 routed expert (the target's and the DSpark draft's) its row groups,
// exactly kernels::pack_q8_row_groups of its own view, and the int8 forward reads them:
// poisoning the groups moves the logits, and the logits stay within the int8 path's
// documented tolerance of the golden f64 values (docs/model-notes.md "Int8 experts").
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/check.h"
#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/q8_row_groups.h"
#include "model/row_groups_copy.h"
#include "support/golden.h"
#include "support/scoped_env.h"

namespace troupe::model {
namespace {

using testing::Golden;

// The FP4 expert views of a layer list's MoE blocks, in order.
template <class Layers>
std::vector<const kernels::WeightView*> fp4_experts(const Layers& layers) {
  std::vector<const kernels::WeightView*> out;
  for (const auto& l : layers)
    for (const kernels::ExpertWeights& e : l.ffn.experts)
      for (const kernels::WeightView* v : {&e.w1, &e.w3, &e.w2})
        if (v->format == kernels::WeightFormat::FP4) out.push_back(v);
  return out;
}

void expect_packed(const std::vector<const kernels::WeightView*>& views, int64_t bytes) {
  ASSERT_FALSE(views.empty());
  int64_t want = 0;
  for (const kernels::WeightView* v : views) {
    ASSERT_NE(v->groups, nullptr);
    std::vector<uint8_t> packed(size_t(kernels::q8_row_groups_bytes(*v)));
    kernels::pack_q8_row_groups(*v, packed.data());
    EXPECT_EQ(std::memcmp(v->groups, packed.data(), packed.size()), 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v->groups) % 64, 0u);
    want += (int64_t(packed.size()) + 63) / 64 * 64;
  }
  EXPECT_EQ(bytes, want);
}

TEST(ExpertRowGroups, EveryFp4ExpertGetsItsOwnPackedGroups) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  const auto& g = testing::golden_model(Golden::kSeed7);
  ModelWeights w = bind_weights(g.ckpt, g.config);
  expect_packed(fp4_experts(w.layers), add_expert_row_groups(w));
  EXPECT_NE(w.expert_row_groups, nullptr);
  for (const LayerWeights& l : w.layers) EXPECT_EQ(l.ffn.shared.w1.groups, nullptr);  // FP8: not int8
  EXPECT_EQ(add_expert_row_groups(w), 0);  // grouped once

  DsparkWeights d = bind_dspark_weights(g.ckpt, g.config);
  expect_packed(fp4_experts(d.stages), add_expert_row_groups(d));
}

// The loader gives a matrix's checkpoint bytes back in pack_row_groups_copy's per-view
// callback, so the load holds one copy of the experts: the callback must come once per
// view, right after that view's own groups are written and before the next view's.
TEST(ExpertRowGroups, EachViewIsHandedOverAsSoonAsItsGroupsAreWritten) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  const auto& g = testing::golden_model(Golden::kSeed7);
  ModelWeights w = bind_weights(g.ckpt, g.config);
  std::vector<kernels::WeightView*> views;
  for (LayerWeights& l : w.layers)
    for (kernels::ExpertWeights& e : l.ffn.experts) views.insert(views.end(), {&e.w1, &e.w3, &e.w2});
  size_t calls = 0;
  const auto owner = pack_row_groups_copy(views, nullptr, [&](kernels::WeightView& v) {
    ASSERT_LT(calls, views.size());
    EXPECT_EQ(&v, views[calls]) << "call " << calls;
    ASSERT_NE(v.groups, nullptr);
    std::vector<uint8_t> packed(size_t(kernels::q8_row_groups_bytes(v)));
    kernels::pack_q8_row_groups(v, packed.data());
    EXPECT_EQ(std::memcmp(v.groups, packed.data(), packed.size()), 0) << "call " << calls;
    if (calls + 1 < views.size()) {
      EXPECT_EQ(views[calls + 1]->groups, nullptr) << "call " << calls;
    }
    ++calls;
  });
  ASSERT_NE(owner, nullptr);
  EXPECT_EQ(calls, views.size());
}

TEST(ExpertRowGroups, NoneWhereTheGemmReadsNoneOrTheEnvironmentSaysSo) {
  const auto& g = testing::golden_model(Golden::kSeed7);
  {
    kernels::ScopedCpuPath portable(kernels::CpuPath::Portable);
    ModelWeights w = bind_weights(g.ckpt, g.config);
    EXPECT_EQ(add_expert_row_groups(w), 0);
    for (const kernels::WeightView* v : fp4_experts(w.layers)) EXPECT_EQ(v->groups, nullptr);
  }
  testing::ScopedEnv off("TROUPE_Q8_ROW_GROUPS", "0");
  ModelWeights w = bind_weights(g.ckpt, g.config);
  EXPECT_EQ(add_expert_row_groups(w), 0);
  EXPECT_EQ(w.expert_row_groups, nullptr);
}

TEST(ExpertRowGroups, TheInt8ForwardReadsThemWithinItsTolerance) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  const auto& g = testing::golden_model(Golden::kSeed11Aux);
  const auto j = testing::read_json(testing::golden_dir(Golden::kSeed11Aux) + "/logits-130-all.json");
  const auto tokens = j["tokens"].get<std::vector<int32_t>>();
  const auto want = j["logits"].get<std::vector<std::vector<double>>>();
  ModelWeights w = bind_weights(g.ckpt, g.config);
  ASSERT_GT(add_expert_row_groups(w), 0);
  ForwardOptions o;
  o.expert_precision = kernels::GemmPrecision::Int8;
  const Forward f(g.config, w, nullptr, o);
  auto logits = [&] {
    SequenceState st = SequenceState::empty(g.config);
    SequenceInput in{&st, tokens, /*all_logits=*/true};
    return f.run({&in, 1})[0];
  };
  const std::vector<float> grouped = logits();
  const testing::LogitsAgreement a = testing::compare_logits(grouped, want, g.config.vocab_size);
  std::printf("[ expert int8, row groups ] logits-130: %s\n", a.summary().c_str());
  EXPECT_LE(a.mean, 0.2);  // expert_precision_test's bounds
  EXPECT_GE(static_cast<double>(a.agree), 0.6 * static_cast<double>(a.positions()));
  // Poisoned groups (every code the largest, 2 · E2M1 = 12): the same forward moves.
  const kernels::WeightView& first = w.layers[0].ffn.experts[0].w1;
  std::memset(const_cast<uint8_t*>(first.groups), 0x77, size_t(kernels::q8_row_groups_bytes(first) / 2));
  const std::vector<float> poisoned = logits();
  EXPECT_NE(std::memcmp(grouped.data(), poisoned.data(), grouped.size() * sizeof(float)), 0)
      << "the int8 forward gave the same logits with the groups poisoned: it does not read them";
}

// With the checkpoint to give back: each grouped expert keeps only its groups (data and
// scale null), its checkpoint tensors refuse a second read, and the int8 forward gives
// the logits of the same groups beside the checkpoint's bytes, bit for bit. A copy of
// such a view (an expert-parallel owner's) takes only the groups; any GEMM but Int8
// refuses it with an error naming why.
TEST(ExpertRowGroups, ReleasedExpertsRunFromTheirGroupsAlone) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  const auto& g = testing::golden_model(Golden::kSeed11Aux);
  Checkpoint ckpt = Checkpoint::open(testing::golden_dir(Golden::kSeed11Aux));
  ModelWeights released = bind_weights(ckpt, g.config);
  ASSERT_GT(add_expert_row_groups(released, &ckpt), 0);
  ModelWeights kept = bind_weights(g.ckpt, g.config);
  ASSERT_GT(add_expert_row_groups(kept), 0);
  for (const kernels::WeightView* v : fp4_experts(released.layers)) {
    ASSERT_NE(v->groups, nullptr);
    EXPECT_EQ(v->data, nullptr);
    EXPECT_EQ(v->scale, nullptr);
  }
  int refused = 0;
  for (const auto& [name, t] : ckpt.tensors()) {
    if (!t.released) continue;
    EXPECT_THROW(ckpt.get(name, {t.dtype}, t.shape), Error) << name;
    ++refused;
  }
  EXPECT_EQ(refused, 2 * int(fp4_experts(released.layers).size()));  // codes and scales

  ForwardOptions o;
  o.expert_precision = kernels::GemmPrecision::Int8;
  const std::vector<int32_t> tokens = {5, 17, 3, 99, 41, 8, 250, 7, 61, 2, 33, 19};
  auto logits = [&](const ModelWeights& w) {
    const Forward f(g.config, w, nullptr, o);
    SequenceState st = SequenceState::empty(g.config);
    SequenceInput in{&st, tokens, /*all_logits=*/true};
    return f.run({&in, 1})[0];
  };
  const std::vector<float> a = logits(released), b = logits(kept);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);

  const kernels::WeightView& w = released.layers[0].ffn.experts[1].w2;
  std::vector<float> x(size_t(3 * w.cols), 0.25f), y0(size_t(3 * w.rows)), y1(y0.size());
  kernels::GemmParams p;
  p.x = x.data();
  p.w = w;
  p.m = 3;
  p.y = y0.data();
  p.precision = kernels::GemmPrecision::F32;
  EXPECT_THROW(kernels::gemm(p), Error);
  p.precision = kernels::GemmPrecision::Int8;
  kernels::gemm(p);
  std::vector<std::byte> buf(size_t(kernels::copied_bytes(w)) + 64);
  auto* dst = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(buf.data()) + 63) / 64 * 64);
  EXPECT_EQ(kernels::copied_bytes(w), (kernels::q8_row_groups_bytes(w) + 63) / 64 * 64);
  p.w = kernels::copy_weight(w, dst);
  EXPECT_EQ(p.w.data, nullptr);
  p.y = y1.data();
  kernels::gemm(p);
  EXPECT_EQ(std::memcmp(y0.data(), y1.data(), y0.size() * sizeof(float)), 0);
  const kernels::WeightView slice = row_slice(w, 16, 16);
  EXPECT_EQ(slice.data, nullptr);
  EXPECT_EQ(slice.groups, kernels::q8_row_groups_at(w, 16));
}

// The DSpark draft runs its experts at the target's precision: under int8 its MoE reads
// the stages' row groups (poisoning them moves its hidden states), so its checkpoint bytes
// can go back as the target's do; the released draft then gives the kept groups' hidden
// states bit for bit. (Until 2026-12-06 the draft ran f32 experts whatever the target's
// precision; with its bytes released that read null.)
TEST(ExpertRowGroups, TheInt8DraftReadsItsStagesGroups) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  const auto& g = testing::golden_model(Golden::kSeed11Aux);
  const std::vector<int32_t> prompt = testing::random_tokens(24, 1206);
  SequenceState st = SequenceState::empty(g.config);
  st.enable_features(g.config);
  SequenceInput in{&st, prompt, false};
  testing::golden_draft(Golden::kSeed11Aux).forward->run({&in, 1});
  const FeatureRing& F = *st.feature_ring;
  const int64_t anchor = static_cast<int64_t>(prompt.size()) - 1;

  Checkpoint ckpt = Checkpoint::open(testing::golden_dir(Golden::kSeed11Aux));
  DsparkWeights released = bind_dspark_weights(ckpt, g.config);
  ASSERT_GT(add_expert_row_groups(released, &ckpt), 0);
  DsparkWeights kept = bind_dspark_weights(g.ckpt, g.config);
  ASSERT_GT(add_expert_row_groups(kept), 0);
  for (const kernels::WeightView* v : fp4_experts(released.stages)) ASSERT_EQ(v->data, nullptr);
  constexpr auto kInt8 = kernels::GemmPrecision::Int8;
  const DsparkDraft from_groups(g.config, g.weights, released, kInt8);
  const DsparkDraft beside_bytes(g.config, g.weights, kept, kInt8);
  const DsparkDraft exact(g.config, g.weights, kept);
  const std::vector<float> h = from_groups.hidden(F, anchor, prompt.back());
  const std::vector<float> h_kept = beside_bytes.hidden(F, anchor, prompt.back());
  const std::vector<float> h_f32 = exact.hidden(F, anchor, prompt.back());
  ASSERT_EQ(h.size(), h_f32.size());
  EXPECT_EQ(std::memcmp(h.data(), h_kept.data(), h.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(h.data(), h_f32.data(), h.size() * sizeof(float)), 0) << "int8 gave f32's bits";
  double err = 0, norm = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    err += (double(h[i]) - h_f32[i]) * (double(h[i]) - h_f32[i]);
    norm += double(h_f32[i]) * h_f32[i];
  }
  std::printf("[ expert int8, draft ] hidden relative L2 vs f32 experts: %.3g\n", std::sqrt(err / norm));
  EXPECT_LE(std::sqrt(err / norm), 0.2);
  for (const kernels::WeightView* v : fp4_experts(kept.stages))
    std::memset(const_cast<uint8_t*>(v->groups), 0x77, size_t(kernels::q8_row_groups_bytes(*v)));
  EXPECT_NE(std::memcmp(beside_bytes.hidden(F, anchor, prompt.back()).data(), h_kept.data(),
                        h.size() * sizeof(float)),
            0)
      << "the int8 draft gave the same hidden states with its groups poisoned";
  const std::vector<float> h_f32_again = exact.hidden(F, anchor, prompt.back());
  EXPECT_EQ(std::memcmp(h_f32_again.data(), h_f32.data(), h.size() * sizeof(float)), 0);
  // f32 experts on the released stages: an error naming why, not a read of null bytes.
  const DsparkDraft f32_on_groups(g.config, g.weights, released);
  EXPECT_THROW(f32_on_groups.hidden(F, anchor, prompt.back()), Error);
}

}  // namespace
}  // namespace troupe::model
