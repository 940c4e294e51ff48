// Recorded routing (runtime/eplb/counts_trace.h) and `troupe bench eplb --counts`: a
// recording reads back as written; a bad line is an error naming the file and line; the
// bench plans on the recording's window and raises the balance of a skewed recording on
// the steps after it; the CLI prints the recorded and synthetic rows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "bench/eplb/eplb_counts_bench.h"
#include "kernels/check.h"
#include "runtime/eplb/counts_trace.h"
#include "support/run_troupe.h"

namespace troupe::runtime::eplb {
namespace {

std::string temp_path(const char* name) {
  return "/tmp/troupe-" + std::to_string(::getpid()) + "-" + name;
}

// A skewed recording: in every layer expert (l + s) % 3 == 0 takes most tokens, and the
// hot set is the same every step, so a plan from the first steps fits the later ones.
std::vector<int64_t> skewed_step(int64_t L, int64_t E, int64_t step) {
  std::vector<int64_t> c(L * E);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t e = 0; e < E; ++e) c[l * E + e] = (e % 4 == 0 ? 40 : 2) + (e + step + l) % 3;
  return c;
}

TEST(CountsTrace, ReadsBackWhatTheRecorderWrote) {
  const std::string path = temp_path("counts.jsonl");
  std::remove(path.c_str());
  {
    CountsRecorder r(path);
    for (int64_t s = 0; s < 3; ++s) r.write(skewed_step(2, 8, s), 2, 8);
  }
  const std::vector<ExpertLoads> t = read_counts_trace(path);
  ASSERT_EQ(t.size(), 3u);
  for (int64_t s = 0; s < 3; ++s) {
    EXPECT_EQ(t[s].num_layers, 2);
    EXPECT_EQ(t[s].num_logical, 8);
    const std::vector<int64_t> want = skewed_step(2, 8, s);
    EXPECT_EQ(t[s].weight, std::vector<float>(want.begin(), want.end())) << "step " << s;
  }
  std::remove(path.c_str());
}

TEST(CountsTrace, BadLinesNameTheFileAndLine) {
  const std::string path = temp_path("bad.jsonl");
  const auto error_of = [&](const std::string& text) {
    std::ofstream(path) << text;
    try {
      read_counts_trace(path);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("[[1,2],[3,4]]\n\n[[1,2,3],[3,4,5]]\n").find(path + " line 3: 2 layers x 3 "
                                                                   "experts, the first step 2 x 2"),
            std::string::npos);
  EXPECT_NE(error_of("[[1,2]]\n[[1,-2]]\n").find(path + " line 2:"), std::string::npos);
  EXPECT_NE(error_of("").find("no steps recorded"), std::string::npos);
  std::remove(path.c_str());
  EXPECT_THROW(read_counts_trace(path), Error);  // no such file
  EXPECT_THROW(CountsRecorder("/nonexistent-dir/x.jsonl"), Error);
}

TEST(EplbCountsBench, PlansOnTheWindowAndRaisesTheBalanceOfASkewedRecording) {
  const int64_t L = 3, E = 16;
  std::vector<ExpertLoads> trace;
  for (int64_t s = 0; s < 12; ++s) {
    const auto c = skewed_step(L, E, s);
    trace.push_back({L, E, std::vector<float>(c.begin(), c.end())});
  }
  bench::EplbCountsBenchConfig c;
  c.gpus = {2, 4};
  c.window_steps = 4;
  c.eval_steps = 100;  // at most the 8 steps after the window
  c.top_k = 2;
  const bench::EplbCountsRun run = bench::run_eplb_counts_bench(trace, c);
  EXPECT_EQ(run.window, 4);
  EXPECT_EQ(run.eval, 8);
  ASSERT_EQ(run.rows.size(), 4u);  // recorded x 2, synthetic x 2
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(run.rows[i].routing, "recorded");
    EXPECT_GT(run.rows[i].after, run.rows[i].before) << "ranks " << run.rows[i].topology.num_gpus;
    EXPECT_LE(run.rows[i].after, 1.0);
    EXPECT_EQ(run.rows[i].topology.num_physical, E + c.gpus[i]);  // one redundant slot per rank
  }
  EXPECT_EQ(run.rows[2].routing, "zipf 0.80 (synthetic)");
  EXPECT_THROW(bench::run_eplb_counts_bench({trace.front()}, c), Error);  // no steps after
}

TEST(EplbCountsBenchCli, PrintsRecordedAndSyntheticRows) {
  const std::string path = temp_path("cli.jsonl");
  std::remove(path.c_str());
  {
    CountsRecorder r(path);
    for (int64_t s = 0; s < 6; ++s) r.write(skewed_step(2, 8, s), 2, 8);
  }
  const auto ok = testing::run_troupe("bench eplb --counts " + path + " --gpus 2 --top-k 2");
  ASSERT_EQ(ok.status, 0) << ok.out;
  EXPECT_NE(ok.out.find("recorded: 6 steps, 2 MoE layers x 8 experts"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("recorded                   2     10"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("zipf 0.80 (synthetic)      2     10"), std::string::npos) << ok.out;
  const auto bad = testing::run_troupe("bench eplb --counts " + path + " --top-k 9");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("--top-k 9 exceeds"), std::string::npos) << bad.out;
  std::remove(path.c_str());
}

}  // namespace
}  // namespace troupe::runtime::eplb
