// Host and disk tiers in the engine actors with R ranks (issue 14 on issue 10's ranks,
// docs/kv-cache.md "Tiers with R ranks"): DEP-2 with expert parallelism and DP-3 without.
// Each rank's scheduler and rank share that rank's own tiers (its share of the host and
// disk budgets, its own disk folder). The first turns of 6 conversations per rank go in
// at once, so the supervisor spreads them by load; their prefixes are 4x each rank's
// pool. The second turns go one at a time, newest first: with every rank idle the
// supervisor's probe decides, and each must hit its whole prefix (256 tokens), which only
// the rank that ran its first turn holds, in its pool, host or disk tier. Tokens and
// full-vocabulary logprobs equal each conversation alone on a pool that holds everything
// (runtime/kv_tier_workload.h), bit for bit.
#include <gtest/gtest.h>

#include "actors/engine_actors.h"
#include "actors/engine_test_support.h"
#include "runtime/kv_tier_workload.h"

namespace troupe::actors {
namespace {

using namespace runtime::tier_workload;
using runtime::RequestId;
using testing::golden_model;

class DepActorsTiers : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  DepActorsTiers() : sys_(cfg_) {}
  ~DepActorsTiers() override { caf::anon_send_exit(engine_, caf::exit_reason::user_shutdown); }

  // Sends the turns at once; each one's outputs, and the hit of its admission.
  std::map<RequestId, Out> run(const std::map<RequestId, std::vector<int32_t>>& prompts,
                               std::map<RequestId, runtime::RequestOutput>& last) {
    caf::scoped_actor self{sys_};
    for (const auto& [id, prompt] : prompts)
      self->send(engine_, generate_atom::value,
                 GenerateRequest{id, prompt, greedy_all_logprobs(4), {}}, caf::actor{self});
    std::map<RequestId, Out> outs;
    std::map<RequestId, std::vector<int32_t>> tokens;
    last = collect(self, prompts.size(), tokens,
                   [&](const runtime::RequestOutput& o) { outs[o.id].add(o); });
    return outs;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  scheduler_actor engine_;
};

TEST_P(DepActorsTiers, EveryFollowUpHitsItsWholePrefixOnItsRanksTiersAndEqualsAnUnboundedPool) {
  const auto [R, expert_parallel] = GetParam();
  const int n = 6 * R;
  TempDir dir("troupe-dep-actors-tiers");
  EngineOptions o;
  o.data_parallel_size = R;
  o.expert_parallel = expert_parallel;
  engine_ = spawn_engine(sys_, *golden_model().forward, nullptr,
                         tier_engine(kPrimaryBlocks, 24, 128, dir.path.string(), R), o);
  std::map<RequestId, std::vector<int32_t>> turn0;
  for (int k = 0; k < n; ++k) turn0[k] = first_turn(k);
  std::map<RequestId, runtime::RequestOutput> last;
  const std::map<RequestId, Out> first = run(turn0, last);
  ASSERT_EQ(int(first.size()), n);
  for (int k = 0; k < n; ++k)
    EXPECT_TRUE(first.at(k) == reference(k).first) << "turn 0, conversation " << k;
  const runtime::EngineFigures before = engine_figures(sys_, engine_);
  for (int k = n - 1; k >= 0; --k) {
    const std::map<RequestId, Out> second =
        run({{1000 + k, second_turn(k, first.at(k))}}, last);
    EXPECT_EQ(last.at(1000 + k).num_cached_tokens, kPrefixTokens)
        << "conversation " << k << " did not reach the rank holding its prefix";
    EXPECT_TRUE(second.at(1000 + k) == reference(k).second) << "turn 1, conversation " << k;
  }
  const runtime::EngineFigures after = engine_figures(sys_, engine_);
  ASSERT_EQ(int(after.per_rank.size()), R);
  for (int r = 0; r < R; ++r) {
    const auto &b = before.per_rank[size_t(r)], &a = after.per_rank[size_t(r)];
    EXPECT_GT(a.admitted, 0) << "rank " << r;
    EXPECT_GT(a.prefix_tier_hit_tokens[int(runtime::KvTier::Host)] -
                  b.prefix_tier_hit_tokens[int(runtime::KvTier::Host)], 0) << "rank " << r;
    EXPECT_GT(a.prefix_tier_hit_tokens[int(runtime::KvTier::Disk)] -
                  b.prefix_tier_hit_tokens[int(runtime::KvTier::Disk)], 0) << "rank " << r;
    EXPECT_FALSE(dir.files("rank-" + std::to_string(r)).empty()) << "rank " << r;
  }
  EXPECT_EQ(after.prefix_hit_tokens - before.prefix_hit_tokens, n * kPrefixTokens);
  EXPECT_TRUE(dir.files().empty()) << "a block file outside the ranks' folders";
  EXPECT_EQ(after.failed_steps, 0);
}

// DEP-2 (expert parallel, lockstep) and DP-3 (every rank every expert, stepping alone).
INSTANTIATE_TEST_SUITE_P(Ranks, DepActorsTiers,
                         ::testing::Values(std::make_tuple(2, true), std::make_tuple(3, false)));

}  // namespace
}  // namespace troupe::actors
