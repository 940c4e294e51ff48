// `troupe bench handoff` end to end on the golden tiny model: one table row per prompt
// length, more KV bytes for the longer prompt (its region holds more blocks), the bench's
// own round-trip check passed (exit 0); bad flags exit 2 naming the flag. No timing checks.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/golden.h"
#include "support/markdown_table.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

TEST(BenchHandoffCli, OneRowPerPromptLengthWithItsKvBytes) {
  const RunResult r = run_troupe("bench handoff --model " + golden_dir() +
                                 " --prompt-lens 16,100 --repeats 1 --block-size 16 --kv-budget-mb 16"
                                 " --threads 1");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 1u) << r.out;
  ASSERT_EQ(tables[0].size(), 3u) << r.out;  // header + 2 rows
  EXPECT_EQ(tables[0][0][0], "prompt");
  EXPECT_EQ(tables[0][1][0], "16");
  EXPECT_EQ(tables[0][2][0], "100");
  const double short_mb = std::stod(tables[0][1][1]), long_mb = std::stod(tables[0][2][1]);
  EXPECT_GT(short_mb, 0.0) << r.out;
  EXPECT_GT(long_mb, short_mb) << r.out;
}

TEST(BenchHandoffCli, BadFlagsNameTheFlag) {
  for (const std::string& bad : {std::string("--repeats 0"), std::string("--prompt-lens 0"),
                                 std::string("--threads 0"), std::string("--prompt-lens 100000")}) {
    const RunResult r = run_troupe("bench handoff --model " + golden_dir() + " " + bad);
    EXPECT_EQ(r.status, 2) << bad << ": " << r.out;
    EXPECT_NE(r.out.find(bad.substr(2, bad.find(' ') - 2)), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace troupe::testing
