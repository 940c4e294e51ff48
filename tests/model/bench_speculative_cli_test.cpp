// `troupe bench forward --speculative` end to end on the golden tiny model: a plain row and
// one oracle row per acceptance p for each batch size, the plain accepted length exactly 1,
// the oracle's above 1 (figures are not checked: no timing in tests); the bench itself
// throws if the speculative tokens differ from plain decoding. Bad flags exit 2.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "runtime/speculative/speculative_config.h"
#include "support/golden.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

std::vector<std::vector<std::string>> rows_starting_with_a_number(const std::string& out) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] < '0' || line[0] > '9') continue;
    std::istringstream words(line);
    std::vector<std::string> row;
    for (std::string w; words >> w;) row.push_back(w);
    rows.push_back(row);
  }
  return rows;
}

TEST(BenchSpeculativeCli, PlainAndOracleRowsPerBatch) {
  const RunResult r = run_troupe("bench forward --speculative --model " + golden_dir() +
                                 " --batches 1,3 --acceptance 0.9 --context 8 --new-tokens 8");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("TEST ORACLE"), std::string::npos) << r.out;
  const auto rows = rows_starting_with_a_number(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  // batch, mode (1 or 2 words), steps, tok/step, accept len, tok/s/user, tok/s total, speedup
  EXPECT_EQ(rows[0][0], "1");
  EXPECT_EQ(rows[0][1], "plain");
  EXPECT_EQ(rows[0][4], "1.000");
  EXPECT_EQ(rows[1][1] + " " + rows[1][2], "oracle p=0.9");
  EXPECT_GT(std::stod(rows[1][5]), 1.5) << r.out;  // accepted length
  EXPECT_LT(std::stoll(rows[1][3]), std::stoll(rows[0][2])) << "fewer steps than plain";
  EXPECT_EQ(rows[2][0], "3");
  EXPECT_EQ(rows[3][0], "3");
}

// --adaptive: per batch also the online cost table on each p and the golden checkpoint's
// DSpark draft with fixed and adaptive k (the bench throws if any run's tokens differ from
// plain decoding), then the measured step times as a speculative-config seed that parses.
TEST(BenchSpeculativeCli, AdaptiveAndDsparkRowsAndASeed) {
  const RunResult r = run_troupe("bench forward --speculative --adaptive --model " + golden_dir() +
                                 " --batches 2 --acceptance 0.9 --context 8 --new-tokens 12");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto rows = rows_starting_with_a_number(r.out);
  ASSERT_EQ(rows.size(), 5u) << r.out;
  const std::vector<std::string> modes = {"plain", "oracle p=0.9", "adaptive p=0.9", "dspark k=3",
                                          "dspark adaptive"};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i][0], "2");
    EXPECT_EQ(i == 0 ? rows[i][1] : rows[i][1] + " " + rows[i][2], modes[i]) << r.out;
  }
  const size_t at = r.out.find("\"step_seconds\": ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string seed = r.out.substr(at, r.out.find('\n', at) - at);
  const runtime::SpeculativeConfig c = runtime::parse_speculative_config(
      R"({"method": "dspark", "num_speculative_tokens": 3, "adaptive": true, )" + seed + "}");
  EXPECT_EQ(c.step_seconds.size(), 4u) << seed;  // batch 2, k = 0..3
}

// The cells of the profile table's line `| name | a | b | ... |`, or empty.
std::vector<std::string> profile_cells(const std::string& out, const std::string& name) {
  const size_t at = out.find("\n| " + name + " |");
  if (at == std::string::npos) return {};
  std::istringstream line(out.substr(at + 1, out.find('\n', at + 1) - at - 1));
  std::vector<std::string> cells;
  for (std::string cell; std::getline(line, cell, '|');) cells.push_back(cell);
  return {cells.begin() + 2, cells.end()};  // past the empty first cell and the name
}

// --profile: per batch, ms per decode step by op for every mode, the draft's ops apart:
// plain and the oracle run no draft network (its rows 0, and no DSpark feature rows in
// the target's forward), DSpark's does.
TEST(BenchSpeculativeCli, ProfileCountsTheDraftsOpsApart) {
  const RunResult r = run_troupe("bench forward --speculative --adaptive --profile --model " +
                                 golden_dir() +
                                 " --batches 2 --acceptance 0.9 --context 8 --new-tokens 12");
  ASSERT_EQ(r.status, 0) << r.out;
  ASSERT_NE(r.out.find("batch 2: ms per decode step by op"), std::string::npos) << r.out;
  for (const char* op : {"routed experts", "dspark features", "draft: routed experts",
                         "draft: attn query", "draft: head", "draft (all)", "step"}) {
    SCOPED_TRACE(op);
    const std::vector<std::string> ms = profile_cells(r.out, op);
    ASSERT_EQ(ms.size(), 5u) << r.out;  // plain, oracle, adaptive, dspark k=3, dspark adaptive
    const bool draft_op = std::string(op).starts_with("draft") || std::string(op) == "dspark features";
    for (size_t i = 0; i < ms.size(); ++i) {
      const double v = std::stod(ms[i]);
      if (!draft_op || i == 3) {
        EXPECT_GT(v, 0.0) << i << "\n" << r.out;
      } else if (i == 0) {
        EXPECT_EQ(v, 0.0) << r.out;  // plain: no draft
      }
    }
  }
}

TEST(BenchSpeculativeCli, BadFlagsExitTwo) {
  const std::string model = " --model " + golden_dir();
  expect_usage_errors({
      {"bench forward --speculative" + model + " --acceptance 1.5", "--acceptance expects probabilities"},
      {"bench forward --speculative" + model + " --batches 0", "--batches must be at least 1"},
      {"bench forward --speculative" + model + " --num-speculative 0", "--num-speculative must be at least 1"},
  });
}

}  // namespace
}  // namespace troupe::testing
