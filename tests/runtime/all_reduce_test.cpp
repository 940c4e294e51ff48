// The DP-sync all-reduce (runtime/collectives): the schedules' rounds and message counts,
// and the state machine under a simulated network (collective_sim.h) that delivers
// messages in a seeded random order, several consecutive steps overlapping, for R = 1..33.
// Every result is checked against a plain reduction computed here; the rank-set reduction
// (each rank contributes its own id, combine = merge) fails for any schedule that drops or
// double-counts a rank, as a wrong fold does (AllReduceSim.WrongFoldIsCaught).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "collective_sim.h"
#include "kernels/check.h"
#include "runtime/collectives/all_reduce.h"
#include "runtime/collectives/schedule.h"
#include "runtime/collectives/step_metadata.h"

namespace troupe::runtime::collectives {
namespace {

using testing::simulate;
using Kind = ScheduleAction::Kind;
using RankSet = std::vector<int32_t>;

struct MergeRanks {
  RankSet operator()(const RankSet& a, const RankSet& b) const {
    RankSet out(a);
    out.insert(out.end(), b.begin(), b.end());
    std::sort(out.begin(), out.end());
    return out;
  }
};
struct Sum64 {
  int64_t operator()(int64_t a, int64_t b) const { return a + b; }
};

const testing::MakeSchedule kSchedules[] = {recursive_doubling_schedule, gather_broadcast_schedule};

// log2 of the largest power of two <= r, counted here on its own.
int32_t floor_log2(int32_t r) {
  int32_t d = 0;
  while ((2 << d) <= r) ++d;
  return d;
}

// Every rank gets exactly {0, .., R-1} in every step, for every seed.
::testing::AssertionResult rank_sets_correct(testing::MakeSchedule make, int32_t R, int seeds,
                                             int steps) {
  RankSet all(R);
  std::iota(all.begin(), all.end(), 0);
  for (int seed = 0; seed < seeds; ++seed) {
    const auto run = simulate<RankSet, MergeRanks>(make, R, steps, seed,
                                                   [](int32_t r, int) { return RankSet{r}; });
    if (!run.complete) return ::testing::AssertionFailure() << "R " << R << " seed " << seed << " hung";
    for (int32_t r = 0; r < R; ++r)
      for (int s = 0; s < steps; ++s)
        if (run.results[r][s] != all)
          return ::testing::AssertionFailure()
                 << "R " << R << " seed " << seed << ": rank " << r << " step " << s
                 << " got " << ::testing::PrintToString(run.results[r][s]);
  }
  return ::testing::AssertionSuccess();
}

TEST(AllReduceSchedule, RecursiveDoublingOfSixRanksIsTheDiagram) {
  // schedule.h: P = 4, E = 2; rounds 0 fold in, 1-2 exchange, 3 fold out.
  using A = ScheduleAction;
  EXPECT_EQ(recursive_doubling_schedule(0, 6).actions,
            (std::vector<A>{{Kind::Combine, 4, 0}, {Kind::Send, 1, 1}, {Kind::Combine, 1, 1},
                            {Kind::Send, 2, 2}, {Kind::Combine, 2, 2}, {Kind::Send, 4, 3}}));
  EXPECT_EQ(recursive_doubling_schedule(3, 6).actions,
            (std::vector<A>{{Kind::Send, 2, 1}, {Kind::Combine, 2, 1}, {Kind::Send, 1, 2},
                            {Kind::Combine, 1, 2}}));
  EXPECT_EQ(recursive_doubling_schedule(5, 6).actions,
            (std::vector<A>{{Kind::Send, 1, 0}, {Kind::Take, 1, 3}}));
  EXPECT_TRUE(recursive_doubling_schedule(0, 1).actions.empty());
  EXPECT_EQ(gather_broadcast_schedule(0, 3).actions,
            (std::vector<A>{{Kind::Combine, 1, 0}, {Kind::Combine, 2, 0}, {Kind::Send, 1, 1},
                            {Kind::Send, 2, 1}}));
  EXPECT_EQ(gather_broadcast_schedule(2, 3).actions,
            (std::vector<A>{{Kind::Send, 0, 0}, {Kind::Take, 0, 1}}));
}

TEST(AllReduceSchedule, MessageCountsPerRankAreLogarithmic) {
  for (int32_t R = 1; R <= 33; ++R) {
    const int32_t d = floor_log2(R), P = 1 << d;
    int64_t total = 0;
    for (int32_t r = 0; r < R; ++r) {
      const CollectiveSchedule s = recursive_doubling_schedule(r, R);
      const int64_t want = r >= P ? 1 : r < R - P ? d + 1 : d;
      EXPECT_EQ(s.sends(), want) << "R " << R << " rank " << r;
      EXPECT_EQ(s.receives(), want) << "R " << R << " rank " << r;
      total += s.sends();
      const CollectiveSchedule g = gather_broadcast_schedule(r, R);
      EXPECT_EQ(g.sends(), r == 0 ? R - 1 : 1);
      EXPECT_EQ(g.receives(), r == 0 ? R - 1 : 1);
    }
    EXPECT_EQ(total, int64_t(P) * d + 2 * (R - P)) << "R " << R;
  }
}

TEST(AllReduceSchedule, BadRanksAreErrors) {
  EXPECT_THROW(recursive_doubling_schedule(0, 0), Error);
  EXPECT_THROW(recursive_doubling_schedule(3, 3), Error);
  EXPECT_THROW(gather_broadcast_schedule(-1, 4), Error);
}

TEST(AllReduceSim, EveryRankGetsEveryRankOnceForOneToThirtyThreeRanks) {
  for (const auto make : kSchedules)
    for (int32_t R = 1; R <= 33; ++R) EXPECT_TRUE(rank_sets_correct(make, R, 30, 3));
}

TEST(AllReduceSim, NonPowersOfTwoUnderManySeeds) {
  for (const int32_t R : {3, 5, 6, 7, 9, 12, 31, 33})
    EXPECT_TRUE(rank_sets_correct(recursive_doubling_schedule, R, 300, 2));
}

// The checker above must be able to fail: fold the extra ranks in after the exchanges
// instead of before, and the ranks in [0, P) other than the fold partner miss them.
TEST(AllReduceSim, WrongFoldIsCaught) {
  const testing::MakeSchedule late_fold = [](int32_t rank, int32_t size) {
    CollectiveSchedule s = recursive_doubling_schedule(rank, size);
    auto& a = s.actions;
    if (!a.empty() && a.front().kind == Kind::Combine && a.front().round == 0)
      std::rotate(a.begin(), a.begin() + 1, a.end() - 1);  // the fold-in moves before fold-out
    return s;
  };
  for (const int32_t R : {3, 5, 6, 7, 33}) EXPECT_FALSE(rank_sets_correct(late_fold, R, 3, 1));
  EXPECT_TRUE(rank_sets_correct(late_fold, 4, 3, 1));  // no extra ranks: no fold to get wrong
}

TEST(AllReduceSim, SumsAndMessageCountsMatchAPlainReduction) {
  for (const auto make : kSchedules)
    for (int32_t R = 1; R <= 33; ++R) {
      std::mt19937_64 gen(R);
      std::vector<std::vector<int64_t>> v(R, std::vector<int64_t>(4));
      for (auto& row : v)
        for (auto& x : row) x = static_cast<int64_t>(gen() % 2000001) - 1000000;
      const auto run = simulate<int64_t, Sum64>(make, R, 4, 7 + R,
                                                [&](int32_t r, int s) { return v[r][s]; });
      ASSERT_TRUE(run.complete) << "R " << R;
      for (int s = 0; s < 4; ++s) {
        int64_t want = 0;
        for (int32_t r = 0; r < R; ++r) want += v[r][s];
        for (int32_t r = 0; r < R; ++r) EXPECT_EQ(run.results[r][s], want) << R << " " << r;
      }
      for (int32_t r = 0; r < R; ++r) {
        const CollectiveSchedule sched = make(r, R);
        EXPECT_EQ(run.sent[r], 4 * sched.sends()) << "R " << R << " rank " << r;
        EXPECT_EQ(run.received[r], 4 * sched.receives()) << "R " << R << " rank " << r;
      }
    }
}

// The lower rank's value goes first in every combine, so both partners of an exchange
// compute the same thing and all ranks end with the same value, whatever order the
// messages came in, even for a reduction that is not commutative bit for bit (here:
// appending rank lists, which only a sort would make commutative).
TEST(AllReduceSim, EveryRankEndsWithTheSameValue) {
  struct Append {
    RankSet operator()(const RankSet& lower, const RankSet& higher) const {
      RankSet out(lower);
      out.insert(out.end(), higher.begin(), higher.end());
      return out;
    }
  };
  for (const auto make : kSchedules)
    for (const int32_t R : {2, 3, 6, 16, 29}) {
      for (int seed = 0; seed < 20; ++seed) {
        const auto run = simulate<RankSet, Append>(make, R, 2, seed,
                                                   [](int32_t r, int) { return RankSet{r}; });
        ASSERT_TRUE(run.complete);
        for (int32_t r = 0; r < R; ++r)
          for (int s = 0; s < 2; ++s)
            EXPECT_EQ(run.results[r][s], run.results[0][0]) << "R " << R << " rank " << r;
        RankSet sorted = run.results[0][0], all(R);
        std::sort(sorted.begin(), sorted.end());
        std::iota(all.begin(), all.end(), 0);
        EXPECT_EQ(sorted, all);
      }
    }
}

TEST(AllReduceSim, StepMetadataAgreesWithAPlainLoop) {
  for (const auto make : kSchedules)
    for (const int32_t R : {1, 2, 3, 7, 8, 13, 32, 33}) {
      auto local = [R](int32_t r, int s) {
        StepMetadata m =
            local_step_metadata(r, R, 1000 + s, (r * 37 + s * 11) % 5 == 0 ? 0 : r * 3 + s,
                                r == R - 1 && s == 1, /*placement_ready=*/s + (r % 3),
                                /*failed=*/s == 2 && r == R / 2,
                                /*drafts=*/s != 1 && r == (s * 5) % R,
                                /*draft_placement_ready=*/s + (r % 2));
        StepOutcome o;  // the rank's step `depth` back, for the group's draft length
        o.limit = (r + s) % 3;
        o.batch = r % 4;
        o.decode_only = (r + s) % 5 != 0;
        o.seconds = 1e-3 * ((r * 7 + s) % 11);
        if (r % 3 != 2) o.drafts = {{2, r % 3}, {1, s % 2}};
        m.draft_step = summarize(o, 2, r % 5);
        return m;
      };
      const auto run = simulate<StepMetadata, StepMetadataReduce>(make, R, 3, R, local);
      ASSERT_TRUE(run.complete);
      for (int s = 0; s < 3; ++s) {
        StepMetadata want = local(0, s);  // a plain left fold over the ranks
        for (int32_t r = 1; r < R; ++r) {
          const StepMetadata m = local(r, s);
          want.tokens[r] = m.tokens[r];
          want.any_work = want.any_work || m.any_work;
          want.placement_ready = std::min(want.placement_ready, m.placement_ready);
          want.any_failed = want.any_failed || m.any_failed;
          want.any_draft = want.any_draft || m.any_draft;
          want.draft_placement_ready = std::min(want.draft_placement_ready, m.draft_placement_ready);
          want.draft_step = reduce_summaries(want.draft_step, m.draft_step);
        }
        for (int32_t r = 0; r < R; ++r) EXPECT_EQ(run.results[r][s], want) << R << " " << r;
        EXPECT_TRUE(run.results[0][s].agreed());
        EXPECT_EQ(run.results[0][s].step_min, 1000 + s);
      }
    }
}

TEST(AllReduceSim, StepsOfRanksOutOfLockstepDoNotAgree) {
  const auto run = simulate<StepMetadata, StepMetadataReduce>(
      recursive_doubling_schedule, 5, 1, 1,
      [](int32_t r, int) { return local_step_metadata(r, 5, r == 3 ? 41 : 40, 1, true); });
  ASSERT_TRUE(run.complete);
  EXPECT_FALSE(run.results[0][0].agreed());
  EXPECT_EQ(run.results[4][0].step_min, 40);
  EXPECT_EQ(run.results[4][0].step_max, 41);
}

// A rank that finished step N starts N + 1 while others are still in N: over the seeds the
// simulation does deliver next-step messages early, and the results stay right.
TEST(AllReduceSim, ConsecutiveStepsOverlap) {
  for (const auto make : kSchedules)
    for (const int32_t R : {2, 3, 6, 16, 33}) {
      int64_t early = 0;
      for (int seed = 0; seed < 40; ++seed)
        early += simulate<RankSet, MergeRanks>(make, R, 2, seed, [](int32_t r, int) {
                   return RankSet{r};
                 }).early;
      EXPECT_GT(early, 0) << "R " << R << ": no message of step N+1 came before its rank began it";
      EXPECT_TRUE(rank_sets_correct(make, R, 40, 2));
    }
}

TEST(AllReduceRank, NextStepMessageBeforeThisStepFinishesIsKept) {
  AllReduceRank<int64_t, Sum64> a(recursive_doubling_schedule(0, 2));
  AllReduceRank<int64_t, Sum64> b(recursive_doubling_schedule(1, 2));
  Progress<int64_t> pa = a.start(7, 10), pb = b.start(7, 1);
  ASSERT_EQ(pa.send.size(), 1u);
  ASSERT_EQ(pb.send.size(), 1u);
  EXPECT_EQ(b.receive(pa.send[0]).result, 11);
  const Progress<int64_t> pb8 = b.start(8, 2);  // b is ahead, in step 8
  ASSERT_EQ(pb8.send.size(), 1u);
  EXPECT_EQ(pb8.send[0].step, 8);
  EXPECT_FALSE(a.receive(pb8.send[0]).result);  // a is still in step 7: kept
  EXPECT_EQ(a.buffered(), 1u);
  EXPECT_EQ(a.receive(pb.send[0]).result, 11);
  const Progress<int64_t> pa8 = a.start(8, 20);  // uses the kept message at once
  EXPECT_EQ(pa8.result, 22);
  EXPECT_EQ(a.buffered(), 0u);
  EXPECT_EQ(b.receive(pa8.send[0]).result, 22);
}

TEST(AllReduceRank, BrokenProtocolIsAnError) {
  using M = CollectiveMessage<int64_t>;
  AllReduceRank<int64_t, Sum64> r0(recursive_doubling_schedule(0, 3));
  r0.start(5, 1);
  EXPECT_THROW(r0.receive(M{2, 1, 5, 0, 1}), Error);  // addressed to rank 1
  EXPECT_THROW(r0.receive(M{1, 0, 5, 0, 1}), Error);  // rank 1 sends nothing in round 0
  EXPECT_THROW(r0.receive(M{2, 0, 5, 1, 1}), Error);  // rank 2 sends only in round 0
  EXPECT_THROW(r0.receive(M{2, 0, 4, 0, 1}), Error);  // a step before the running one
  EXPECT_THROW(r0.start(6, 1), Error);                // step 5 is still running
  EXPECT_FALSE(r0.receive(M{2, 0, 5, 0, 1}).result);  // fold in; now waits for rank 1
  EXPECT_THROW(r0.receive(M{2, 0, 5, 0, 1}), Error);  // the same message again
  const auto done = r0.receive(M{1, 0, 5, 1, 4});
  ASSERT_TRUE(done.result);
  EXPECT_EQ(*done.result, 6);
  EXPECT_THROW(r0.receive(M{1, 0, 5, 1, 4}), Error);  // step 5 is finished
  EXPECT_THROW(r0.start(5, 1), Error);                // steps must increase
  EXPECT_NO_THROW(r0.receive(M{2, 0, 9, 0, 1}));      // a later step is kept
  EXPECT_THROW(r0.receive(M{2, 0, 9, 0, 1}), Error);  // ... once
}

TEST(AllReduceRank, OneRankIsItsOwnResult) {
  AllReduceRank<int64_t, Sum64> solo(recursive_doubling_schedule(0, 1));
  const auto p = solo.start(1, 42);
  EXPECT_TRUE(p.send.empty());
  EXPECT_EQ(p.result, 42);
  EXPECT_EQ(solo.start(2, 43).result, 43);
}

TEST(StepMetadata, ReduceOfDifferentGroupSizesIsAnError) {
  EXPECT_THROW(StepMetadataReduce{}(local_step_metadata(0, 2, 1, 1, true),
                                    local_step_metadata(0, 3, 1, 1, true)),
               Error);
  EXPECT_THROW(local_step_metadata(2, 2, 1, 1, true), Error);
  EXPECT_EQ(local_step_metadata(1, 3, 9, 5, false).total_tokens(), 5);
}

}  // namespace
}  // namespace troupe::runtime::collectives
