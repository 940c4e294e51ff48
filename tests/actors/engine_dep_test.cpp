// DEP-R through the engine actors (--data-parallel-size R): R schedulers that agree on
// every step by the DP-sync all-reduce, R rank actors on one expert-parallel exchange,
// the supervisor routing by load and prefix. Against the plain one-rank Engine on the
// golden model: the same tokens and logprobs bit for bit over a mixed workload, for
// R = 2, 3, 4, sync and async; an idle rank joins every step; a prefix follow-up lands
// on the rank that holds the prefix; a rank whose step throws fails the step everywhere
// and the group serves on; a dead rank restarts the whole instance. No sleeps: receives
// with timeouts, so a hang fails instead of passing.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <thread>

#include "actors/engine_actors.h"
#include "actors/engine_test_support.h"
#include "runtime/engram/engram_host_tables.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::actors {
namespace {

using runtime::ErrorCause;
using runtime::greedy;
using runtime::RequestId;
using testing::golden_model;
using testing::random_tokens;
using Ids = std::vector<int32_t>;

// Small budget (chunked prefill), four running per rank; snapshots off so every prefix
// hit replays exactly and equals a cold run bit for bit, whichever rank serves it.
runtime::EngineConfig dep_config(bool async) {
  runtime::EngineConfig c = runtime::golden_engine_config(int64_t(32) << 20, async, 24, 4);
  c.enable_prefix_snapshots = false;
  return c;
}

struct Outcome {
  std::map<RequestId, Ids> tokens;
  std::map<RequestId, std::vector<float>> logprobs;  // sampled and top, in order
  std::map<RequestId, runtime::RequestOutput> last;
};

void record(Outcome& o, const runtime::RequestOutput& out) {
  auto& t = o.tokens[out.id];
  t.insert(t.end(), out.new_tokens.begin(), out.new_tokens.end());
  for (const runtime::SampleLogprobs& lp : out.new_logprobs) {
    o.logprobs[out.id].push_back(lp.sampled.logprob);
    for (const runtime::Logprob& top : lp.top) o.logprobs[out.id].push_back(top.logprob);
  }
  if (out.finished()) o.last[out.id] = out;
}

struct Job {
  RequestId id;
  Ids prompt;
  runtime::RequestParams params;
  std::vector<runtime::Sibling> siblings;
};

// The mixed workload: different lengths (chunked prefill at a 24-token budget), a
// shared prefix, n = 2, two logprobs per token.
std::vector<Job> mixed_jobs() {
  const Ids shared = random_tokens(48, 9);
  Ids with_prefix = shared;
  for (int32_t t : random_tokens(11, 7)) with_prefix.push_back(t);
  const std::vector<Ids> prompts = {random_tokens(20, 4), random_tokens(90, 5), random_tokens(7, 6),
                                    shared, with_prefix, random_tokens(33, 8)};
  std::vector<Job> jobs;
  for (RequestId id = 0; id < static_cast<RequestId>(prompts.size()); ++id) {
    runtime::RequestParams p = greedy(6 + id % 3);
    p.num_logprobs = 2;
    Job j{id, prompts[id], p, {}};
    if (id == 2) j.siblings.push_back({100, p});  // n = 2
    jobs.push_back(std::move(j));
  }
  return jobs;
}

Outcome run_plain(const std::vector<Job>& jobs, const runtime::EngineConfig& c) {
  runtime::Engine e(*golden_model().forward, nullptr, c);
  for (const Job& j : jobs) e.add_request(j.id, j.prompt, j.params, j.siblings);
  Outcome o;
  while (e.has_unfinished())
    for (const runtime::RequestOutput& out : e.step()) record(o, out);
  return o;
}

class DepActors : public ::testing::Test {
 protected:
  DepActors() : sys_(cfg_) {}
  ~DepActors() override { caf::anon_send_exit(engine_, caf::exit_reason::user_shutdown); }

  void start(int ranks, const runtime::EngineConfig& c, bool expert_parallel = true,
             const std::string& faults = "", int fault_rank = 0,
             runtime::eplb::EplbConfig eplb = {}, int64_t redundant = 0) {
    EngineOptions o;
    o.eplb = eplb;
    o.num_redundant_experts = redundant;
    o.data_parallel_size = ranks;
    o.expert_parallel = expert_parallel;
    o.health = health_;
    o.fault_rank = fault_rank;
    if (!faults.empty())
      o.faults = std::make_shared<runtime::FaultPlan>(runtime::FaultPlan::parse(faults));
    engine_ = spawn_engine(sys_, *golden_model().forward, nullptr, c, o);
  }
  // Sends the jobs at once and receives until every request (siblings included) ended;
  // abort_id is aborted after its first token.
  Outcome run(const std::vector<Job>& jobs, RequestId abort_id = -1) {
    caf::scoped_actor self{sys_};
    size_t expected = 0;
    for (const Job& j : jobs) {
      self->send(engine_, generate_atom::value, GenerateRequest{j.id, j.prompt, j.params, j.siblings},
                 caf::actor{self});
      expected += 1 + j.siblings.size();
    }
    Outcome o;
    bool aborted = false;
    while (o.last.size() < expected) {
      bool got = false;
      self->receive(
          [&](token_atom, const TokenEvent& e) {
            got = true;
            record(o, e.output);
            if (e.output.id == abort_id && !aborted && !e.output.finished()) {
              aborted = true;
              self->send(engine_, abort_atom::value, abort_id);
            }
          },
          caf::after(std::chrono::seconds(60)) >> [] {});
      if (!got) {
        ADD_FAILURE() << "no token event within 60 s: " << o.last.size() << " of " << expected
                      << " requests ended";
        break;
      }
    }
    return o;
  }
  runtime::EngineFigures stats() { return engine_figures(sys_, engine_); }
  bool becomes_ready() { return actors::becomes_ready(*health_); }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  std::shared_ptr<InstanceHealth> health_ = std::make_shared<InstanceHealth>();
  scheduler_actor engine_;
};

class DepActorsRanks : public DepActors,
                       public ::testing::WithParamInterface<std::tuple<int, bool>> {};

TEST_P(DepActorsRanks, TokensAndLogprobsEqualTheOneRankEngine) {
  const auto [ranks, async] = GetParam();
  const runtime::EngineConfig c = dep_config(async);
  const std::vector<Job> jobs = mixed_jobs();
  const Outcome want = run_plain(jobs, c);
  start(ranks, c);
  const Outcome got = run(jobs);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);
  for (const auto& [id, out] : got.last) EXPECT_EQ(out.finish_reason(), "length") << id;
  const runtime::EngineFigures f = stats();
  ASSERT_EQ(static_cast<int>(f.per_rank.size()), ranks);
  int served = 0;
  for (const runtime::EngineFigures& r : f.per_rank) {
    EXPECT_EQ(r.used_blocks, 0);
    served += r.admitted > 0;
  }
  EXPECT_GE(served, 2) << "the requests all went to one rank";  // the load balance
  EXPECT_EQ(f.used_blocks, 0);
  EXPECT_EQ(f.failed_steps, 0);
}

TEST_P(DepActorsRanks, AnAbortedRequestStopsEarlyAndTheOthersAreUnchanged) {
  const auto [ranks, async] = GetParam();
  const runtime::EngineConfig c = dep_config(async);
  std::vector<Job> jobs = mixed_jobs();
  jobs[1].params.max_tokens = 400;  // long enough to be cut
  const Outcome want = run_plain(jobs, c);
  start(ranks, c);
  const Outcome got = run(jobs, /*abort_id=*/1);
  EXPECT_EQ(got.last.at(1).finish_reason(), "abort");
  const Ids& cut = got.tokens.at(1);
  ASSERT_LT(cut.size(), want.tokens.at(1).size());
  EXPECT_TRUE(std::equal(cut.begin(), cut.end(), want.tokens.at(1).begin()));
  for (const auto& [id, tokens] : want.tokens)
    if (id != 1) {
      EXPECT_EQ(got.tokens.at(id), tokens) << "request " << id;
    }
  EXPECT_EQ(stats().used_blocks, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DepActorsRanks,
                         ::testing::Combine(::testing::Values(2, 3, 4), ::testing::Bool()));

// Live EPLB: the planner rebalances every 3 steps from a 4-step window; the ranks copy
// their new slots in the background and switch together, several times in the middle
// of the workload, and the tokens and logprobs stay those of the one-rank Engine.
class DepActorsEplb : public DepActors,
                      public ::testing::WithParamInterface<std::tuple<int, bool>> {};

TEST_P(DepActorsEplb, ALiveRebalanceLeavesTheTokensUnchanged) {
  const auto [ranks, async] = GetParam();
  const runtime::EngineConfig c = dep_config(async);
  std::vector<Job> jobs = mixed_jobs();
  for (Job& j : jobs) j.params.max_tokens = 24;  // long enough for several switches
  const Outcome want = run_plain(jobs, c);
  runtime::eplb::EplbConfig eplb;
  eplb.enabled = true;
  eplb.window_size = 4;
  eplb.step_interval = 3;
  start(ranks, c, true, "", 0, eplb, /*redundant=*/ranks);
  // The copies run beside the steps, so on a loaded machine every one can land after the
  // workload's last step. The workload then runs again (the same tokens are due each
  // time) until a placement went live, for up to a minute.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int rounds = 0;
  do {
    const Outcome got = run(jobs);
    EXPECT_EQ(got.tokens, want.tokens) << "round " << rounds;
    EXPECT_EQ(got.logprobs, want.logprobs) << "round " << rounds;
    ++rounds;
  } while (stats().eplb_rebalances == 0 && std::chrono::steady_clock::now() < deadline);
  const runtime::EngineFigures f = stats();
  EXPECT_GE(f.eplb_rebalances, 1) << "no placement went live in " << rounds << " rounds";
  for (const runtime::EngineFigures& r : f.per_rank)  // every rank switched each time
    EXPECT_EQ(r.eplb_rebalances, f.eplb_rebalances);
  EXPECT_GT(f.eplb_balance_after, 0.0);
  EXPECT_LE(f.eplb_balance_after, 1.0);
  EXPECT_EQ(f.used_blocks, 0);
  EXPECT_EQ(f.failed_steps, 0);
}

INSTANTIATE_TEST_SUITE_P(Ranks, DepActorsEplb,
                         ::testing::Combine(::testing::Values(2, 3), ::testing::Bool()));

// A golden model of its own whose Engram tables live in a shared host mapping (made once,
// kept for the test binary as golden_model() is: actors may outlive a test body).
struct AdoptedModel {
  testing::GoldenModel* model;
  std::shared_ptr<runtime::EngramHostTables> tables;
};
const AdoptedModel& adopted_model() {
  static const AdoptedModel m = [] {
    testing::GoldenModel* g = testing::load_golden_model(testing::Golden::kSeed7);
    return AdoptedModel{g, runtime::EngramHostTables::adopt(g->weights, g->config)};
  }();
  return m;
}

// The node's Engram owner: every plan reaches it, it brings in that plan's rows, and the
// ranks, reading the tables in the owner's mapping, give the plain Engine's tokens.
// Synchronous scheduling: a plan's tokens are all known when it is sent, so no position
// is skipped.
TEST_F(DepActors, TheEngramOwnerPrefetchesEveryPlanAndTheTokensStay) {
  const AdoptedModel& m = adopted_model();
  ASSERT_NE(m.tables, nullptr);
  const runtime::EngineConfig c = dep_config(false);
  const std::vector<Job> jobs = mixed_jobs();
  const Outcome want = run_plain(jobs, c);
  const engram_owner_actor owner =
      spawn_engram_owner(sys_, m.model->config, m.model->weights, m.tables);
  EngineOptions o;
  o.data_parallel_size = 2;
  o.expert_parallel = true;
  o.health = health_;
  o.engram_owner = owner;
  engine_ = spawn_engine(sys_, *m.model->forward, nullptr, c, o);
  const Outcome got = run(jobs);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);
  caf::scoped_actor self{sys_};
  EngramOwnerFigures f;
  self->request(owner, std::chrono::seconds(10), stats_atom::value)
      .receive([&](const EngramOwnerFigures& x) { f = x; },
               [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  EXPECT_EQ(f.plans, stats().steps) << "every real plan of both ranks";
  EXPECT_GT(f.rows, 0);
  EXPECT_EQ(f.skipped_positions, 0);
  EXPECT_EQ(f.table_bytes, m.tables->table_bytes());
  caf::anon_send_exit(owner, caf::exit_reason::user_shutdown);
}

TEST_F(DepActors, IdleRanksRunDummyStepsAndTheBusyOneFinishes) {
  const runtime::EngineConfig c = dep_config(true);
  const std::vector<Job> one{{1, random_tokens(30, 12), greedy(8), {}}};
  const Outcome want = run_plain(one, c);
  start(4, c);  // one request: three ranks have nothing to run every step
  EXPECT_EQ(run(one).tokens, want.tokens);
}

TEST_F(DepActors, WithoutExpertParallelTheRanksStepAloneAndAgree) {
  const runtime::EngineConfig c = dep_config(true);
  const std::vector<Job> jobs = mixed_jobs();
  const Outcome want = run_plain(jobs, c);
  start(2, c, /*expert_parallel=*/false);
  const Outcome got = run(jobs);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logprobs, want.logprobs);
}

// Equal loads: the follow-up of a conversation goes to the rank that cached its prefix.
TEST_F(DepActors, AFollowUpLandsOnTheRankThatHoldsItsPrefix) {
  const runtime::EngineConfig c = dep_config(false);
  const Ids first = random_tokens(64, 21);
  Ids follow = first;
  for (int32_t t : random_tokens(9, 22)) follow.push_back(t);
  start(3, c);
  run({{1, first, greedy(4), {}}});
  const runtime::EngineFigures before = stats();
  int holder = -1;
  for (int r = 0; r < 3; ++r)
    if (before.per_rank[r].admitted > 0) holder = r;
  ASSERT_GE(holder, 0);
  const std::vector<Job> next{{2, follow, greedy(6), {}}};
  EXPECT_EQ(run(next).tokens, run_plain(next, c).tokens);
  const runtime::EngineFigures after = stats();
  EXPECT_EQ(after.per_rank[holder].admitted, before.per_rank[holder].admitted + 1);
  EXPECT_GE(after.per_rank[holder].prefix_hit_tokens, 64 - 16);  // whole blocks of the prefix
}

TEST_F(DepActors, ARankWhoseStepThrowsFailsTheStepEverywhereAndTheGroupServesOn) {
  const runtime::EngineConfig c = dep_config(false);
  start(2, c, true, "step-throw@3", /*fault_rank=*/1);
  const std::vector<Job> two{{1, random_tokens(30, 13), greedy(6), {}},
                             {2, random_tokens(25, 14), greedy(6), {}}};
  const Outcome bad = run(two);
  for (const auto& [id, out] : bad.last) {
    EXPECT_EQ(out.status, runtime::RequestStatus::FinishedError) << id;
    EXPECT_EQ(out.error_cause, ErrorCause::StepFailed) << id;
    EXPECT_NE(out.error.find("injected fault: step-throw"), std::string::npos) << out.error;
  }
  const std::vector<Job> next{{3, random_tokens(18, 15), greedy(5), {}}};
  EXPECT_EQ(run(next).tokens, run_plain(next, c).tokens);
  const runtime::EngineFigures f = stats();
  EXPECT_EQ(f.restarts, 0);
  EXPECT_EQ(f.used_blocks, 0);
  EXPECT_GE(f.failed_steps, 1);
}

TEST_F(DepActors, ADeadRankRestartsTheWholeInstance) {
  const runtime::EngineConfig c = dep_config(true);
  start(3, c, true, "rank-exit@4", /*fault_rank=*/2);
  std::vector<Job> jobs;
  for (RequestId id = 1; id <= 3; ++id) jobs.push_back({id, random_tokens(20 + 5 * id, 30 + id), greedy(30), {}});
  const Outcome lost = run(jobs);
  int died = 0;
  for (const auto& [id, out] : lost.last) {
    EXPECT_EQ(out.status, runtime::RequestStatus::FinishedError) << id;
    died += out.error.find("rank 2 died") != std::string::npos;
  }
  EXPECT_GE(died, 1);
  EXPECT_TRUE(becomes_ready()) << *health_->problem();
  const std::vector<Job> next{{9, random_tokens(26, 16), greedy(12), {}}};
  EXPECT_EQ(run(next).tokens, run_plain(next, c).tokens);
  const runtime::EngineFigures f = stats();
  EXPECT_EQ(f.restarts, 1);
  EXPECT_EQ(f.used_blocks, 0);
}

// An abort that reaches the supervisor while it still probes the ranks for the request
// (sent right behind the generate) follows the request to its rank: not lost.
TEST_F(DepActors, AnAbortWhileTheRequestIsRoutedEndsIt) {
  start(2, dep_config(true));
  caf::scoped_actor self{sys_};
  self->send(engine_, generate_atom::value,
             GenerateRequest{4, random_tokens(12, 41), greedy(300), {}}, caf::actor{self});
  self->send(engine_, abort_atom::value, RequestId{4});
  std::string reason;
  while (reason.empty()) {
    bool got = false;
    self->receive(
        [&](token_atom, const TokenEvent& e) {
          got = true;
          if (e.output.finished()) reason = std::string(e.output.finish_reason());
        },
        caf::after(std::chrono::seconds(60)) >> [] {});
    if (!got) break;
  }
  EXPECT_EQ(reason, "abort");
  EXPECT_EQ(stats().used_blocks, 0);
}

}  // namespace
}  // namespace troupe::actors
