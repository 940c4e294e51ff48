// `troupe bench mirror-lag` on the golden model: both arrival patterns do the same work,
// mirror keeps the ranks in step (balance 1, no dummy steps), lag spreads them (dummy
// steps, balance below 1), and every rank's copy of a request gives the plain one-rank
// Engine's greedy tokens, whenever it arrived. No timing is checked.
#include "bench/dp_balance/mirror_lag_bench.h"

#include <gtest/gtest.h>

#include "kernels/check.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"

namespace troupe::bench {
namespace {

MirrorLagConfig small_config() {
  MirrorLagConfig c;
  c.ranks = 2;
  c.requests = 2;
  c.prompt_len = 40;
  c.max_tokens = 6;
  c.engine.kv_budget_bytes = int64_t(32) << 20;
  c.engine.block_size = 16;
  c.engine.max_running = 2;
  return c;
}

TEST(MirrorLagBench, MirrorKeepsTheRanksInStepAndLagSpreadsThem) {
  const model::Forward& forward = *testing::golden_model().forward;
  const MirrorLagConfig c = small_config();
  const MirrorLagRun mirror = run_mirror_lag(forward, c, 0);
  const MirrorLagRun lag = run_mirror_lag(forward, c, 3);
  // Rank 1's copies arrive after every step of rank 0's: the ranks run one after the other.
  const MirrorLagRun apart = run_mirror_lag(forward, c, 1000);

  EXPECT_EQ(mirror.idle_rank_steps, 0);
  EXPECT_DOUBLE_EQ(mirror.dp_balance, 1.0);
  EXPECT_GT(mirror.steps, 0);
  // The same work in every run: the prompts and the generated tokens, on both ranks.
  const int64_t work = c.ranks * c.requests * (c.prompt_len + c.max_tokens - 1);
  EXPECT_EQ(mirror.tokens, work);
  EXPECT_EQ(lag.tokens, work);
  EXPECT_EQ(apart.tokens, work);

  EXPECT_GE(lag.idle_rank_steps, 3);  // rank 1 had nothing for its first three steps
  EXPECT_LT(lag.dp_balance, 1.0);
  EXPECT_EQ(apart.steps, 2 * mirror.steps);
  EXPECT_EQ(apart.idle_rank_steps, apart.steps);  // always exactly one rank idle
  EXPECT_DOUBLE_EQ(apart.dp_balance, 0.5);

  EXPECT_TRUE(copies_agree(c, {mirror, lag, apart}));
  for (int64_t i = 0; i < c.requests; ++i) {
    const auto prompt = random_tokens(c.prompt_len, forward.config().vocab_size, c.seed + i);
    EXPECT_EQ(mirror.outputs[size_t(i)], runtime::engine_greedy(forward, prompt, c.max_tokens))
        << "request " << i;
  }
}

TEST(MirrorLagBench, CopiesThatDifferAreCaught) {
  MirrorLagConfig c = small_config();
  MirrorLagRun run;
  run.outputs = {{1, 2}, {3}, {1, 2}, {3}};
  EXPECT_TRUE(copies_agree(c, {run}));
  run.outputs[3] = {4};  // rank 1's copy of request 1
  EXPECT_FALSE(copies_agree(c, {run}));
}

TEST(MirrorLagBench, BadShapesAreRefusedByName) {
  MirrorLagConfig c = small_config();
  c.lags = {0};
  EXPECT_THROW(c.validate(), Error);
  c = small_config();
  c.requests = 0;
  EXPECT_THROW(c.validate(), Error);
}

}  // namespace
}  // namespace troupe::bench
