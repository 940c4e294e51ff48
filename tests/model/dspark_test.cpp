// DSpark draft + greedy verify (MODEL.md §8) on the golden tiny checkpoint:
// - target features: F[p] in the ring == RMSNorm(main_proj · concat Z_l, main_norm) from
//   the traced X/pre of layers 9, 10, 11 (double reference, rel L2 1e-5); keeping
//   features leaves logits and every state row bit-identical;
// - draft attention of a stage vs a double reference (context rows from F with a hole,
//   block rows, bidirectional, sink, inverse rope, wo_a/wo_b), rel L2 1e-5 per slot;
// - the draft's shapes, positions and cuts (window, max_position_embeddings, conf_min);
// - StepSnapshot restores a state exactly, and a rejected step leaves the state a run
//   that never saw the rejected tokens would have (window rows, global rows, carry,
//   features, length);
// - §10 (d): speculative greedy == plain greedy for several prompts and lengths, with the
//   real draft, a deliberately wrong draft and an oracle draft (all accepted).
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "kernels/check.h"
#include "model/dspark_draft.h"
#include "model/speculative.h"
#include "support/csa_ref.h"
#include "support/golden.h"
#include "support/plain_forward.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using namespace troupe::testing::ref;
using model::FeatureRing;
using model::SequenceInput;
using model::SequenceState;

using Draft = GoldenDraft;

std::vector<float> run(const model::Forward& f, SequenceState& st, std::vector<int32_t> tokens,
                       bool all = false) {
  SequenceInput in{&st, tokens, all};
  return f.run({&in, 1})[0];
}

// Every byte of two states: length, tokens, rings, global rows, carry, features.
void expect_same_state(const SequenceState& a, const SequenceState& b, const std::string& what) {
  SCOPED_TRACE(what);
  EXPECT_EQ(a.length(), b.length());
  EXPECT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    EXPECT_EQ(a.layers[l].window_pos, b.layers[l].window_pos);
    // Slots a ring does not hold may keep stale bytes; compare the held ones.
    const int64_t row = a.layout.window.bytes();
    for (size_t s = 0; s < a.layers[l].window_pos.size(); ++s)
      if (a.layers[l].window_pos[s] >= 0) {
        EXPECT_TRUE(std::equal(&a.layers[l].window[s * row], &a.layers[l].window[(s + 1) * row],
                               &b.layers[l].window[s * row]))
            << "slot " << s;
      }
    EXPECT_EQ(a.layers[l].ckv, b.layers[l].ckv);
    EXPECT_EQ(a.layers[l].ikey, b.layers[l].ikey);
    EXPECT_EQ(a.layers[l].carry_v, b.layers[l].carry_v);
    EXPECT_EQ(a.layers[l].carry_s, b.layers[l].carry_s);
  }
  ASSERT_EQ(a.feature_ring.has_value(), b.feature_ring.has_value());
  if (!a.feature_ring) return;
  ASSERT_EQ(a.feature_ring->pos, b.feature_ring->pos);
  for (int64_t p : a.feature_ring->pos)
    if (p >= 0) {
      EXPECT_TRUE(std::equal(a.feature_ring->row(p), a.feature_ring->row(p) + a.feature_ring->width,
                             b.feature_ring->row(p)))
          << "F[" << p << "]";
    }
}

TEST(DsparkFeatures, RingHoldsRmsNormOfMainProjOverTargetLayers) {
  const GoldenModel& g = golden_model();
  const model::ModelConfig& c = g.config;
  const Draft& d = golden_draft();
  const int64_t H = c.hidden_size, hc = c.hc_mult, n = 21;           // > W: the ring wraps
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> X, pre;  // (layer, row)
  model::TraceFn trace = [&](const std::string& name, int64_t l, int64_t r,
                             std::span<const float> v) {
    if (name == "X") X[{l, r}].assign(v.begin(), v.end());
    if (name == "pre") pre[{l, r}].assign(v.begin(), v.end());
  };
  SequenceState st = SequenceState::empty(c);
  st.enable_features(c);
  const std::vector<int32_t> tokens = random_tokens(n, 11);
  SequenceInput in{&st, tokens, false};
  d.forward->run({&in, 1}, trace);

  const Dense proj = dense(d.weights.main_proj);
  const FeatureRing& F = *st.feature_ring;
  for (int64_t p = 0; p < n; ++p) {
    SCOPED_TRACE("position " + std::to_string(p));
    if (p < n - c.sliding_window) {
      EXPECT_EQ(F.row(p), nullptr);
      continue;
    }
    DVec z;  // concat of Z_l = Σ_s pre_s X_s
    for (int64_t l : c.dspark_target_layer_ids) {
      const auto& x = X.at({l, p});
      const auto& w = pre.at({l, p});
      for (int64_t ch = 0; ch < H; ++ch) {
        double s = 0;
        for (int64_t k = 0; k < hc; ++k) s += double(w[k]) * x[k * H + ch];
        z.push_back(s);
      }
    }
    const DVec want = rms_norm(matvec(proj, z.data()), d.weights.main_norm, c.rms_norm_eps);
    ASSERT_NE(F.row(p), nullptr);
    EXPECT_LT(rel_l2(F.row(p), want), 1e-5);
  }
}

TEST(DsparkFeatures, KeepingFeaturesChangesNoLogitOrRow) {
  const GoldenModel& g = golden_model();
  const Draft& d = golden_draft();
  SequenceState plain = SequenceState::empty(g.config), kept = SequenceState::empty(g.config);
  kept.enable_features(g.config);
  const std::vector<int32_t> prompt = random_tokens(19, 3);
  const auto a = run(*g.forward, plain, prompt, true), b = run(*d.forward, kept, prompt, true);
  EXPECT_EQ(a, b);
  const auto a2 = run(*g.forward, plain, {77}), b2 = run(*d.forward, kept, {77});
  EXPECT_EQ(a2, b2);
  kept.feature_ring.reset();
  expect_same_state(plain, kept, "rows");
}

TEST(DsparkFeatures, ForwardWithoutDraftWeightsRefusesAFeatureState) {
  const GoldenModel& g = golden_model();
  SequenceState st = SequenceState::empty(g.config);
  st.enable_features(g.config);
  EXPECT_THROW(run(*g.forward, st, {5, 6}), troupe::Error);
}

// Draft attention vs a double reference: F rows of the window (one missing), Bs slots.
TEST(DsparkDraftAttention, MatchesReference) {
  const model::ModelConfig& c = golden_model().config;
  const Draft& d = golden_draft();
  const int64_t H = c.hidden_size, Bs = c.dspark_block_size, D = c.head_dim, W = c.sliding_window;
  for (int64_t anchor : {0, 7, 40}) {
    SCOPED_TRACE("anchor " + std::to_string(anchor));
    model::AttentionWeights w = d.weights.stages[1].attn;
    w.sink = random_floats(c.num_attention_heads, 5, 1.0f);  // a sink that matters
    FeatureRing F(W, H);
    for (int64_t p = std::max<int64_t>(0, anchor - W - 3); p <= anchor; ++p)
      if (p != anchor - 2) F.put(p, random_floats(H, 100 + uint32_t(p), 1.0f).data());
    const std::vector<float> x = random_floats(Bs * H, 9, 1.0f);
    std::vector<float> got(Bs * H, std::nanf(""));
    model::draft_attention(c, w, kernels::rope_frequencies(c.rope_theta, c.qk_rope_head_dim, {}), F,
                           anchor, x.data(), got.data());

    CsaLayerRef ref(c, w, /*layer=*/0);  // an SWA layer: rope_theta, no YaRN, like the draft
    const Dense wkv = dense(w.wkv);
    const DVec freqs = layer_freqs(c, 0);
    auto row = [&](const float* u, int64_t pos) {
      DVec kv = rms_norm(matvec(wkv, u), w.kv_norm, c.rms_norm_eps);
      rope(kv, c.qk_rope_head_dim, pos, freqs);
      return kv;
    };
    std::vector<DVec> keys;
    for (int64_t p = std::max<int64_t>(0, anchor - W + 1); p <= anchor; ++p)
      if (p != anchor - 2) keys.push_back(row(F.row(p), p));
    for (int64_t j = 0; j < Bs; ++j) keys.push_back(row(&x[j * H], anchor + 1 + j));
    std::vector<const DVec*> kp;
    for (const DVec& k : keys) kp.push_back(&k);
    for (int64_t i = 0; i < Bs; ++i) {
      const int64_t p = anchor + 1 + i;
      const DVec want = ref.attend(ref.queries(ref.query_latent(&x[i * H]), p), kp, p);
      EXPECT_LT(rel_l2(&got[i * H], want), 1e-5) << "slot " << i;
    }
    (void)D;
  }
}

TEST(DsparkDraft, ProposalShapesAndCuts) {
  const model::ModelConfig& c = golden_model().config;
  const Draft& d = golden_draft();
  SequenceState st = SequenceState::empty(c);
  st.enable_features(c);
  const std::vector<int32_t> prompt = random_tokens(30, 8);
  run(*d.forward, st, prompt);
  const int64_t a = 29, k = c.num_speculative_tokens;
  const model::DraftProposal p = d.draft->propose(*st.feature_ring, a, prompt[a], 123, k);
  ASSERT_EQ(static_cast<int64_t>(p.tokens.size()), k);
  ASSERT_EQ(static_cast<int64_t>(p.confidence.size()), k + 1);
  for (int32_t t : p.tokens) EXPECT_TRUE(t >= 0 && t < c.vocab_size);
  for (float v : p.confidence) EXPECT_TRUE(v > 0.0f && v < 1.0f);
  const std::vector<float> h = d.draft->hidden(*st.feature_ring, a, prompt[a]);
  EXPECT_EQ(static_cast<int64_t>(h.size()), c.dspark_block_size * c.hidden_size);

  // Only F of the window [a-W+1, a] is read: garbage outside it changes nothing.
  FeatureRing wide(2 * c.sliding_window, c.hidden_size);
  for (int64_t q = a - c.sliding_window + 1; q <= a; ++q) wide.put(q, st.feature_ring->row(q));
  wide.put(a - c.sliding_window, random_floats(c.hidden_size, 1, 50.0f).data());
  EXPECT_EQ(d.draft->hidden(wide, a, prompt[a]), h);
  // ... and F[a] does matter, as does the anchor token.
  wide.put(a, random_floats(c.hidden_size, 2, 1.0f).data());
  EXPECT_NE(d.draft->hidden(wide, a, prompt[a]), h);
  EXPECT_NE(d.draft->hidden(*st.feature_ring, a, prompt[a] + 1), h);
  // The bonus token feeds the Markov head of slot 1.
  EXPECT_EQ(d.draft->propose(*st.feature_ring, a, prompt[a], 123, k).tokens, p.tokens);

  // conf_min 1 cuts every draft; fewer requested, fewer returned (never past Bs-1).
  EXPECT_TRUE(d.draft->propose(*st.feature_ring, a, prompt[a], 123, k, 1.0f).tokens.empty());
  EXPECT_EQ(d.draft->propose(*st.feature_ring, a, prompt[a], 123, 1).tokens.size(), 1u);
  EXPECT_EQ(
      static_cast<int64_t>(d.draft->propose(*st.feature_ring, a, prompt[a], 123, 99).tokens.size()),
      c.dspark_block_size - 1);
  // No F at the anchor: refused.
  EXPECT_THROW(d.draft->propose(*st.feature_ring, a + 1, 5, 123, k), troupe::Error);
}

TEST(DsparkDraft, CutBeforeMaxPosition) {
  const model::ModelConfig& c = golden_model().config;
  const Draft& d = golden_draft();
  FeatureRing F(c.sliding_window, c.hidden_size);
  const int64_t a = c.max_position_embeddings - 3;  // bonus at max-2, one draft at max-1
  F.put(a, random_floats(c.hidden_size, 4, 1.0f).data());
  EXPECT_EQ(d.draft->propose(F, a, 9, 10, 3).tokens.size(), 1u);
}

TEST(DsparkRollback, SnapshotRestoresExactly) {
  const model::ModelConfig& c = golden_model().config;
  const Draft& d = golden_draft();
  for (int64_t n : {7, 20, 21}) {  // carry open or closed, ring wrapped or not
    SequenceState st = SequenceState::empty(c);
    st.enable_features(c);
    run(*d.forward, st, random_tokens(n, uint32_t(n)));
    const SequenceState before = st;
    const model::StepSnapshot snap(st, 4);
    run(*d.forward, st, {5, 6, 7, 8}, true);
    snap.restore(st);
    expect_same_state(st, before, "prompt " + std::to_string(n));
  }
}

// Step 1 drafts [g_1, wrong, wrong] (g = plain greedy): m = 1, rolled back; step 2 (k = 1
// for the last two tokens) drafts [g_3]: accepted, nothing rolled back. The state then
// equals prompt -> [g_0, g_1] -> [g_2, g_3] run without the rejected tokens.
TEST(DsparkRollback, RejectedStepLeavesTheStateOfAnHonestRun) {
  const model::ModelConfig& c = golden_model().config;
  const Draft& d = golden_draft();
  for (int64_t n : {6, 15, 16, 33}) {
    SCOPED_TRACE("prompt " + std::to_string(n));
    const std::vector<int32_t> prompt = random_tokens(n, 40 + uint32_t(n));
    const PlainGreedy g = plain_greedy(prompt, 5);
    int calls = 0;
    SequenceState st = SequenceState::empty(c);
    const auto r = model::speculative_greedy(*d.forward, *d.draft, st, prompt, 5,
                                             [&](std::vector<int32_t>& drafts) {
                                               ++calls;
                                               if (calls == 1) drafts = {g.tokens[1], 4000, 4001};
                                               if (calls == 2) drafts = {g.tokens[3]};
                                             });
    EXPECT_EQ(calls, 2);
    EXPECT_EQ(r.tokens, g.tokens);
    EXPECT_EQ(r.stats.accepted, 2);
    EXPECT_EQ(r.stats.drafted, 4);
    SequenceState honest = SequenceState::empty(c);
    honest.enable_features(c);
    run(*d.forward, honest, prompt);
    run(*d.forward, honest, {g.tokens[0], g.tokens[1]});
    run(*d.forward, honest, {g.tokens[2], g.tokens[3]});
    expect_same_state(st, honest, "after rollback");
  }
}

struct GreedyCase {
  int64_t prompt, n;
  uint32_t seed;
};

class DsparkGreedy : public ::testing::TestWithParam<GreedyCase> {};

// MODEL.md §10 (d): the speculative output is the target's greedy output, whatever the
// draft proposes.
TEST_P(DsparkGreedy, EqualsPlainGreedy) {
  const model::ModelConfig& c = golden_model().config;
  const Draft& d = golden_draft();
  const GreedyCase gc = GetParam();
  const std::vector<int32_t> prompt = random_tokens(gc.prompt, gc.seed);
  const PlainGreedy want = plain_greedy(prompt, gc.n);

  SequenceState st = SequenceState::empty(c);
  const auto real = model::speculative_greedy(*d.forward, *d.draft, st, prompt, gc.n);
  EXPECT_EQ(real.tokens, want.tokens) << "real draft";
  EXPECT_EQ(st.length(), gc.prompt + gc.n - 1);

  auto wrong_draft = [&](std::vector<int32_t>& drafts) {
    for (int32_t& t : drafts) t = t == 4000 ? 4001 : 4000;
  };
  SequenceState st2 = SequenceState::empty(c);
  const auto wrong =
      model::speculative_greedy(*d.forward, *d.draft, st2, prompt, gc.n, wrong_draft);
  EXPECT_EQ(wrong.tokens, want.tokens) << "wrong draft";

  // Oracle: the drafts are the true continuation, so every one is accepted.
  size_t done = 1;
  auto oracle = [&](std::vector<int32_t>& drafts) {
    for (size_t i = 0; i < drafts.size(); ++i) drafts[i] = want.tokens[done + i];
    done += drafts.size() + 1;
  };
  SequenceState st3 = SequenceState::empty(c);
  const auto best = model::speculative_greedy(*d.forward, *d.draft, st3, prompt, gc.n, oracle);
  EXPECT_EQ(best.tokens, want.tokens) << "oracle draft";
  EXPECT_EQ(best.stats.accepted, best.stats.drafted);
  EXPECT_EQ(best.stats.emitted, gc.n - 1);
  if (gc.n > 1) {
    EXPECT_EQ(best.stats.steps, (gc.n - 2) / (c.num_speculative_tokens + 1) + 1);
  }
}

INSTANTIATE_TEST_SUITE_P(Dspark, DsparkGreedy,
                         ::testing::Values(GreedyCase{1, 9, 1}, GreedyCase{3, 1, 2},
                                           GreedyCase{17, 2, 3}, GreedyCase{17, 23, 4},
                                           GreedyCase{40, 13, 5}));

// troupe generate --speculative prints the plain greedy text and the acceptance.
TEST(DsparkCli, SpeculativeGenerateEqualsPlainText) {
  const std::string base = "generate --model " + golden_dir() + " --prompt 'Once upon a time'" +
                           " --max-tokens 12 --ignore-eos";
  const RunResult plain = run_troupe(base);
  const RunResult spec = run_troupe(base + " --speculative");
  ASSERT_EQ(plain.status, 0) << plain.out;
  ASSERT_EQ(spec.status, 0) << spec.out;
  const size_t at = spec.out.find("speculative: ");
  ASSERT_NE(at, std::string::npos) << spec.out;
  EXPECT_EQ(spec.out.substr(0, at), plain.out);
  EXPECT_NE(spec.out.find("tokens/step", at), std::string::npos);
  const RunResult sampled = run_troupe(base + " --speculative --temperature 0.7");
  EXPECT_NE(sampled.status, 0);
  EXPECT_NE(sampled.out.find("greedy only"), std::string::npos) << sampled.out;
}

}  // namespace
}  // namespace troupe::testing
