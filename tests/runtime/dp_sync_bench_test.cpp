// `troupe bench dp-sync` on real threads: every row's all-reduces come back right (the bench
// checks each result and fails on a wrong one), with the schedule's message counts, in
// both wait modes; the CLI prints its rows and exits 2 on bad flags. No timing is checked.
#include "bench/dp_sync/dp_sync_bench.h"

#include <gtest/gtest.h>

#include "kernels/check.h"
#include "support/run_troupe.h"

namespace troupe::bench {
namespace {

TEST(DpSyncBench, RowsForEachWaitRankCountAndSchedule) {
  DpSyncBenchConfig c;
  c.ranks = {1, 3, 5};
  c.steps = 30;
  c.warmup = 3;
  c.back_to_back_steps = 30;
  const std::vector<DpSyncBenchRow> rows = run_dp_sync_bench(c);
  ASSERT_EQ(rows.size(), 2u * 3u * 2u);
  // R = 5: recursive doubling folds 1 extra rank into 4 (4 x 2 exchanges + 2 fold
  // messages); gather-broadcast sends 4 up and 4 down, all through rank 0.
  const DpSyncBenchRow& rd5 = rows[4];
  const DpSyncBenchRow& gb5 = rows[5];
  EXPECT_EQ(rd5.schedule, "recursive-doubling");
  EXPECT_EQ(rd5.ranks, 5);
  EXPECT_EQ(rd5.messages_per_step, 10);
  EXPECT_EQ(rd5.busiest_rank, 6);
  EXPECT_EQ(gb5.schedule, "gather-broadcast");
  EXPECT_EQ(gb5.messages_per_step, 8);
  EXPECT_EQ(gb5.busiest_rank, 8);
  EXPECT_EQ(rows[6].wait, MailWait::Block);
  for (const DpSyncBenchRow& r : rows) {
    EXPECT_EQ(r.latency_us.size(), 30u);
    EXPECT_GE(r.back_to_back_us, 0.0);
  }
  EXPECT_EQ(rows[0].messages_per_step, 0);  // one rank: nothing to send
}

TEST(DpSyncBench, BadConfigIsAnError) {
  DpSyncBenchConfig c;
  c.ranks = {0};
  EXPECT_THROW(c.validate(), Error);
  c.ranks = {4};
  c.steps = 0;
  EXPECT_THROW(c.validate(), Error);
}

TEST(DpSyncBenchCli, PrintsRowsAndRejectsBadFlags) {
  const auto ok = testing::run_troupe(
      "bench dp-sync --ranks 2,3 --steps 20 --warmup 2 --back-to-back-steps 20 --wait block");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("block     3  recursive-doubling"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("block     3  gather-broadcast"), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("spin "), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("5.4 -> 0.55 ms"), std::string::npos) << ok.out;
  testing::expect_usage_errors({
      {"--ranks 2,x", "--ranks expects integers separated by commas"},
      {"--ranks 0", "--ranks must be at least 1"},
      {"--ranks 300", "[1, 256]"},
      {"--steps 0", "--steps must be at least 1"},
      {"--wait sometimes", "--wait expects spin, block or both"},
      {"--gpus 2", "gpus"},
  }, "bench dp-sync ");
}

}  // namespace
}  // namespace troupe::bench
