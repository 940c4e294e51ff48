// Speculative decoding through the engine actors (the path `troupe serve` takes): the rank
// actor drafts with the instance's drafter and verifies every request's drafts in one
// batched forward. Over a mixed workload (different prompt and output lengths, a shared
// prefix, n = 2, an abort, logprobs) every request's greedy tokens equal the plain
// (non-speculative) Engine's, with the TEST-ONLY oracle draft at acceptance 0.6 (accepted
// runs and rolled-back tails) and the real DSpark draft (random weights: it accepts next to
// nothing), sync and async scheduling, one rank and DEP-2 (expert parallel, lockstep).
// No sleeps: receives with timeouts.
#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <numeric>
#include <tuple>

#include "actors/engine_actors.h"
#include "actors/engine_test_support.h"
#include "runtime/golden_engine_config.h"
#include "runtime/speculative/dspark_drafter.h"
#include "runtime/speculative/oracle_drafter.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using runtime::RequestId;
using testing::golden_draft;
using testing::golden_model;
using testing::random_tokens;
using Tokens = std::vector<int32_t>;

constexpr RequestId kAborted = 1;   // aborted after its first streamed token
constexpr RequestId kSibling = 50;  // request 3's second choice

struct Work {
  RequestId id;
  Tokens prompt;
  int64_t max_tokens;
  bool sibling = false;  // n = 2: kSibling shares the prompt
};

std::vector<Work> workload() {
  const Tokens shared = random_tokens(40, 71);
  Tokens follow = shared;
  for (int32_t t : random_tokens(13, 72)) follow.push_back(t);
  return {{0, random_tokens(5, 73), 13},
          {kAborted, random_tokens(29, 74), 300},
          {2, shared, 9},
          {3, random_tokens(61, 75), 11, true},
          {4, follow, 15},
          {5, random_tokens(2, 76), 7}};
}

runtime::RequestParams params_of(const Work& w) {
  runtime::RequestParams p = runtime::greedy(w.max_tokens);
  if (w.id == 2) p.num_logprobs = 2;
  return p;
}

// Chunked prefill (24 tokens a step), four running per rank, snapshots off (every prefix
// hit replays exactly, so a hit equals a cold run whichever rank serves it).
runtime::EngineConfig config(bool async, int64_t k, const std::string& method) {
  runtime::EngineConfig c = runtime::golden_engine_config(int64_t(32) << 20, async, 24, 4);
  c.enable_prefix_snapshots = false;
  if (k > 0) {
    c.speculative.method = method;
    c.speculative.num_speculative_tokens = k;
  }
  return c;
}

struct Streams {
  std::map<RequestId, Tokens> tokens;
  std::map<RequestId, std::vector<float>> logprobs;  // sampled and top, in order
  std::map<RequestId, std::string> finish;
};

void append(Streams& s, const runtime::RequestOutput& o) {
  s.tokens[o.id].insert(s.tokens[o.id].end(), o.new_tokens.begin(), o.new_tokens.end());
  for (const runtime::SampleLogprobs& lp : o.new_logprobs) {
    s.logprobs[o.id].push_back(lp.sampled.logprob);
    for (const runtime::Logprob& top : lp.top) s.logprobs[o.id].push_back(top.logprob);
  }
  if (o.finished()) s.finish[o.id] = std::string(o.finish_reason());
}

// The work run to its end on a one-rank Engine (no abort).
Streams run_engine(runtime::Engine& e, const std::vector<Work>& work) {
  for (const Work& w : work) {
    std::vector<runtime::Sibling> sibs;
    if (w.sibling) sibs.push_back({kSibling, params_of(w)});
    e.add_request(w.id, w.prompt, params_of(w), sibs);
  }
  Streams s;
  while (e.has_unfinished())
    for (const runtime::RequestOutput& o : e.step()) append(s, o);
  return s;
}

// The plain Engine's greedy run of the workload (no abort: its tokens are the reference).
const Streams& plain(bool async) {
  static std::map<bool, Streams> runs;
  if (runs.count(async)) return runs.at(async);
  runtime::Engine e(*golden_model().forward, nullptr, config(async, 0, ""));
  return runs[async] = run_engine(e, workload());
}

// TEST-ONLY oracle: the plain run's continuation, each token kept with probability p.
runtime::OracleDrafter oracle(double p, bool async) {
  runtime::OracleDrafter o(p, golden_model().config.vocab_size, 23);
  for (const Work& w : workload())
    for (RequestId id : {w.id, w.sibling ? kSibling : RequestId(-1)}) {
      if (id < 0) continue;
      Tokens seq = w.prompt;
      const Tokens& out = plain(async).tokens.at(id);
      seq.insert(seq.end(), out.begin(), out.end());
      o.set_sequence(id, seq);
    }
  return o;
}

// Spawns an instance of `ranks` ranks (expert parallel when > 1) with the drafter, sends
// the work at once, aborts kAborted after its first token, and collects the streams.
// o: further options (live EPLB).
Streams serve(const runtime::EngineConfig& c, const runtime::Drafter* drafter, int ranks,
              runtime::EngineFigures& figures, const std::vector<Work>& work = workload(),
              EngineOptions o = {}) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  o.drafter = drafter;
  o.data_parallel_size = ranks;
  o.expert_parallel = ranks > 1;
  const model::Forward& forward =
      drafter && drafter->needs_features() ? *golden_draft().forward : *golden_model().forward;
  scheduler_actor engine = spawn_engine(sys, forward, nullptr, c, o);
  caf::scoped_actor self{sys};
  size_t expected = 0;
  for (const Work& w : work) {
    GenerateRequest req{w.id, w.prompt, params_of(w), {}};
    if (w.sibling) req.siblings.push_back({kSibling, params_of(w)});
    expected += 1 + req.siblings.size();
    self->send(engine, generate_atom::value, std::move(req), caf::actor{self});
  }
  Streams s;
  bool abort_sent = false;
  while (s.finish.size() < expected) {
    bool got = false;
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          got = true;
          append(s, e.output);
          if (e.output.id != kAborted || abort_sent || e.output.finished()) return;
          abort_sent = true;
          self->send(engine, abort_atom::value, kAborted);
        },
        caf::after(std::chrono::seconds(60)) >> [] {});
    if (!got) {
      ADD_FAILURE() << "no token event within 60 s: " << s.finish.size() << " of " << expected;
      break;
    }
  }
  figures = engine_figures(sys, engine);
  caf::anon_send_exit(engine, caf::exit_reason::user_shutdown);
  return s;
}

// got's streams are want's (kAborted's a prefix of it), logprobs within `tolerance`.
void expect_streams(const Streams& got, const Streams& want, float tolerance) {
  for (const auto& [id, tokens] : want.tokens) {
    SCOPED_TRACE("request " + std::to_string(id));
    const Tokens& t = got.tokens.at(id);
    if (id == kAborted) {
      EXPECT_EQ(got.finish.at(id), "abort");
      ASSERT_LT(t.size(), tokens.size());
      EXPECT_TRUE(std::equal(t.begin(), t.end(), tokens.begin()));
      continue;
    }
    EXPECT_EQ(t, tokens);
    EXPECT_EQ(got.finish.at(id), "length");
  }
  for (const auto& [id, b] : want.logprobs) {
    const std::vector<float>& a = got.logprobs.at(id);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tolerance) << "logprob " << i;
  }
}

void expect_plain_tokens(const Streams& got, bool async) {
  expect_streams(got, plain(async), 1e-4f);
}

void expect_spec_counts(const runtime::EngineFigures& f, int64_t k) {
  EXPECT_GT(f.spec_num_drafts, 0);
  EXPECT_LE(f.spec_num_draft_tokens, k * f.spec_num_drafts);
  const auto& per = f.spec_accepted_per_pos;
  EXPECT_EQ(std::accumulate(per.begin(), per.end(), int64_t(0)), f.spec_num_accepted_tokens);
  EXPECT_EQ(f.used_blocks, 0);
  EXPECT_EQ(f.failed_steps, 0);
}

// Test names of (ranks, async scheduling): R2Async, ...
std::string ranks_and_scheduling(const ::testing::TestParamInfo<std::tuple<int, bool>>& info) {
  return "R" + std::to_string(std::get<0>(info.param)) +
         (std::get<1>(info.param) ? "Async" : "Sync");
}

// (ranks, async scheduling)
class SpeculativeActors : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(SpeculativeActors, OracleDraftStreamsThePlainGreedyTokens) {
  const auto [ranks, async] = GetParam();
  const runtime::OracleDrafter drafter = oracle(0.6, async);
  runtime::EngineFigures f;
  const Streams got = serve(config(async, 3, "oracle"), &drafter, ranks, f);
  expect_plain_tokens(got, async);
  expect_spec_counts(f, 3);
  EXPECT_GT(f.spec_num_accepted_tokens, 0);                        // accepted runs
  EXPECT_LT(f.spec_num_accepted_tokens, f.spec_num_draft_tokens);  // and rollbacks
  ASSERT_EQ(static_cast<int>(f.per_rank.size()), ranks == 1 ? 0 : ranks);
}

TEST_P(SpeculativeActors, DsparkDraftStreamsThePlainGreedyTokens) {
  const auto [ranks, async] = GetParam();
  const runtime::DsparkDrafter drafter(*golden_draft().draft);
  runtime::EngineFigures f;
  const Streams got = serve(config(async, 2, "dspark"), &drafter, ranks, f);
  expect_plain_tokens(got, async);
  expect_spec_counts(f, 2);
}

// The online cost table picks k per step from the rank's measured step times (so which k
// it picks depends on the machine); whatever it picks, the tokens are the plain ones.
TEST_P(SpeculativeActors, AdaptiveKStreamsThePlainGreedyTokens) {
  const auto [ranks, async] = GetParam();
  const runtime::OracleDrafter drafter = oracle(0.6, async);
  runtime::EngineConfig c = config(async, 3, "oracle");
  c.speculative.adaptive = true;
  runtime::EngineFigures f;
  const Streams got = serve(c, &drafter, ranks, f);
  expect_plain_tokens(got, async);
  // The calibration runs every k once before choosing; with R ranks the group agrees on
  // each (over the DP sync), so steps ran under more than one limit.
  int64_t limits = 0;
  for (int64_t n : f.spec_steps_by_k) limits += n > 0;
  EXPECT_GE(limits, 2);
  EXPECT_EQ(f.used_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SpeculativeActors,
                         ::testing::Combine(::testing::Values(1, 2), ::testing::Bool()),
                         ranks_and_scheduling);

// TEST-ONLY: the DSpark drafter, recording every request's drafts by anchor position and
// how they ran: one query at a time with every draft expert here, or a rank's batch with
// the draft's MoE expert-parallel (propose_batch). Ranks call it from their threads.
class RecordingDrafter final : public runtime::Drafter {
 public:
  using Key = std::pair<RequestId, int64_t>;  // (request, anchor)
  explicit RecordingDrafter(const model::DsparkDraft& d) : inner_(d) {}

  using Drafter::propose;
  void propose(const runtime::DraftQuery& q, Tokens& out) const override {
    const size_t at = out.size();
    inner_.propose(q, out);
    std::lock_guard lock(mu_);
    drafts_[{q.id, q.anchor}].assign(out.begin() + at, out.end());
    single_ += 1;
  }
  bool needs_features() const override { return true; }
  runtime::MoeLayers moe_layers() const override { return inner_.moe_layers(); }
  void propose_batch(std::span<const runtime::DraftQuery> qs, std::span<Tokens* const> out,
                     model::RoutedExperts& routed) const override {
    std::vector<size_t> at;
    for (const Tokens* o : out) at.push_back(o->size());
    inner_.propose_batch(qs, out, routed);
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < qs.size(); ++i)
      drafts_[{qs[i].id, qs[i].anchor}].assign(out[i]->begin() + at[i], out[i]->end());
    batches_ += 1;
  }

  std::map<Key, Tokens> drafts() const {
    std::lock_guard lock(mu_);
    return drafts_;
  }
  int64_t single() const {
    std::lock_guard lock(mu_);
    return single_;
  }
  int64_t batches() const {
    std::lock_guard lock(mu_);
    return batches_;
  }

 private:
  runtime::DsparkDrafter inner_;
  mutable std::mutex mu_;
  mutable std::map<Key, Tokens> drafts_;
  mutable int64_t single_ = 0, batches_ = 0;
};

// The one-rank speculative Engine's run of the work (no abort): the reference.
Streams speculative_engine(const runtime::EngineConfig& c, const runtime::Drafter& drafter,
                           const std::vector<Work>& work) {
  runtime::Engine e(*golden_draft().forward, nullptr, c, &drafter);
  return run_engine(e, work);
}

// DEP-R with the DSpark draft's MoE expert-parallel (every rank drafts its requests in one
// batch, the draft experts on the ranks of the draft's placement, R = 3 padded to 9 slots)
// against the one-rank speculative Engine (every draft expert local, one query at a
// time): tokens and logprobs bit for bit, and the same drafts at every anchor both ran.
// Returns the instance's figures.
runtime::EngineFigures expect_one_rank_engine(int ranks, bool async, const std::vector<Work>& work,
                                              EngineOptions o = {}) {
  const runtime::EngineConfig c = config(async, 2, "dspark");
  const RecordingDrafter one(*golden_draft().draft), dep(*golden_draft().draft);
  const Streams want = speculative_engine(c, one, work);
  runtime::EngineFigures f;
  const Streams got = serve(c, &dep, ranks, f, work, std::move(o));
  expect_streams(got, want, /*tolerance=*/0.0f);  // logprobs bit for bit
  expect_spec_counts(f, 2);
  EXPECT_EQ(dep.single(), 0) << "a rank drafted with the draft's MoE local";
  EXPECT_GT(dep.batches(), 0);
  EXPECT_GT(one.single(), 0);
  // Every anchor the Engine drafted at, the instance drafted at too, the same tokens (the
  // aborted request stopped early: its anchors before the abort).
  const auto ref = one.drafts(), drafted = dep.drafts();
  for (const auto& [key, tokens] : ref) {
    auto it = drafted.find(key);
    if (key.first == kAborted && it == drafted.end()) continue;
    EXPECT_NE(it, drafted.end()) << "request " << key.first << " anchor " << key.second;
    if (it != drafted.end()) {
      EXPECT_EQ(it->second, tokens) << "request " << key.first << " anchor " << key.second;
    }
  }
  return f;
}

// (ranks, async scheduling)
class SpeculativeDraftEp : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(SpeculativeDraftEp, TokensLogprobsAndDraftsEqualTheOneRankEngine) {
  const auto [ranks, async] = GetParam();
  expect_one_rank_engine(ranks, async, workload());
}

// One request: the other ranks draft nothing and join each draft exchange with zero rows.
TEST_P(SpeculativeDraftEp, IdleRanksJoinTheDraftExchanges) {
  const auto [ranks, async] = GetParam();
  expect_one_rank_engine(ranks, async, {{0, random_tokens(30, 12), 10}});
}

// Live EPLB with the draft expert-parallel: the planner balances the draft's MoE apart
// from the target's (its own counts, window, placements and epochs) every 3 steps from a
// 4-step window; the ranks copy their new draft slots in the background and switch at
// one DP-sync step, several times in the middle of generation. The tokens, logprobs and
// drafts stay the one-rank Engine's.
TEST_P(SpeculativeDraftEp, ALiveDraftRebalanceLeavesTheTokensUnchanged) {
  const auto [ranks, async] = GetParam();
  EngineOptions o;
  o.eplb.enabled = true;
  o.eplb.window_size = 4;
  o.eplb.step_interval = 3;
  o.num_redundant_experts = ranks;
  std::vector<Work> work = workload();
  for (Work& w : work)  // long enough for several switches (a copy is not waited for)
    if (w.id != kAborted) w.max_tokens = 24;
  const runtime::EngineFigures f = expect_one_rank_engine(ranks, async, work, o);
  EXPECT_GE(f.eplb_draft_rebalances, 1) << "no draft placement went live";
  EXPECT_GE(f.eplb_rebalances, 1) << "no target placement went live";
  ASSERT_EQ(static_cast<int>(f.per_rank.size()), ranks);
  for (const runtime::EngineFigures& r : f.per_rank) {  // every rank switched each time
    EXPECT_EQ(r.eplb_draft_rebalances, f.eplb_draft_rebalances);
    EXPECT_EQ(r.eplb_rebalances, f.eplb_rebalances);
  }
  EXPECT_GT(f.eplb_draft_balance_after, 0.0);
  EXPECT_LE(f.eplb_draft_balance_after, 1.0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, SpeculativeDraftEp,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Bool()),
                         ranks_and_scheduling);

TEST(SpeculativeActorsConfig, ASpeculativeConfigWithoutADrafterIsRefusedAtSpawn) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  EXPECT_THROW(spawn_engine(sys, *golden_model().forward, nullptr, config(false, 3, "dspark")),
               troupe::Error);
}

}  // namespace
}  // namespace troupe::actors
