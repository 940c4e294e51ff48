// Host and disk tiers on DEP-R (issue 14 on issue 10's ranks, docs/kv-cache.md "Tiers
// with R ranks"): each rank owns its share of the tiers and a disk folder of its own.
// 6 conversations per rank, whose prefixes are 4x each rank's primary pool, start on
// rank c mod R; their second turns, newest first, are routed by the engine's own rank
// choice, which must send each to the rank whose primary pool, host or disk tier holds
// its prefix (a rank that looked at its primary pool only would lose the tie to rank 0
// and recompute). Tokens and full-vocabulary logprobs equal, bit for bit, each
// conversation alone on a pool that holds everything (runtime/kv_tier_workload.h). A
// fresh engine on the same folder (a restart) rebuilds each rank's disk index from its
// own folder and serves the prefixes saved there on that rank. Invariants every step.
#include <gtest/gtest.h>

#include <array>

#include "runtime/dep/dep_engine.h"
#include "runtime/kv_tier_workload.h"

namespace troupe::runtime {
namespace {

DepConfig dep_config(int ranks) {
  DepConfig d;
  d.ranks = ranks;
  return d;
}

using namespace tier_workload;
using testing::golden_model;

// Runs one request to its end (on `rank`, or where the engine's rank choice puts it:
// -1); `placed` gets the rank that ran it.
Out run_one(DepEngine& e, RequestId id, const std::vector<int32_t>& prompt, int rank,
            int& placed) {
  if (rank >= 0) e.add_request_on(rank, id, prompt, greedy_all_logprobs(4));
  else e.add_request(id, prompt, greedy_all_logprobs(4));
  placed = e.rank_of(id);
  Out out;
  for (int n = 0; e.has_unfinished() && n < 4000; ++n) {
    for (const RequestOutput& o : e.step()) {
      EXPECT_NE(o.status, RequestStatus::FinishedError) << o.error;
      out.add(o);
    }
    for (int r = 0; r < e.ranks(); ++r) e.kv_cache(r).check_invariants();
  }
  EXPECT_FALSE(e.has_unfinished());
  return out;
}

// The hit tokens each tier of each rank served so far: [rank][tier].
std::vector<std::array<int64_t, kNumKvTiers>> tier_hits(const DepEngine& e) {
  std::vector<std::array<int64_t, kNumKvTiers>> h(size_t(e.ranks()));
  for (int r = 0; r < e.ranks(); ++r)
    for (int t = 0; t < kNumKvTiers; ++t) h[size_t(r)][size_t(t)] = e.kv_cache(r).stats().tier_hit_tokens[t];
  return h;
}

class DepKvTiers : public ::testing::TestWithParam<int> {};

TEST_P(DepKvTiers, EachRankHitsItsOwnHostAndDiskAndTheTokensEqualAnUnboundedPool) {
  const int R = GetParam();
  const int n = 6 * R;
  TempDir dir("troupe-dep-kv-tiers");
  const EngineConfig c = tier_engine(kPrimaryBlocks, 24, 128, dir.path.string(), R);
  std::vector<Out> first(static_cast<size_t>(n));
  {
    DepEngine e(*golden_model().forward, nullptr, c, dep_config(R));
    for (int r = 0; r < R; ++r) {  // the instance's tiers, split evenly
      ASSERT_EQ(e.kv_cache(r).pool().num_blocks(), kPrimaryBlocks);
      ASSERT_EQ(e.kv_cache(r).tiers()->host().num_slots(), 24);
      ASSERT_EQ(e.kv_cache(r).tiers()->disk().num_slots(), 128);
    }
    int placed = -1;
    for (int k = 0; k < n; ++k) {
      first[size_t(k)] = run_one(e, k, first_turn(k), k % R, placed);
      EXPECT_TRUE(first[size_t(k)] == reference(k).first) << "turn 0, conversation " << k;
    }
    const auto before = tier_hits(e);
    for (int k = n - 1; k >= 0; --k) {
      const Out second = run_one(e, 1000 + k, second_turn(k, first[size_t(k)]), -1, placed);
      EXPECT_EQ(placed, k % R) << "conversation " << k << " went away from its KV";
      EXPECT_TRUE(second == reference(k).second) << "turn 1, conversation " << k;
    }
    const auto after = tier_hits(e);
    for (int r = 0; r < R; ++r) {
      const auto &b = before[size_t(r)], &a = after[size_t(r)];
      EXPECT_EQ(a[0] + a[1] + a[2] - b[0] - b[1] - b[2], 6 * kPrefixTokens)
          << "rank " << r << " recomputed a prefix";
      EXPECT_GT(a[int(KvTier::Host)] - b[int(KvTier::Host)], 0) << "rank " << r;
      EXPECT_GT(a[int(KvTier::Disk)] - b[int(KvTier::Disk)], 0) << "rank " << r;
      EXPECT_FALSE(dir.files("rank-" + std::to_string(r)).empty()) << "rank " << r;
    }
    EXPECT_TRUE(dir.files().empty()) << "a block file outside the ranks' folders";
  }  // the daemon stops: primary pools and host tiers are gone, the files stay
  DepEngine e(*golden_model().forward, nullptr, c, dep_config(R));
  for (int r = 0; r < R; ++r)
    EXPECT_EQ(e.kv_cache(r).tiers()->disk().num_used(),
              int64_t(dir.files("rank-" + std::to_string(r)).size()))
        << "rank " << r << " rebuilt its disk index from its own folder";
  for (int k = n - 1; k >= 0; --k) {
    const std::vector<int32_t> prompt = second_turn(k, first[size_t(k)]);
    const bool on_disk = e.kv_cache(k % R).cached_prefix_tokens(prompt) > 0;
    for (int r = 0; r < R; ++r)
      if (r != k % R) {
        EXPECT_EQ(e.kv_cache(r).cached_prefix_tokens(prompt), 0);
      }
    int placed = -1;
    const Out second = run_one(e, 2000 + k, prompt, -1, placed);
    if (on_disk) {
      EXPECT_EQ(placed, k % R) << "conversation " << k << " after the restart";
    }
    EXPECT_TRUE(second == reference(k).second) << "after the restart, conversation " << k;
  }
  for (int r = 0; r < R; ++r)
    EXPECT_GT(e.kv_cache(r).stats().tier_hit_tokens[int(KvTier::Disk)], 0) << "rank " << r;
}

// DEP-2 and DEP-3: expert parallel (DepEngine always is); plain DP runs through the actors
// (tests/actors/engine_dep_tiers_test.cpp).
INSTANTIATE_TEST_SUITE_P(Ranks, DepKvTiers, ::testing::Values(2, 3));

}  // namespace
}  // namespace troupe::runtime
