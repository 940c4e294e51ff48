// `troupe bench forward` end to end on the golden tiny model: the table has its
// columns and one row per step kind with the right token counts and sample counts
// (figures are not checked: no timing in tests), and bad flags exit 2 with a message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/golden.h"
#include "support/markdown_table.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

TEST(BenchCli, ForwardPrintsTheTable) {
  const RunResult r = run_troupe("bench forward --model " + golden_dir() +
                                 " --batch 2 --context 8 --new-tokens 2 --repeats 1");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("machine limits"), std::string::npos) << r.out;
  const auto rows = table_rows(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;  // header, prefill, decode
  const std::vector<std::string> header = {
      "step",       "tokens/step", "median ms", "min ms", "max ms",  "samples",   "tokens/s",
      "weights MB", "KV MB",       "GFLOP",     "GB/s",   "GFLOP/s", "% of limit"};
  EXPECT_EQ(rows[0], header);
  const struct {
    std::string step, tokens, samples, bound;
  } want[] = {{"prefill", "16", "1", "fp32"}, {"decode", "2", "2", "DRAM"}};
  for (int i = 0; i < 2; ++i) {
    const auto& row = rows[i + 1];
    ASSERT_EQ(row.size(), header.size()) << r.out;
    EXPECT_EQ(row[0], want[i].step);
    EXPECT_EQ(row[1], want[i].tokens);
    EXPECT_EQ(row[5], want[i].samples);
    // Times, tokens/s and the step's bytes and FLOPs are positive; the rates are
    // printed to 0.1 and may round to 0 on a slow, loaded machine.
    for (int col = 2; col <= 9; ++col) EXPECT_GT(std::stod(row[col]), 0.0) << header[col];
    for (int col = 10; col <= 11; ++col) EXPECT_GE(std::stod(row[col]), 0.0) << header[col];
    // Empty only where the machine lacks the probe's instructions (fp32 peak needs AVX-512).
    if (!row[12].empty()) {
      EXPECT_NE(row[12].find("% " + want[i].bound), std::string::npos);
    }
  }
}

TEST(BenchCli, BadFlagsExitTwoWithAClearMessage) {
  const std::string model = " --model " + golden_dir();
  expect_usage_errors({
      {"bench forward" + model + " --batch 0", "--batch must be at least 1"},
      {"bench forward" + model + " --context 0", "--context must be at least 1"},
      {"bench forward" + model + " --context 4097", "beyond max_position_embeddings 4096"},
      {"bench forward" + model + " --context 4000 --new-tokens 97", "--new-tokens 97 is beyond"},
      {"bench forward" + model + " --new-tokens -1", "--new-tokens must be at least 0"},
      {"bench forward" + model + " --repeats 0", "--repeats must be at least 1"},
      {"bench forward" + model + " --threads 0", "--threads must be at least 1"},
      {"bench forward" + model + " --batch x", "expects an integer"},
      {"bench forward --bogus 1", "unknown flag --bogus"},
      {"bench", "available: forward"},
      {"bench kernels", "unknown benchmark 'kernels'; available: forward"},
  });
}

}  // namespace
}  // namespace troupe::testing
