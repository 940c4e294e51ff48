// DEP-R (R ranks, attention data-parallel, MoE expert-parallel, lockstep) against DEP-1:
// the same logits and tokens bit for bit, on the golden model, plain and speculative (the
// DSpark draft's MoE expert-parallel too). Also the default expert placement for R that
// does not divide the expert count, and a failing rank.
#include "runtime/dep/dep_engine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <map>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kernels/check.h"
#include "kernels/q8_row_groups.h"
#include "model/row_groups_copy.h"
#include "runtime/dep/rank_choice.h"
#include "runtime/eplb/static_placement.h"
#include "runtime/speculative/dspark_drafter.h"
#include "runtime/speculative/oracle_drafter.h"
#include "support/dep_rank_forward.h"
#include "support/golden.h"
#include "runtime/golden_engine_config.h"

namespace troupe::runtime {
namespace {

using testing::golden_draft;
using testing::golden_model;
using testing::random_tokens;
using Ids = std::vector<int32_t>;

TEST(DepPlacement, PadsSlotsSoAnyRankCountWorks) {
  for (int64_t ranks : {1, 2, 3, 4, 5, 7}) {
    for (int64_t redundant : {0, 1, 6}) {
      const auto p = eplb::ep_default_placement(4, 32, ranks, redundant);
      SCOPED_TRACE("ranks " + std::to_string(ranks) + " redundant " + std::to_string(redundant));
      EXPECT_NO_THROW(eplb::check_placement(p));
      EXPECT_EQ(p.num_physical % ranks, 0);
      EXPECT_GE(p.num_physical, 32 + redundant);
      EXPECT_LT(p.num_physical, 32 + redundant + ranks);
      for (int64_t e = 0; e < 32; ++e) EXPECT_GE(p.replica_count(0, e), 1);
    }
  }
  const auto p3 = eplb::ep_default_placement(1, 32, 3, 0);
  EXPECT_EQ(p3.num_physical, 33);           // 11 slots per rank
  EXPECT_EQ(p3.logical_of(0, 32), 0);       // the pad slot: a copy of expert 0
  EXPECT_EQ(p3.replica_count(0, 0), 2);
}

TEST(RankChoice, TheLeastLoadedUnlessANearTieHoldsALongerPrefix) {
  // Fewest requests wins when no rank holds a prefix; ties go to the lower rank.
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{3, 0}, {1, 0}, {2, 0}}, 1), 1);
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{2, 0}, {2, 0}}, 1), 0);
  // Within the margin, the longer cached prefix wins over the lighter load...
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{1, 0}, {2, 64}}, 1), 1);
  // ...but not past it.
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{1, 0}, {3, 64}}, 1), 0);
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{1, 0}, {2, 64}}, 0), 0);
  // Equal prefixes: the lighter of the near-ties.
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{2, 32}, {1, 32}, {1, 16}}, 1), 1);
  EXPECT_THROW(choose_rank(std::vector<RankLoad>{}, 1), Error);
}

TEST(RankChoice, TheRankHoldingANamedSavedPrefixWinsWhateverTheLoads) {
  // KV save by name: only that rank can serve a restore or delete (or replace the save).
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{0, 64}, {9, 0, true}, {0, 0}}, 1), 1);
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{0, 0}, {0, 0}, {5, 0, true}}, 0), 2);
  // No rank holds it (an unknown name): the usual choice, whose scheduler answers 404.
  EXPECT_EQ(choose_rank(std::vector<RankLoad>{{2, 0}, {1, 0}}, 0), 1);
}

// Sequences spread over R ranks, one forward pass each on its own thread
// (support/dep_rank_forward.h); returns each sequence's logits (every position).
std::vector<std::vector<float>> dep_forward(const std::vector<Ids>& prompts, int ranks,
                                            bool own_copies,
                                            const model::Forward* forward = nullptr,
                                            const testing::GoldenModel* model = nullptr) {
  const auto& g = model != nullptr ? *model : golden_model();
  InProcessGroup group(ranks);
  auto placement = std::make_shared<const eplb::ExpertPlacement>(eplb::ep_default_placement(
      g.config.num_hidden_layers, g.config.n_routed_experts, ranks, 0));
  std::vector<std::vector<float>> logits(prompts.size());
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      auto mine =
          testing::dep_rank_forward(g, group.communicator(r), placement, prompts, own_copies, forward);
      std::lock_guard lock(mu);
      for (auto& [i, l] : mine) logits[i] = std::move(l);
    });
  for (auto& t : threads) t.join();
  return logits;
}

// Every prompt's logits (all positions) from one forward call on one rank.
std::vector<std::vector<float>> one_rank_logits(const model::Forward& f, const model::ModelConfig& c,
                                                const std::vector<Ids>& prompts) {
  std::vector<model::SequenceState> states;
  for (size_t i = 0; i < prompts.size(); ++i) states.push_back(model::SequenceState::empty(c));
  std::vector<model::SequenceInput> in;
  for (size_t i = 0; i < prompts.size(); ++i) in.push_back({&states[i], prompts[i], true});
  return f.run(in);
}

TEST(DepForward, LogitsEqualOneRankBitForBit) {
  const auto& g = golden_model();
  const std::vector<Ids> prompts = {random_tokens(37, 1), random_tokens(5, 2), random_tokens(70, 3)};
  const auto want = one_rank_logits(*g.forward, g.config, prompts);
  for (int ranks : {1, 2, 3, 4})  // 4: one rank has no sequence and joins idle
    for (bool own : {false, true}) {
      const auto got = dep_forward(prompts, ranks, own);
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_TRUE(got[i] == want[i]) << "R = " << ranks << ", sequence " << i << ", copies " << own;
    }
}

// Int8 experts (ForwardOptions): a rank's expert rows come out the same whatever other
// rows share its GEMM (q8_0 per row, each output's blocks summed in one order), so DEP-R
// still equals one rank bit for bit; an idle rank computes others' rows at Int8 too.
TEST(DepForward, Int8ExpertsEqualOneRankBitForBit) {
  const auto& g = golden_model();
  model::ForwardOptions o;
  o.expert_precision = kernels::GemmPrecision::Int8;
  const model::Forward int8(g.config, g.weights, nullptr, o);
  const std::vector<Ids> prompts = {random_tokens(29, 4), random_tokens(3, 5), random_tokens(41, 6)};
  const auto want = one_rank_logits(int8, g.config, prompts);
  const auto f32 = dep_forward(prompts, 1, false);
  EXPECT_FALSE(f32[0] == want[0]) << "the Int8 option did not change the logits";
  for (int ranks : {2, 4})
    for (bool own : {false, true}) {
      const auto got = dep_forward(prompts, ranks, own, &int8);
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_TRUE(got[i] == want[i]) << "R = " << ranks << ", sequence " << i << ", copies " << own;
    }
}

// The same with the experts' row groups (model::add_expert_row_groups, as the loader
// packs them under int8 experts): every expert GEMM is then int8 on the row-group
// kernels, prefill included, and the owners' copies carry the groups, so DEP-R still
// equals one rank bit for bit.
TEST(DepForward, Int8ExpertsWithRowGroupsEqualOneRankBitForBit) {
  if (!kernels::q8_row_groups_used()) GTEST_SKIP() << "this CPU path's int8 GEMM reads no row groups";
  const auto& g = golden_model();
  testing::GoldenModel grouped{g.config, model::Checkpoint::open(testing::golden_dir(testing::Golden::kSeed7)), {},
                               nullptr};
  grouped.weights = model::bind_weights(grouped.ckpt, grouped.config);
  ASSERT_GT(model::add_expert_row_groups(grouped.weights), 0);
  model::ForwardOptions o;
  o.expert_precision = kernels::GemmPrecision::Int8;
  grouped.forward = std::make_unique<model::Forward>(grouped.config, grouped.weights, nullptr, o);
  const std::vector<Ids> prompts = {random_tokens(29, 4), random_tokens(3, 5), random_tokens(41, 6)};
  const auto want = one_rank_logits(*grouped.forward, g.config, prompts);
  for (int ranks : {2, 3})
    for (bool own : {false, true}) {
      const auto got = dep_forward(prompts, ranks, own, grouped.forward.get(), &grouped);
      for (size_t i = 0; i < prompts.size(); ++i)
        EXPECT_TRUE(got[i] == want[i]) << "R = " << ranks << ", sequence " << i << ", copies " << own;
    }
}

struct Outcome {
  std::map<RequestId, Ids> tokens;
  std::map<RequestId, std::vector<float>> logprobs;  // the sampled tokens' and the top ones'
  std::map<RequestId, std::string> reasons;
};

template <class E>
void collect(E& e, Outcome& r, RequestId abort_id, int64_t abort_step) {
  for (int64_t s = 0; e.has_unfinished() && s < 2000; ++s) {
    if (s == abort_step) e.abort(abort_id);
    for (const RequestOutput& o : e.step()) {
      r.tokens[o.id].insert(r.tokens[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
      for (const SampleLogprobs& lp : o.new_logprobs) {
        r.logprobs[o.id].push_back(lp.sampled.logprob);
        for (const Logprob& t : lp.top) r.logprobs[o.id].push_back(t.logprob);
      }
      if (o.finished()) r.reasons[o.id] = std::string(o.finish_reason());
    }
  }
  EXPECT_FALSE(e.has_unfinished());
}

// One request of n tokens on both engines (a DEP-R and a one-rank one): the same tokens.
template <class A, class B>
void expect_same_tokens(A& a, B& b, RequestId id, const Ids& prompt, int64_t n) {
  a.add_request(id, prompt, greedy(n));
  b.add_request(id, prompt, greedy(n));
  Outcome got, want;
  collect(a, got, -1, -1);
  collect(b, want, -1, -1);
  EXPECT_EQ(got.tokens, want.tokens);
}

// The workload's prompts; request i has prompts[i].
std::vector<Ids> workload_prompts() {
  const Ids shared = random_tokens(48, 9);
  std::vector<Ids> prompts = {random_tokens(20, 4), random_tokens(90, 5), random_tokens(7, 6), shared};
  Ids with_prefix = shared;
  for (int32_t t : random_tokens(11, 7)) with_prefix.push_back(t);
  prompts.push_back(with_prefix);
  return prompts;
}
constexpr RequestId kSiblingOf2 = 100;  // request 2's second choice (n = 2)

// Mixed: different lengths, chunked prefill (small token budget), a shared prefix (hits
// once its first request has committed blocks), n = 2, logprobs, an abort.
template <class E>
Outcome run_workload(E& e, RequestId abort_id = -1, int64_t abort_step = -1) {
  RequestId id = 0;
  for (const Ids& p : workload_prompts()) {
    RequestParams params = greedy(6 + id % 3);
    params.num_logprobs = 2;
    std::vector<Sibling> sibs;
    if (id == 2) sibs.push_back({kSiblingOf2, params});
    e.add_request(id++, p, params, std::move(sibs));
  }
  Outcome r;
  collect(e, r, abort_id, abort_step);
  return r;
}

// R ranks, sync or async scheduling; the one-rank engine's outcome on the same workload.
class DepEngineRanks : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    ranks = std::get<0>(GetParam());
    c = golden_engine_config(int64_t(64) << 20, std::get<1>(GetParam()), 24, 4);
    Engine one(*golden_model().forward, nullptr, c);
    want = run_workload(one);
    DepConfig d;
    d.ranks = ranks;
    dep = std::make_unique<DepEngine>(*golden_model().forward, nullptr, c, d);
  }
  int ranks = 1;
  EngineConfig c;
  Outcome want;
  std::unique_ptr<DepEngine> dep;
};

TEST_P(DepEngineRanks, TokensAndLogprobsEqualTheOneRankEngine) {
  const Outcome got = run_workload(*dep);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);
  EXPECT_EQ(got.reasons, want.reasons);
  for (int r = 0; r < ranks; ++r) EXPECT_EQ(dep->kv_cache(r).num_used_blocks(), 0) << "rank " << r;
}

TEST_P(DepEngineRanks, AnAbortedRequestStopsEarlyAndTheOthersAreUnchanged) {
  const Outcome got = run_workload(*dep, /*abort_id=*/1, /*abort_step=*/3);
  EXPECT_EQ(got.reasons.at(1), "abort");
  const Ids& cut = got.tokens.count(1) ? got.tokens.at(1) : Ids{};
  ASSERT_LT(cut.size(), want.tokens.at(1).size());
  EXPECT_TRUE(std::equal(cut.begin(), cut.end(), want.tokens.at(1).begin()));
  for (const auto& [id, tokens] : want.tokens)
    if (id != 1) {
      EXPECT_EQ(got.tokens.at(id), tokens) << "request " << id;
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, DepEngineRanks,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()));

// Speculative decoding on DEP-R (k = 2): each rank drafts and verifies its own requests.
// The DSpark draft's MoE runs expert-parallel on its own placement (R = 3: 8 experts
// padded to 9 slots), every rank joining its exchanges whenever some rank drafts; the
// TEST-ONLY oracle's drafts (the plain run's tokens, kept with p = 0.6) are local. Tokens
// and logprobs equal the one-rank speculative Engine's bit for bit, the tokens the plain
// Engine's.
class DepEngineSpeculative : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    ranks = std::get<0>(GetParam());
    c = golden_engine_config(int64_t(64) << 20, std::get<1>(GetParam()), 24, 4);
    // Every prefix hit replays exactly, so it equals a cold run whichever rank serves it
    // (a window snapshot continues its writer's state, which under bounded replay differs
    // from a cold run: docs/kv-cache.md; the ranks' schedules differ from one rank's).
    c.enable_prefix_snapshots = false;
    Engine one(*golden_model().forward, nullptr, c);
    plain = run_workload(one);
    c.speculative.num_speculative_tokens = 2;
  }
  // The workload on the one-rank Engine and on DEP-R with `drafter`: the same outcome,
  // the plain tokens. Returns the drafts and accepted tokens of every rank together (not
  // the one rank's: the ranks' schedules differ, and with them where drafting stops).
  std::pair<int64_t, int64_t> expect_one_rank_engine(const Drafter& drafter, DepConfig d = {}) {
    Engine one(*golden_draft().forward, nullptr, c, &drafter);
    const Outcome want = run_workload(one);
    d.ranks = ranks;
    DepEngine dep(*golden_draft().forward, nullptr, c, d, &drafter);
    const Outcome got = run_workload(dep);
    EXPECT_EQ(got.tokens, want.tokens);
    EXPECT_EQ(got.logprobs, want.logprobs);
    EXPECT_EQ(got.reasons, want.reasons);
    EXPECT_EQ(got.tokens, plain.tokens);
    int64_t drafts = 0, accepted = 0;
    for (int r = 0; r < ranks; ++r) {
      EXPECT_EQ(dep.kv_cache(r).num_used_blocks(), 0) << "rank " << r;
      drafts += dep.figures(r).spec_num_drafts;
      accepted += dep.figures(r).spec_num_accepted_tokens;
    }
    EXPECT_EQ(dep.draft_placement() != nullptr, !drafter.moe_layers().empty());
    if (d.eplb.enabled && dep.draft_placement() != nullptr) {
      EXPECT_GE(dep.draft_rebalances().size(), 1u) << "no draft placement went live";
      EXPECT_GE(dep.rebalances().size(), 1u) << "no target placement went live";
    }
    return {drafts, accepted};
  }
  // The TEST-ONLY oracle over the plain run: each request's prompt and continuation.
  void follow_plain(OracleDrafter& oracle) const {
    const std::vector<Ids> prompts = workload_prompts();
    for (const auto& [id, out] : plain.tokens) {
      Ids seq = prompts.at(id == kSiblingOf2 ? 2 : id);
      seq.insert(seq.end(), out.begin(), out.end());
      oracle.set_sequence(id, seq);
    }
  }
  int ranks = 1;
  EngineConfig c;
  Outcome plain;
};

TEST_P(DepEngineSpeculative, DsparkDraftExpertParallelEqualsTheOneRankEngine) {
  c.speculative.method = "dspark";
  const DsparkDrafter drafter(*golden_draft().draft);
  EXPECT_GT(expect_one_rank_engine(drafter).first, 0);
}

TEST_P(DepEngineSpeculative, OracleDraftAcceptsAndRollsBackAsOnOneRank) {
  c.speculative.method = "oracle";
  OracleDrafter oracle(0.6, golden_model().config.vocab_size, 31);
  follow_plain(oracle);
  const auto [drafts, accepted] = expect_one_rank_engine(oracle);
  EXPECT_GT(accepted, 0);           // accepted runs
  EXPECT_LT(accepted, 2 * drafts);  // and rolled-back tails
}

// An adaptive draft length on DEP-R is the group's: every rank's cost table learns the
// same steps (the lockstep step's time, every rank's drafts), so each rank's table ends
// the same, cell for cell, and the ranks chose the same k each step. Each rank alone would
// time its own k against the others' and learn its own requests' acceptance only.
TEST_P(DepEngineSpeculative, AnAdaptiveDraftLengthIsTheGroupsOnEveryRank) {
  c.speculative.method = "oracle";
  c.speculative.num_speculative_tokens = 3;
  c.speculative.adaptive = true;
  OracleDrafter oracle(0.6, golden_model().config.vocab_size, 31);
  follow_plain(oracle);
  DepConfig d;
  d.ranks = ranks;
  DepEngine dep(*golden_draft().forward, nullptr, c, d, &oracle);
  const Outcome got = run_workload(dep);
  EXPECT_EQ(got.tokens, plain.tokens);
  const DraftLengthChooser& first = *dep.draft_length(0);
  const std::vector<StepTimeSample> cells = first.table().cells();
  EXPECT_FALSE(cells.empty()) << "no step was timed";
  EXPECT_NE(first.acceptance().rate(1), 0.5) << "no draft was learned (0.5 is the prior)";
  for (int r = 1; r < ranks; ++r) {
    const DraftLengthChooser& other = *dep.draft_length(r);
    const std::vector<StepTimeSample> theirs = other.table().cells();
    ASSERT_EQ(theirs.size(), cells.size()) << "rank " << r;
    for (size_t i = 0; i < cells.size(); ++i) {
      EXPECT_EQ(theirs[i].batch, cells[i].batch) << "rank " << r;
      EXPECT_EQ(theirs[i].k, cells[i].k) << "rank " << r;
      EXPECT_EQ(theirs[i].seconds, cells[i].seconds) << "rank " << r;
    }
    for (int64_t j = 1; j <= 3; ++j)
      EXPECT_EQ(other.acceptance().rate(j), first.acceptance().rate(j)) << "rank " << r << " position " << j;
  }
}

// Live EPLB of both MoEs every 3 steps from a 4-step window (2 redundant slots): the
// draft's placements switch apart from the target's, every rank at one step boundary.
TEST_P(DepEngineSpeculative, ALiveDraftRebalanceLeavesTheTokensUnchanged) {
  c.speculative.method = "dspark";
  const DsparkDrafter drafter(*golden_draft().draft);
  DepConfig d;
  d.num_redundant_experts = 2;
  d.eplb.enabled = true;
  d.eplb.window_size = 4;
  d.eplb.step_interval = 3;
  expect_one_rank_engine(drafter, d);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DepEngineSpeculative,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Bool()));

// One request on DEP-3: two ranks draft nothing and join every draft exchange idle.
TEST(DepEngine, IdleRanksJoinTheDraftExchanges) {
  EngineConfig c = golden_engine_config(int64_t(64) << 20, true, 64, 4);
  c.speculative.method = "dspark";
  c.speculative.num_speculative_tokens = 3;
  const DsparkDrafter drafter(*golden_draft().draft);
  DepConfig d;
  d.ranks = 3;
  DepEngine dep(*golden_draft().forward, nullptr, c, d, &drafter);
  Engine one(*golden_model().forward, nullptr, golden_engine_config(int64_t(64) << 20, true, 64, 4));
  expect_same_tokens(dep, one, 1, random_tokens(30, 12), 10);
  int64_t drafts = 0, dummies = 0;
  for (int r = 0; r < 3; ++r) {
    drafts += dep.figures(r).spec_num_drafts;
    dummies += dep.dummy_steps(r);
  }
  EXPECT_GT(drafts, 0);
  EXPECT_GE(dummies, 2 * drafts);  // the two idle ranks joined every drafting step
}

TEST(DepEngine, IdleRanksJoinTheExchangeAndTheBusyOnesFinish) {
  const auto& g = golden_model();
  const EngineConfig c = golden_engine_config(int64_t(64) << 20, true, 64, 4);
  DepConfig d;
  d.ranks = 4;
  DepEngine dep(*g.forward, nullptr, c, d);
  Engine one(*g.forward, nullptr, c);
  expect_same_tokens(dep, one, 1, random_tokens(30, 12), 8);  // one request: three ranks idle
}

// Rank 1's step 2 throws as it starts (an injected fault) while rank 0 runs into the step's
// exchanges (with a drafter: the draft's first); both ranks' requests fail with the
// fault's message, no rank hangs, and the group serves on.
void expect_a_throwing_rank_fails_the_step(const model::Forward& f, const EngineConfig& c,
                                           const Drafter* drafter) {
  DepConfig dep_config;
  dep_config.ranks = 2;
  dep_config.faults = std::make_shared<const FaultPlan>(FaultPlan::parse("step-throw@2"));
  dep_config.fault_rank = 1;
  DepEngine dep(f, nullptr, c, dep_config, drafter);
  dep.add_request(1, random_tokens(30, 13), greedy(6));
  dep.add_request(2, random_tokens(25, 14), greedy(6));
  std::map<RequestId, RequestOutput> last;
  for (int s = 0; dep.has_unfinished() && s < 100; ++s)
    for (RequestOutput& o : dep.step())
      if (o.finished()) last[o.id] = o;
  ASSERT_EQ(last.size(), 2u);
  for (auto& [id, o] : last) {
    EXPECT_EQ(o.status, RequestStatus::FinishedError) << id;
    EXPECT_EQ(o.error_cause, ErrorCause::StepFailed) << id;
    EXPECT_NE(o.error.find("injected fault"), std::string::npos) << o.error;  // on both ranks
  }
  // The group serves on: a new request gets the one-rank engine's tokens.
  Engine one(f, nullptr, c, drafter);
  expect_same_tokens(dep, one, 3, random_tokens(18, 15), 5);
  for (int r = 0; r < 2; ++r) EXPECT_EQ(dep.kv_cache(r).num_used_blocks(), 0);
}

TEST(DepEngine, ARankWhoseStepThrowsFailsTheStepEverywhereWithoutHanging) {
  expect_a_throwing_rank_fails_the_step(*golden_model().forward,
                                        golden_engine_config(int64_t(64) << 20, false, 64, 4), nullptr);
}

TEST(DepEngine, ARankWhoseStepThrowsBeforeTheDraftExchangesFailsTheStepEverywhere) {
  EngineConfig c = golden_engine_config(int64_t(64) << 20, false, 64, 4);
  c.speculative.method = "dspark";
  c.speculative.num_speculative_tokens = 2;
  const DsparkDrafter drafter(*golden_draft().draft);
  expect_a_throwing_rank_fails_the_step(*golden_draft().forward, c, &drafter);
}

}  // namespace
}  // namespace troupe::runtime

namespace troupe::runtime {
namespace {

TEST(EplbPlanner, PlansEveryIntervalFromTheWindowAndRaisesBalanceOnASkew) {
  const int64_t L = 2, E = 8, ranks = 2;
  const auto start = eplb::ep_default_placement(L, E, ranks, /*redundant=*/2);  // 10 slots
  eplb::EplbConfig cfg;
  cfg.enabled = true;
  cfg.window_size = 3;
  cfg.step_interval = 4;
  eplb::EplbPlanner planner(cfg, L, E, start.num_physical, ranks);
  std::vector<int64_t> skew(L * E, 1);
  skew[0] = skew[1] = skew[2] = 50;  // experts 0-2 (all on rank 0 at the start) are hot
  skew[E + 0] = 40;
  std::optional<eplb::Rebalance> plan;
  for (int step = 1; step <= 4; ++step) {
    plan = planner.record(skew, start);
    if (step < 4) {
      EXPECT_FALSE(plan.has_value()) << "step " << step;
    }
  }
  ASSERT_TRUE(plan.has_value());
  EXPECT_NO_THROW(eplb::check_placement(plan->placement));
  EXPECT_EQ(plan->placement.num_physical, start.num_physical);  // same slots, same ranks
  // Layer 0's hot expert 2 sits on rank 0 alone: the plan must gain there. Layer 1's hot
  // expert 0 is already split over both ranks: no layer may lose.
  EXPECT_GT(plan->balance_after[0], plan->balance_before[0]);
  for (int64_t l = 0; l < L; ++l) {
    EXPECT_GE(plan->balance_after[l], plan->balance_before[l]) << "layer " << l;
    EXPECT_LE(plan->balance_after[l], 1.0);
  }
  // The window holds the last 3 steps only.
  EXPECT_EQ(planner.window_loads()[0], 150.0f);
}

TEST(DepEngine, ALiveRebalanceLeavesTheTokensUnchanged) {
  const auto& g = golden_model();
  const EngineConfig c = golden_engine_config(int64_t(64) << 20, true, 24, 4);
  Engine one(*g.forward, nullptr, c);
  const Outcome want = run_workload(one);
  for (int ranks : {2, 3}) {
    DepConfig d;
    d.ranks = ranks;
    d.num_redundant_experts = 2;
    d.eplb.enabled = true;
    d.eplb.window_size = 4;
    d.eplb.step_interval = 3;  // several switches in the middle of the workload
    DepEngine dep(*g.forward, nullptr, c, d);
    const eplb::ExpertPlacement initial = dep.placement();
    const Outcome got = run_workload(dep);
    EXPECT_GE(dep.rebalances().size(), 2u) << "R = " << ranks;
    EXPECT_NE(dep.placement().phy2log, initial.phy2log) << "R = " << ranks;
    EXPECT_EQ(got.tokens, want.tokens) << "R = " << ranks;
    EXPECT_EQ(got.logprobs, want.logprobs) << "R = " << ranks;
  }
}

}  // namespace
}  // namespace troupe::runtime

namespace troupe::runtime {
namespace {

Bytes bytes_of(int v) {
  Bytes b(sizeof v);
  std::memcpy(b.data(), &v, sizeof v);
  return b;
}
int int_of(const Bytes& b) {
  int v = 0;
  std::memcpy(&v, b.data(), sizeof v);
  return v;
}

// R threads make `exchanges` steps of one all_to_all each (rank r sends 1000·k + 100·r + d
// to rank d); rank `failer` aborts step `fail_at`, before its exchange or after it.
// Returns per rank how many exchanges threw, and checks every exchange that completed
// delivered the right values.
std::vector<int> run_exchanges(int ranks, int exchanges, int failer, int fail_at,
                               bool after = false) {
  InProcessGroup group(ranks);
  std::vector<int> threw(ranks, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r)
    threads.emplace_back([&, r] {
      Communicator& c = group.communicator(r);
      for (int k = 0; k < exchanges; ++k) {
        c.begin_step();
        if (r == failer && k == fail_at && !after) c.abort("injected");
        std::vector<Bytes> send;
        for (int d = 0; d < ranks; ++d) send.push_back(bytes_of(1000 * k + 100 * r + d));
        try {
          const std::vector<Bytes> got = c.all_to_all(std::move(send));
          for (int s = 0; s < ranks; ++s) EXPECT_EQ(int_of(got[s]), 1000 * k + 100 * s + r);
          if (r == failer && k == fail_at && after) c.abort("injected");
        } catch (const std::exception& e) {
          threw[r] += 1;
          EXPECT_NE(std::string(e.what()).find("injected"), std::string::npos);
        }
      }
    });
  for (auto& t : threads) t.join();
  return threw;
}

TEST(InProcessGroup, AnAbortFailsTheRestOfTheStepForEveryRankAndTheNextStepsWork) {
  for (int ranks : {1, 2, 3, 5})
    for (int fail_at : {0, 1, 3}) {
      const auto threw = run_exchanges(ranks, 6, ranks - 1, fail_at);
      for (int r = 0; r < ranks; ++r)
        EXPECT_EQ(threw[r], 1) << "R = " << ranks << ", rank " << r << ", fail at " << fail_at;
    }
  // Failing after the step's exchanges: nobody waits for the failer, nothing throws.
  for (int ranks : {2, 3})
    for (int t : run_exchanges(ranks, 6, 0, 2, /*after=*/true)) EXPECT_EQ(t, 0);
  // No abort: every exchange completes.
  for (int t : run_exchanges(4, 20, -1, -1)) EXPECT_EQ(t, 0);
}

// A rank that is gone for good (its actor died mid-step): close() releases the ranks
// already waiting in an exchange and fails every later exchange, in any step.
TEST(InProcessGroup, CloseReleasesTheWaitingRanksAndFailsEveryLaterExchange) {
  InProcessGroup group(3);
  std::vector<std::string> why(2);
  std::vector<std::thread> waiting;
  for (int r = 0; r < 2; ++r)  // rank 2 never arrives
    waiting.emplace_back([&, r] {
      Communicator& c = group.communicator(r);
      c.begin_step();
      try {
        c.all_to_all(std::vector<Bytes>(3));
      } catch (const std::exception& e) {
        why[r] = e.what();
      }
    });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let both block (not required)
  group.close("rank 2 died");
  for (auto& t : waiting) t.join();
  for (const std::string& w : why) EXPECT_NE(w.find("rank 2 died"), std::string::npos) << w;
  Communicator& c = group.communicator(0);
  c.begin_step();
  EXPECT_THROW(c.all_to_all(std::vector<Bytes>(3)), Error);
}

}  // namespace
}  // namespace troupe::runtime
