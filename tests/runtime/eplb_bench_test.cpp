// `troupe bench eplb` and its synthetic router: routes are distinct experts in range, do
// not depend on the thread count, window counts add up the steps' routes, Zipf skews the
// load; the bench's rows on a small shape; the CLI prints its rows and exits 2 on bad flags.
#include "bench/eplb/eplb_bench.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "bench/eplb/routing_sim.h"
#include "kernels/check.h"
#include "kernels/parallel.h"
#include "support/run_troupe.h"

namespace troupe::bench {
namespace {

TEST(EplbRoutingSim, DistinctExpertsInRange) {
  const RoutingSim sim({.layers = 3, .experts = 17, .top_k = 6, .zipf = 1.5, .seed = 4});
  const std::vector<int16_t> r = sim.route_step(0, 33);
  ASSERT_EQ(r.size(), size_t(3 * 33 * 6));
  for (size_t t = 0; t < r.size(); t += 6) {
    const std::set<int16_t> picked(r.begin() + t, r.begin() + t + 6);
    EXPECT_EQ(picked.size(), 6u) << "token " << t / 6;
    EXPECT_GE(*picked.begin(), 0);
    EXPECT_LT(*picked.rbegin(), 17);
  }
  // top_k == experts: every token takes every expert once.
  const RoutingSim all({.layers = 1, .experts = 3, .top_k = 3, .zipf = 0.8, .seed = 1});
  const std::vector<int16_t> a = all.route_step(5, 4);
  for (size_t t = 0; t < a.size(); t += 3)
    EXPECT_EQ(std::set<int16_t>(a.begin() + t, a.begin() + t + 3), (std::set<int16_t>{0, 1, 2}));
}

TEST(EplbRoutingSim, SameRoutesForAnyThreadCount) {
  const RoutingSim sim({.layers = 5, .experts = 64, .top_k = 4, .zipf = 0.8, .seed = 9});
  kernels::set_num_threads(1);
  const std::vector<int16_t> one = sim.route_step(3, 50);
  const std::vector<float> w1 = sim.window_counts(0, 3, 50);
  kernels::set_num_threads(2);
  EXPECT_EQ(sim.route_step(3, 50), one);
  EXPECT_EQ(sim.window_counts(0, 3, 50), w1);
  kernels::set_num_threads(0);
  EXPECT_NE(sim.route_step(4, 50), one);  // another step draws other routes
}

TEST(EplbRoutingSim, WindowCountsAddUpTheSteps) {
  const RoutingSim sim({.layers = 2, .experts = 31, .top_k = 3, .zipf = 0.0, .seed = 2});
  std::vector<float> expect(2 * 31, 0.0f);
  for (int64_t step = 4; step < 7; ++step) {
    const std::vector<int16_t> r = sim.route_step(step, 10);
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t i = 0; i < 30; ++i) expect[l * 31 + r[l * 30 + i]] += 1;
  }
  const std::vector<float> got = sim.window_counts(4, 3, 10);
  EXPECT_EQ(got, expect);
  EXPECT_EQ(std::accumulate(got.begin(), got.end(), 0.0f), 2.0f * 3 * 10 * 3);
}

TEST(EplbRoutingSim, ZipfSkewsTheLoad) {
  const auto max_share = [](double zipf) {
    const RoutingSim sim({.layers = 1, .experts = 64, .top_k = 2, .zipf = zipf, .seed = 3});
    const std::vector<float> w = sim.window_counts(0, 4, 500);
    return *std::max_element(w.begin(), w.end()) / std::accumulate(w.begin(), w.end(), 0.0f);
  };
  EXPECT_LT(max_share(0.0), 2.0 / 64);  // uniform: near 1/64 each
  EXPECT_GT(max_share(1.2), 6.0 / 64);  // the top expert of a Zipf load: far above
}

TEST(EplbBench, SmallRunRows) {
  EplbBenchConfig c;
  c.layers = 2;
  c.experts = 32;
  c.tokens_per_gpu = 16;
  c.window_steps = 4;
  c.eval_steps = 2;
  c.repeats = 2;
  c.zipf = 1.2;
  c.topologies = {{40, 1, 1, 4}, {48, 1, 1, 8}};
  const std::vector<EplbBenchRow> rows = run_eplb_bench(c);
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[0].routing, "zipf 1.20");
  EXPECT_EQ(rows[3].routing, "uniform");
  EXPECT_EQ(rows[1].topology.num_gpus, 8);
  for (const EplbBenchRow& r : rows) {
    EXPECT_EQ(r.plan_cpu_ms.size(), 2u);
    for (const double b : {r.before, r.after, r.dispatched, r.after_min}) {
      EXPECT_GT(b, 0.0);
      EXPECT_LE(b, 1.0);
    }
    EXPECT_LE(r.after_min, r.after);
  }
  EXPECT_GT(rows[0].after, rows[0].before);  // the plan helps the skewed load
  EXPECT_GT(rows[1].after, rows[1].before);
}

TEST(EplbBenchCli, PrintsRowsAndRejectsBadFlags) {
  const auto ok = testing::run_troupe(
      "bench eplb --layers 2 --window-steps 2 --eval-steps 1 --repeats 1 --tokens-per-gpu 4");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("zipf 0.80     32    416"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("uniform       64    448"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("0.35 -> 0.94"), std::string::npos) << ok.out;

  const auto bad = testing::run_troupe("bench eplb --zipf -1");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--zipf must be >= 0"), std::string::npos) << bad.out;
  const auto top_k = testing::run_troupe("bench eplb --experts 8 --top-k 9");
  EXPECT_EQ(top_k.status, 2) << top_k.out;
  EXPECT_NE(top_k.out.find("--top-k"), std::string::npos) << top_k.out;
  const auto unknown = testing::run_troupe("bench eplb --gpus 32");
  EXPECT_EQ(unknown.status, 2) << unknown.out;
  EXPECT_NE(unknown.out.find("gpus"), std::string::npos) << unknown.out;
}

}  // namespace
}  // namespace troupe::bench
