// `troupe bench forward --dep` end to end on the golden tiny model: one row for the plain
// baseline and one per rank count, and the rows each step routes add up to what the batch
// implies (every pick of every token goes to exactly one rank); bad lists exit 2.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "support/golden.h"
#include "support/run_troupe.h"

namespace troupe::testing {
namespace {

// The whitespace-separated fields of the table row whose first field is `name`.
std::vector<std::string> row_of(const std::string& out, const std::string& name) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::vector<std::string> f;
    for (std::string x; fields >> x;) f.push_back(x);
    if (!f.empty() && f[0] == name && f.size() >= 11 && f[1] != "(plain)") return f;
  }
  return {};
}

TEST(BenchDepCli, RowsPerRankCountAndRoutedRowsAddUp) {
  const RunResult r = run_troupe("bench forward --model " + golden_dir() +
                                 " --dep 1,2,3 --batch 3 --context 8 --new-tokens 2 --threads 2");
  ASSERT_EQ(r.status, 0) << r.out;
  const auto& c = golden_model().config;
  const double per_step = 3.0 * double(c.top_k * c.num_hidden_layers);  // B tokens x picks x layers
  for (const char* ranks : {"1", "2", "3"}) {
    const auto f = row_of(r.out, ranks);
    ASSERT_FALSE(f.empty()) << "no row for " << ranks << " ranks\n" << r.out;
    const double sent = std::stod(f[9]), kept = std::stod(f[10]);
    EXPECT_EQ(sent + kept, per_step) << ranks << " ranks\n" << r.out;
    if (std::string(ranks) == "1") EXPECT_EQ(sent, 0.0);  // nowhere to send
    else EXPECT_GT(sent, 0.0);
    EXPECT_GT(std::stod(f[1]), 0.0);  // step ms
    EXPECT_GE(std::stod(f[4]), 0.0);  // dp sync ms
  }
  EXPECT_NE(r.out.find("1 (plain)"), std::string::npos) << r.out;
}

TEST(BenchDepCli, BadRankListsExit2) {
  for (const char* bad : {"--dep 0", "--dep 2,x", "--dep -1"}) {
    const RunResult r = run_troupe("bench forward --model " + golden_dir() + " " + bad);
    EXPECT_EQ(r.status, 2) << bad << "\n" << r.out;
  }
}

}  // namespace
}  // namespace troupe::testing
