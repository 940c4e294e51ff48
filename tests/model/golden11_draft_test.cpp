// The DSpark draft's numbers (MODEL.md §8) against the f64 values of
// tests/data/v41-tiny-seed11-aux/draft-40.{json,npz}: after the first 40 tokens of
// logits-48 (anchor a = 39),
// - the target features Z_l of the dspark_target_layer_ids layers and the F ring rows,
//   and the bonus (the target's argmax at a);
// - the draft alone, fed the golden's own F rows: hidden states h of every slot, base and
//   Markov-loop logits, confidences and drafts, to f32 rounding (the draft quantizes
//   nothing, so no rounding flip can enter);
// - the same from the engine's F (end to end), and the greedy verify of [bonus, d_1..d_k];
// - `troupe draft` prints the model-level DsparkDraft's proposal and the golden's.
// Tolerances are stated with each check; the figures measured are printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "model/speculative.h"
#include "support/golden.h"
#include "support/npz.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using model::FeatureRing;
using model::SequenceInput;
using model::SequenceState;

std::string draft_file(const std::string& name) {
  return golden_dir(Golden::kSeed11Aux) + "/" + name;
}

struct DraftGolden {
  nlohmann::json j;
  std::map<std::string, NpyArray> npz;
  std::vector<int32_t> prompt;
  int64_t anchor = 0, k = 0;
};

const DraftGolden& draft_golden() {
  static const DraftGolden* d = [] {
    auto* g = new DraftGolden{read_json(draft_file("draft-40.json")),
                              read_npz(draft_file("draft-40.npz")), {}, 0, 0};
    g->prompt = g->j["prompt"].get<std::vector<int32_t>>();
    g->anchor = g->j["anchor"].get<int64_t>();
    g->k = static_cast<int64_t>(g->j["drafts"].size());
    return g;
  }();
  return *d;
}

// Relative L2 of each row r of got [rows, width] vs the golden array's row first_row + r.
std::vector<double> row_errors(const float* got, const NpyArray& want, int64_t rows, int64_t width,
                               int64_t first_row = 0) {
  EXPECT_EQ(want.shape.back(), width);
  std::vector<double> err;
  for (int64_t r = 0; r < rows; ++r) {
    const auto at = want.values.begin() + (first_row + r) * width;
    err.push_back(relative_l2(got + r * width, std::vector<double>(at, at + width)));
    if (std::getenv("TROUPE_GOLDEN_VERBOSE"))
      std::printf("row %lld err %.3g\n", static_cast<long long>(first_row + r), err.back());
  }
  return err;
}

double worst_row_error(const float* got, const NpyArray& want, int64_t rows, int64_t width,
                       int64_t first_row = 0) {
  const std::vector<double> err = row_errors(got, want, rows, width, first_row);
  return *std::max_element(err.begin(), err.end());
}

// Target rows (Z, F) carry the target's float32 error, and from a quantizer code that
// rounds the other way on (golden11_forward_test.cpp: two in these 40 positions, at 1 and
// at 39, the anchor) an error up to ~1e-2 at the rows it reaches. Judged like the logits,
// one order tighter: mean relative L2 <= 1e-3, >= 90% of rows within 1e-3, none over 5e-2.
void expect_target_rows_match(const std::vector<double>& err, const std::string& what) {
  double mean = 0;
  int64_t within = 0;
  for (double e : err) mean += e / static_cast<double>(err.size()), within += e <= 1e-3;
  const double worst = *std::max_element(err.begin(), err.end());
  std::printf("[ golden11 draft ] %s: mean relative L2 %.3g, worst %.3g at row %lld, %lld/%zu "
              "rows within 1e-3\n",
              what.c_str(), mean, worst,
              static_cast<long long>(std::max_element(err.begin(), err.end()) - err.begin()),
              static_cast<long long>(within), err.size());
  EXPECT_LE(mean, 1e-3) << what;
  EXPECT_GE(static_cast<double>(within), 0.9 * static_cast<double>(err.size())) << what;
  EXPECT_LE(worst, 5e-2) << what;
}

// The engine's target run over the prompt with features on: Z_l rows of every position,
// the state (F ring) and the last position's logits.
struct TargetRun {
  SequenceState state;
  std::map<int64_t, std::vector<float>> Z;  // layer -> [T, H]
  std::vector<float> logits;
};

TargetRun run_target(const std::vector<int32_t>& prompt) {
  const GoldenModel& g = golden_model(Golden::kSeed11Aux);
  const int64_t H = g.config.hidden_size, hc = g.config.hc_mult;
  TargetRun out{SequenceState::empty(g.config), {}, {}};
  out.state.enable_features(g.config);
  std::map<std::pair<int64_t, int64_t>, std::vector<float>> X;  // (layer, row) -> [hc, H]
  model::TraceFn trace = [&](const std::string& name, int64_t l, int64_t r,
                             std::span<const float> v) {
    if (name == "X") X[{l, r}].assign(v.begin(), v.end());
    if (name != "pre") return;
    // Z_l[p] = Σ_s pre_s X_s with the pre carried out of layer l ("X" comes first).
    auto& z = out.Z[l];
    z.resize((r + 1) * H, 0.0f);
    const auto& x = X.at({l, r});
    for (int64_t ch = 0; ch < H; ++ch) {
      float s = 0;
      for (int64_t i = 0; i < hc; ++i) s += v[i] * x[i * H + ch];
      z[r * H + ch] = s;
    }
  };
  SequenceInput in{&out.state, prompt, false};
  out.logits = golden_draft(Golden::kSeed11Aux).forward->run({&in, 1}, trace)[0];
  return out;
}

// Everything the draft computes from one F ring.
struct DraftRun {
  std::vector<float> h;  // [Bs, H]
  model::DraftProposal proposal;
  std::vector<float> base, logits;  // [k, V] rows of draft positions 1..k
};

DraftRun run_draft(const FeatureRing& F, int32_t bonus) {
  const DraftGolden& dg = draft_golden();
  const auto& draft = *golden_draft(Golden::kSeed11Aux).draft;
  DraftRun out;
  const int32_t anchor_token = dg.prompt[dg.anchor];
  out.h = draft.hidden(F, dg.anchor, anchor_token);
  model::TraceFn trace = [&](const std::string& name, int64_t, int64_t, std::span<const float> v) {
    auto& dst = name == "dspark.base" ? out.base : out.logits;
    dst.insert(dst.end(), v.begin(), v.end());
  };
  out.proposal = draft.propose(F, dg.anchor, anchor_token, bonus, dg.k, 0.0f, trace);
  return out;
}

// Checks a draft run against the golden with relative L2 tolerance `tol` per row (h, base,
// logits) and absolute `tol` on the confidences; prints the figures.
void expect_draft_matches(const DraftRun& d, double tol, const char* what) {
  const DraftGolden& dg = draft_golden();
  const model::ModelConfig& c = golden_model(Golden::kSeed11Aux).config;
  const int64_t H = c.hidden_size, V = c.vocab_size, k = dg.k;
  SCOPED_TRACE(what);
  ASSERT_EQ(static_cast<int64_t>(d.h.size()), c.dspark_block_size * H);
  ASSERT_EQ(static_cast<int64_t>(d.base.size()), k * V);
  ASSERT_EQ(static_cast<int64_t>(d.logits.size()), k * V);
  const double h_err = worst_row_error(d.h.data(), dg.npz.at("dspark.h"), c.dspark_block_size, H);
  // The engine forms base and Markov logits for the draft positions 1..k only (slot 0's
  // token is the forced bonus): golden rows 1..k.
  const double base_err = worst_row_error(d.base.data(), dg.npz.at("dspark.base"), k, V, 1);
  const double logit_err = worst_row_error(d.logits.data(), dg.npz.at("dspark.logits"), k, V, 1);
  const auto want_conf = dg.j["confidence"].get<std::vector<double>>();
  ASSERT_EQ(d.proposal.confidence.size(), want_conf.size());
  double conf_err = 0;
  for (size_t i = 0; i < want_conf.size(); ++i) {
    conf_err = std::max(conf_err, std::abs(d.proposal.confidence[i] - want_conf[i]));
    EXPECT_NEAR(dg.npz.at("dspark.confidence").values[i], want_conf[i], 1e-12);  // json == npz
  }
  std::printf("[ golden11 draft ] %s: worst relative L2 h %.3g, base %.3g, logits %.3g; "
              "confidence max |diff| %.3g\n",
              what, h_err, base_err, logit_err, conf_err);
  EXPECT_LE(h_err, tol);
  EXPECT_LE(base_err, tol);
  EXPECT_LE(logit_err, tol);
  EXPECT_LE(conf_err, tol);
  EXPECT_EQ(d.proposal.tokens, dg.j["drafts"].get<std::vector<int32_t>>());
  const auto slot_argmax = dg.j["slot_argmax"].get<std::vector<int64_t>>();
  for (int64_t i = 1; i <= k; ++i)
    EXPECT_EQ(kernels::argmax(&d.logits[(i - 1) * V], V), slot_argmax[i]) << "draft position " << i;
}

TEST(Golden11Draft, TargetFeaturesRingAndBonus) {
  const DraftGolden& dg = draft_golden();
  const model::ModelConfig& c = golden_model(Golden::kSeed11Aux).config;
  const int64_t H = c.hidden_size, T = static_cast<int64_t>(dg.prompt.size());
  ASSERT_EQ(dg.anchor, T - 1);
  const TargetRun t = run_target(dg.prompt);
  EXPECT_EQ(kernels::argmax(t.logits.data(), c.vocab_size), dg.j["bonus"].get<int32_t>());
  for (int64_t l : c.dspark_target_layer_ids) {
    const std::string key = "L" + std::to_string(l) + ".Z";
    ASSERT_EQ(static_cast<int64_t>(t.Z.at(l).size()), T * H) << key;
    const std::vector<double> err = row_errors(t.Z.at(l).data(), dg.npz.at(key), T, H);
    expect_target_rows_match(err, key);
    EXPECT_LE(err[0], 1e-5) << key << ": position 0 precedes every rounding flip";
  }
  // The ring holds F of the context positions a-W+1..a, in the golden's order.
  const auto ctx = dg.j["context_positions"].get<std::vector<int64_t>>();
  const NpyArray& F = dg.npz.at("dspark.F");
  ASSERT_EQ(F.shape[0], static_cast<int64_t>(ctx.size()));
  std::vector<double> err;
  for (size_t i = 0; i < ctx.size(); ++i) {
    const float* row = t.state.feature_ring->row(ctx[i]);
    ASSERT_NE(row, nullptr) << "F[" << ctx[i] << "]";
    err.push_back(row_errors(row, F, 1, H, static_cast<int64_t>(i))[0]);
  }
  expect_target_rows_match(err, "dspark.F");
}

// The draft network alone, on the golden's F rows: f32 rounding only.
TEST(Golden11Draft, DraftOnGoldenFeaturesMatches) {
  const DraftGolden& dg = draft_golden();
  const model::ModelConfig& c = golden_model(Golden::kSeed11Aux).config;
  const auto ctx = dg.j["context_positions"].get<std::vector<int64_t>>();
  const NpyArray& F = dg.npz.at("dspark.F");
  FeatureRing ring(c.sliding_window, c.hidden_size);
  for (size_t i = 0; i < ctx.size(); ++i) {
    std::vector<float> row(F.values.begin() + i * c.hidden_size,
                           F.values.begin() + (i + 1) * c.hidden_size);
    ring.put(ctx[i], row.data());
  }
  expect_draft_matches(run_draft(ring, dg.j["bonus"].get<int32_t>()), 1e-5, "golden F");
}

// End to end: the engine's own target features, bonus and drafts. F[a] carries the
// position-39 rounding flip (relative L2 8e-3), which moves the draft by ~5e-4: 1e-3.
TEST(Golden11Draft, DraftOnEngineFeaturesMatches) {
  const DraftGolden& dg = draft_golden();
  const TargetRun t = run_target(dg.prompt);
  const int32_t bonus = kernels::argmax(t.logits.data(), golden_model(Golden::kSeed11Aux).config.vocab_size);
  expect_draft_matches(run_draft(*t.state.feature_ring, bonus), 1e-3, "engine F");
}

// Greedy verify of [bonus, d_1..d_k]: the target's argmax per input, the accepted prefix
// and the emitted tokens, both from one verify forward and from speculative_greedy.
TEST(Golden11Draft, GreedyVerifyMatches) {
  const DraftGolden& dg = draft_golden();
  const GoldenModel& g = golden_model(Golden::kSeed11Aux);
  const GoldenDraft& d = golden_draft(Golden::kSeed11Aux);
  const auto& verify = dg.j["verify"];
  const int32_t bonus = dg.j["bonus"].get<int32_t>();
  const auto drafts = verify["drafts"].get<std::vector<int32_t>>();
  ASSERT_EQ(drafts, dg.j["drafts"].get<std::vector<int32_t>>());

  SequenceState st = SequenceState::empty(g.config);
  SequenceInput prefill{&st, dg.prompt, false};
  g.forward->run({&prefill, 1});
  std::vector<int32_t> step = {bonus};
  step.insert(step.end(), drafts.begin(), drafts.end());
  SequenceInput in{&st, step, /*all_logits=*/true};
  const auto logits = g.forward->run({&in, 1})[0];
  std::vector<int64_t> target_argmax;
  for (size_t i = 0; i < step.size(); ++i)
    target_argmax.push_back(kernels::argmax(&logits[i * g.config.vocab_size], g.config.vocab_size));
  EXPECT_EQ(target_argmax, verify["target_argmax"].get<std::vector<int64_t>>());

  // The accepted prefix and the emitted tokens that follow from those argmaxes (§8).
  int64_t m = 0;
  while (m < dg.k && drafts[m] == target_argmax[m]) ++m;
  std::vector<int32_t> emitted(drafts.begin(), drafts.begin() + m);
  emitted.push_back(static_cast<int32_t>(target_argmax[m]));
  EXPECT_EQ(m, verify["accepted"].get<int64_t>());
  EXPECT_EQ(emitted, verify["emitted"].get<std::vector<int32_t>>());

  // speculative_greedy's first step (n = 1 + k + 1 so that it drafts all k): the same
  // drafts, then the bonus and the emitted tokens lead its output.
  SequenceState spec = SequenceState::empty(g.config);
  std::vector<int32_t> first_drafts;
  const auto r = model::speculative_greedy(*d.forward, *d.draft, spec, dg.prompt, dg.k + 2,
                                           [&](std::vector<int32_t>& got) {
                                             if (first_drafts.empty()) first_drafts = got;
                                           });
  EXPECT_EQ(first_drafts, drafts);
  ASSERT_GE(r.tokens.size(), 1 + emitted.size());
  EXPECT_EQ(r.tokens[0], bonus);
  EXPECT_EQ(std::vector<int32_t>(r.tokens.begin() + 1, r.tokens.begin() + 1 + emitted.size()),
            emitted);
}

// `troupe draft` on the golden checkpoint, tokens = the first 40 of logits-48: the
// model-level proposal exactly (%.9g round-trips a float) and the golden's values.
TEST(Golden11Draft, CliPrintsTheModelLevelAndGoldenDraft) {
  const DraftGolden& dg = draft_golden();
  const auto tokens = read_json(draft_file("logits-48-all.json"))["tokens"].get<std::vector<int32_t>>();
  const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + 40);
  ASSERT_EQ(prompt, dg.prompt);
  std::string list;
  for (size_t i = 0; i < prompt.size(); ++i) list += (i ? "," : "") + std::to_string(prompt[i]);
  const std::string base = "draft --model " + golden_dir(Golden::kSeed11Aux) + " --tokens " + list;
  const RunResult r = run_troupe(base);
  ASSERT_EQ(r.status, 0) << r.out;
  const auto got = nlohmann::json::parse(r.out);

  const TargetRun t = run_target(prompt);
  const int32_t bonus =
      kernels::argmax(t.logits.data(), golden_model(Golden::kSeed11Aux).config.vocab_size);
  const DraftRun model_level = run_draft(*t.state.feature_ring, bonus);
  EXPECT_EQ(got["anchor"].get<int64_t>(), dg.anchor);
  EXPECT_EQ(got["bonus"].get<int32_t>(), bonus);
  EXPECT_EQ(got["drafts"].get<std::vector<int32_t>>(), model_level.proposal.tokens);
  EXPECT_EQ(got["confidence"].get<std::vector<float>>(), model_level.proposal.confidence);

  EXPECT_EQ(got["bonus"], dg.j["bonus"]);
  EXPECT_EQ(got["drafts"], dg.j["drafts"]);
  const auto conf = got["confidence"].get<std::vector<double>>();
  const auto want = dg.j["confidence"].get<std::vector<double>>();
  ASSERT_EQ(conf.size(), want.size());
  for (size_t i = 0; i < conf.size(); ++i) EXPECT_NEAR(conf[i], want[i], 1e-3) << "conf_" << i;

  // --num-speculative cuts the drafts; values outside [0, Bs-1] are refused.
  const RunResult one = run_troupe(base + " --num-speculative 1");
  ASSERT_EQ(one.status, 0) << one.out;
  const auto j1 = nlohmann::json::parse(one.out);
  EXPECT_EQ(j1["drafts"], nlohmann::json(std::vector<int32_t>{model_level.proposal.tokens[0]}));
  EXPECT_EQ(j1["confidence"].size(), 2u);
  expect_usage_errors({{base + " --num-speculative 5", "--num-speculative"},
                       {base + " --num-speculative -1", "--num-speculative"},
                       {"draft --model " + golden_dir(Golden::kSeed11Aux) + " --tokens 1,x", "not a token id"},
                       {"draft --model " + golden_dir(Golden::kSeed11Aux), "--tokens"}});
}

}  // namespace
}  // namespace troupe::testing
