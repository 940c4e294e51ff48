// `troupe bench engine` and `troupe bench replay` end to end on the golden tiny model:
// the tables have their columns and one row per run with the token counts the workload
// and the engine's rules imply (no timing assertions), and bad flags exit 2 naming the flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/golden.h"
#include "support/markdown_table.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

using Row = std::vector<std::string>;

TEST(BenchEngineCli, EnginePrintsPrefillAndDecodeTables) {
  // Prefix 64 = 4 blocks of 16; the golden model's SWA window is 16 tokens, so a hit
  // replays 16 tokens before the boundary and computes 16 + 8 per request.
  const RunResult r = run_troupe("bench engine --model " + golden_dir() +
                                 " --batch 2 --context 16,48 --new-tokens 8 --cached-prefix 64"
                                 " --decode-steps 2 --repeats 1 --block-size 16 --threads 2"
                                 " --prefix-replay window");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("machine limits"), std::string::npos) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 2u) << r.out;  // prefill, decode
  Row header = tables[0][0];
  const std::vector<Row> prefill(tables[0].begin() + 1, tables[0].end());
  EXPECT_EQ(header, (Row{"prefix cache", "requests", "prompt tokens", "cached tokens",
                         "computed tokens", "steps", "median ms", "min ms", "max ms",
                         "new tokens/s", "computed tokens/s", "sched CPU us/step"}));
  ASSERT_EQ(prefill.size(), 2u) << r.out;
  const Row want_on = {"on", "2", "144", "128", "48", "1"},
            want_off = {"off", "2", "144", "0", "144", "1"};
  for (int i = 0; i < 2; ++i) {
    const Row& row = prefill[i];
    const Row& want = i == 0 ? want_on : want_off;
    ASSERT_EQ(row.size(), header.size()) << r.out;
    for (size_t c = 0; c < want.size(); ++c)
      EXPECT_EQ(row[c], want[c]) << header[c] << "\n" << r.out;
    for (size_t c = 6; c < row.size(); ++c) EXPECT_GT(std::stod(row[c]), 0.0) << header[c];
  }
  header = tables[1][0];
  const std::vector<Row> decode(tables[1].begin() + 1, tables[1].end());
  EXPECT_EQ(header,
            (Row{"context", "batch", "steps", "median ms", "min ms", "max ms", "executor ms",
                 "sched CPU us", "sched share", "tokens/s", "vs first context"}));
  ASSERT_EQ(decode.size(), 2u) << r.out;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(decode[i].size(), header.size()) << r.out;
    EXPECT_EQ(decode[i][0], i == 0 ? "16" : "48");
    EXPECT_EQ(decode[i][1], "2");
    EXPECT_EQ(decode[i][2], "2");  // decode steps
    for (size_t c = 3; c <= 6; ++c) EXPECT_GT(std::stod(decode[i][c]), 0.0) << header[c];
  }
  EXPECT_EQ(decode[0][10], "1.00x");
}

TEST(BenchEngineCli, ReplayPrintsCachedAndBaselineRows) {
  const RunResult r = run_troupe("bench replay --model " + golden_dir() +
                                 " --conversations 2 --turns 3 --system-len 32 --user-len 8"
                                 " --output-len 4 --block-size 16 --threads 2"
                                 " --prefix-replay window");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto tables = markdown_tables(r.out);
  ASSERT_EQ(tables.size(), 1u) << r.out;
  const std::vector<Row>& rows = tables[0];
  ASSERT_EQ(rows.size(), 3u) << r.out;  // header, on, off
  const Row header = {
      "prefix cache",  "turns",         "input tokens",    "cached input",      "uncached input",
      "output tokens", "hit rate",      "computed tokens", "SWA replay tokens", "steps",
      "preemptions",   "sched ms/step", "wall s",          "cached in tok/s",   "uncached in tok/s",
      "output tok/s",  "total tok/s"};
  EXPECT_EQ(rows[0], header);
  // Prompts 40, 52, 64 per conversation. With the cache, turn 1 reuses the 2 full blocks
  // of turn 0's 43 computed tokens (its last output token is never fed back), turn 2 the
  // 3 full blocks of 55; the first turns run in the same step, so nothing is shared
  // between conversations. Each hit replays 16 window tokens. Computed = uncached input
  // + replay + 3 decodes per turn.
  const Row want_on = {"on", "6", "312", "160", "152", "24", "51.3%", "234", "64"};
  const Row want_off = {"off", "6", "312", "0", "312", "24", "0.0%", "330", "0"};
  for (int i = 0; i < 2; ++i) {
    const Row& row = rows[i + 1];
    const Row& want = i == 0 ? want_on : want_off;
    ASSERT_EQ(row.size(), header.size()) << r.out;
    for (size_t c = 0; c < want.size(); ++c)
      EXPECT_EQ(row[c], want[c]) << header[c] << "\n" << r.out;
    EXPECT_EQ(row[10], "0");  // preemptions: the default budget holds everything
    EXPECT_GT(std::stod(row[12]), 0.0);
  }
  EXPECT_NE(r.out.find("wall time without / with the prefix cache"), std::string::npos);
}

TEST(BenchEngineCli, BadFlagsExitTwoNamingTheFlag) {
  const std::string model = " --model " + golden_dir();
  const struct {
    std::string args, needle;
  } cases[] = {
      {"bench engine" + model + " --batch 0", "--batch must be at least 1"},
      {"bench engine" + model + " --context 0", "--context must be at least 1"},
      {"bench engine" + model + " --context 16,x", "--context expects integers"},
      {"bench engine" + model + " --new-tokens 0", "--new-tokens must be at least 1"},
      {"bench engine" + model + " --cached-prefix -1", "--cached-prefix must be at least 0"},
      {"bench engine" + model + " --decode-steps 0", "--decode-steps must be at least 1"},
      {"bench engine" + model + " --repeats 0", "--repeats must be at least 1"},
      {"bench engine" + model + " --threads 0", "--threads must be at least 1"},
      {"bench engine" + model + " --kv-budget-mb 0", "--kv-budget-mb must be at least 1"},
      {"bench engine" + model + " --kv-budget-mb 1 --batch 64", "--kv-budget-mb 1"},
      {"bench engine" + model + " --block-size 3", "--block-size 3"},
      {"bench engine" + model + " --context 4095", "--context 4095 + --decode-steps"},
      {"bench engine" + model + " --cached-prefix 4000 --new-tokens 96",
       "--cached-prefix + --new-tokens"},
      {"bench engine --bogus 1", "unknown flag --bogus"},
      {"bench replay" + model + " --conversations 0", "--conversations must be at least 1"},
      {"bench replay" + model + " --turns 0", "--turns must be at least 1"},
      {"bench replay" + model + " --system-len -1", "--system-len must be at least 0"},
      {"bench replay" + model + " --user-len 0", "--user-len must be at least 1"},
      {"bench replay" + model + " --output-len 0", "--output-len must be at least 1"},
      {"bench replay" + model + " --max-running 0", "--max-running must be at least 1"},
      {"bench replay" + model + " --seed x", "--seed expects an integer"},
      {"bench replay" + model + " --turns 100 --system-len 4000",
       "--output-len = 7200 tokens is beyond"},
      {"bench replay extra", "unexpected argument 'extra'"},
      {"bench", "available: forward, engine, replay"},
  };
  for (const auto& c : cases) {
    const RunResult r = run_troupe(c.args);
    EXPECT_EQ(r.status, 2) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.needle), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace troupe::testing
