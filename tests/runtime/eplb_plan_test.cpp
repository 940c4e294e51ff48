// `troupe eplb plan` and what it is made of: the routing-trace reader
// (runtime/eplb/expert_loads_json), the "before" balance (runtime/eplb/plan_report), and
// the CLI end to end: its JSON conserves experts and slots per rank, raises the balance of
// a skewed trace, and equals the planner functions called here directly; bad input exits 2
// with a message naming what is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "runtime/eplb/balance.h"
#include "runtime/eplb/expert_loads_json.h"
#include "runtime/eplb/plan_report.h"
#include "runtime/eplb/rebalance.h"
#include "support/run_troupe.h"

namespace troupe::runtime::eplb {
namespace {

using nlohmann::json;

// A file under the test's temp dir holding `text`, removed with the object.
struct TempFile {
  std::filesystem::path path;
  explicit TempFile(const std::string& name, const std::string& text)
      : path(std::filesystem::path(::testing::TempDir()) /
             (std::to_string(getpid()) + "-" + name)) {
    std::ofstream(path) << text;
  }
  ~TempFile() { std::filesystem::remove(path); }
};

// [L][n] Zipf-like token counts with a per-layer shuffle of the popular experts.
std::vector<std::vector<int64_t>> skewed_trace(int64_t L, int64_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<std::vector<int64_t>> w(L, std::vector<int64_t>(n));
  for (auto& row : w) {
    for (int64_t e = 0; e < n; ++e) row[e] = static_cast<int64_t>(4000.0 / std::pow(e + 1, 1.1));
    std::shuffle(row.begin(), row.end(), gen);
  }
  return w;
}

std::vector<float> flat(const std::vector<std::vector<int64_t>>& w) {
  std::vector<float> out;
  for (const auto& row : w) out.insert(out.end(), row.begin(), row.end());
  return out;
}

std::vector<int64_t> flat_json(const json& j) {
  std::vector<int64_t> out;
  for (const json& row : j)
    for (const json& x : row) {
      if (x.is_array())
        for (const json& y : x) out.push_back(y.get<int64_t>());
      else
        out.push_back(x.get<int64_t>());
    }
  return out;
}

TEST(EplbLoadsJson, ReadsRowsAsF32) {
  const ExpertLoads l = parse_expert_loads_json(" [[1, 2.5, 0], [3e2, 7, 18446744073709551615]] ");
  EXPECT_EQ(l.num_layers, 2);
  EXPECT_EQ(l.num_logical, 3);
  EXPECT_EQ(l.weight, (std::vector<float>{1, 2.5f, 0, 300, 7, 18446744073709551615.0f}));
}

TEST(EplbLoadsJson, BadInputNamesWhatIsWrong) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "not valid JSON at byte 1"},
      {"[[1, 2]", "not valid JSON"},
      {"[[1, 2]] [", "not valid JSON"},
      {"[[1e400]]", "not valid JSON"},
      {"{\"a\": 1}", "got an object"},
      {"[]", "no layers"},
      {"[[]]", "layer 0 has no experts"},
      {"[1, 2]", "layer 0 is a number"},
      {"[[1, 2], [3]]", "layer 1 has 1 experts, layer 0 has 2"},
      {"[[1, 2], [3, 4, 5]]", "layer 1 has more than 2 experts"},
      {"[[1, -2]]", "weight[0][1] = -2 is not a finite count >= 0"},
      {"[[0, 1.5e39]]", "weight[0][1] = 1.5e39 is not a finite count"},
      {"[[1, \"3\"]]", "weight[0][1] is a string"},
      {"[[true]]", "weight[0][0] is a boolean"},
      {"[[null]]", "weight[0][0] is null"},
      {"[[[1]]]", "weight[0][0] is a nested array"},
      {std::string(100000, '['), "weight[0][0] is a nested array"},
  };
  for (const auto& [text, needle] : cases) {
    try {
      parse_expert_loads_json(text);
      ADD_FAILURE() << "accepted: " << text.substr(0, 40);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << text.substr(0, 40) << " -> " << e.what();
    }
  }
}

TEST(EplbPlanReport, BeforeIsTheUnreplicatedPlacementWhenRanksDivideExperts) {
  const auto w = skewed_trace(3, 24, 5);
  const ExpertLoads loads{3, 24, flat(w)};
  for (const int64_t R : {1, 2, 3, 4, 6, 8, 24})
    EXPECT_EQ(unreplicated_balances(loads, R),
              layer_balances(unreplicated_placement(3, 24), loads.weight, R))
        << "R " << R;
}

TEST(EplbPlanReport, BeforeSplitsUnevenExpertsContiguously) {
  // 5 experts on 2 ranks: e div 2.5 puts 0, 1, 2 on rank 0 and 3, 4 on rank 1.
  const ExpertLoads loads{1, 5, {1, 2, 3, 10, 20}};
  const double r0 = 1 + 2 + 3, r1 = 10 + 20;
  EXPECT_DOUBLE_EQ(unreplicated_balances(loads, 2)[0], (r0 + r1) / 2 / r1);
}

class EplbPlanCli : public ::testing::Test {
 protected:
  // Runs the CLI; on success the parsed JSON.
  json plan(const std::string& weights_path, const std::string& flags) {
    const auto r = testing::run_troupe("eplb plan --weights " + weights_path + " " + flags);
    EXPECT_EQ(r.status, 0) << r.out;
    return r.status == 0 ? json::parse(r.out) : json();
  }
};

TEST_F(EplbPlanCli, ConservesExpertsAndSlotsAndEqualsThePlannerCalledDirectly) {
  const int64_t L = 4, n = 32;
  const auto w = skewed_trace(L, n, 11);
  const TempFile file("skewed.json", json(w).dump());
  for (const auto& [N, R, nodes] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {40, 4, 1}, {40, 8, 2}, {33, 3, 1}, {32, 1, 1}}) {
    SCOPED_TRACE("N " + std::to_string(N) + " R " + std::to_string(R));
    const json out = plan(file.path.string(), "--replicas " + std::to_string(N) + " --ranks " +
                                                  std::to_string(R) + " --nodes " +
                                                  std::to_string(nodes));
    ASSERT_TRUE(out.is_object());
    ASSERT_EQ(out["phy2log"].size(), size_t(L));
    for (int64_t l = 0; l < L; ++l) {
      const auto& phy2log = out["phy2log"][l];
      ASSERT_EQ(phy2log.size(), size_t(N));  // N / R slots on each of the R ranks
      std::vector<int64_t> copies(n, 0);
      for (const json& e : phy2log) ++copies.at(e.get<int64_t>());
      double placed = 0, total = 0;
      for (int64_t e = 0; e < n; ++e) {
        EXPECT_GE(copies[e], 1) << "layer " << l << " expert " << e << " has no slot";
        EXPECT_EQ(out["logcnt"][l][e].get<int64_t>(), copies[e]);
        total += w[l][e];
        placed += copies[e] * (double(w[l][e]) / copies[e]);
        for (int64_t k = 0; k < copies[e]; ++k)
          EXPECT_EQ(phy2log[out["log2phy"][l][e][k].get<int64_t>()].get<int64_t>(), e);
      }
      EXPECT_NEAR(placed, total, 1e-6 * total);  // every token still has an expert
      EXPECT_GE(out["balance_after"][l].get<double>(), out["balance_before"][l].get<double>());
    }
    const ExpertLoads loads{L, n, flat(w)};
    const EplbTopology t{.num_physical = N, .num_groups = 1, .num_nodes = nodes, .num_gpus = R};
    const ExpertPlacement direct = rebalance_experts(loads.weight, L, n, t);
    EXPECT_EQ(flat_json(out["phy2log"]), direct.phy2log);
    EXPECT_EQ(flat_json(out["logcnt"]), direct.logcnt);
    EXPECT_EQ(flat_json(out["log2phy"]), direct.log2phy);
    EXPECT_EQ(out["balance_after"].get<std::vector<double>>(),
              layer_balances(direct, loads.weight, R));
    EXPECT_EQ(out["balance_before"].get<std::vector<double>>(), unreplicated_balances(loads, R));
    if (n % R == 0) {
      EXPECT_EQ(out["balance_before"].get<std::vector<double>>(),
                layer_balances(unreplicated_placement(L, n), loads.weight, R));
    }
  }
}

TEST_F(EplbPlanCli, SkewedTraceGainsBalance) {
  const auto w = skewed_trace(3, 64, 2);
  const TempFile file("skewed64.json", json(w).dump());
  const json out = plan(file.path.string(), "--replicas 80 --ranks 16");
  ASSERT_TRUE(out.is_object());
  for (size_t l = 0; l < 3; ++l) {
    EXPECT_LT(out["balance_before"][l].get<double>(), 0.5);
    EXPECT_GT(out["balance_after"][l].get<double>(), 0.8);
  }
}

// The deepseek-ai/EPLB README example through the CLI: hierarchical (4 groups, 2 nodes).
TEST_F(EplbPlanCli, HierarchicalExampleEqualsThePlanner) {
  const std::vector<std::vector<int64_t>> w = {
      {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
      {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27}};
  const TempFile file("readme.json", json(w).dump());
  const json out = plan(file.path.string(), "--replicas 16 --ranks 8 --nodes 2 --groups 4");
  ASSERT_TRUE(out.is_object());
  const EplbTopology t{.num_physical = 16, .num_groups = 4, .num_nodes = 2, .num_gpus = 8};
  EXPECT_EQ(flat_json(out["phy2log"]), rebalance_experts(flat(w), 2, 12, t).phy2log);
  EXPECT_EQ(out["phy2log"][0].get<std::vector<int64_t>>(),
            (std::vector<int64_t>{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1}));
  // The fields come in the order the command documents.
  const std::string text =
      testing::run_troupe("eplb plan --weights " + file.path.string() + " --replicas 16 --ranks 8")
          .out;
  size_t at = 0;
  for (const char* key : {"{\"phy2log\":", "\"log2phy\":", "\"logcnt\":", "\"balance_before\":",
                          "\"balance_after\":"}) {
    const size_t found = text.find(key, at);
    ASSERT_NE(found, std::string::npos) << key << " after byte " << at << ": " << text;
    at = found;
  }
}

TEST(EplbPlanCliErrors, BadInputExitsTwoNamingTheProblem) {
  const TempFile good("good.json", "[[5, 1, 1, 1], [1, 1, 1, 9]]");
  const TempFile ragged("ragged.json", "[[5, 1, 1, 1], [1, 1]]");
  const TempFile negative("negative.json", "[[5, -1, 1, 1]]");
  const TempFile garbage("garbage.json", "[[5, 1,");
  const std::string g = good.path.string();
  testing::expect_usage_errors({
      {"", "usage: troupe eplb plan"},
      {"show", "usage: troupe eplb plan"},
      {"plan --replicas 4 --ranks 2", "--weights is required"},
      {"plan --weights /nonexistent/w.json --replicas 4 --ranks 2", "cannot open"},
      {"plan --weights " + garbage.path.string() + " --replicas 4 --ranks 2", "not valid JSON"},
      {"plan --weights " + ragged.path.string() + " --replicas 4 --ranks 2",
       "layer 1 has 2 experts, layer 0 has 4"},
      {"plan --weights " + negative.path.string() + " --replicas 4 --ranks 2",
       "weight[0][1] = -1"},
      {"plan --weights " + g + " --ranks 2", "--replicas is required"},
      {"plan --weights " + g + " --replicas 4", "--ranks is required"},
      {"plan --weights " + g + " --replicas 3 --ranks 1", "--replicas 3 is below the 4"},
      {"plan --weights " + g + " --replicas 6 --ranks 4", "does not split evenly over --ranks 4"},
      {"plan --weights " + g + " --replicas 4 --ranks 0", "--ranks must be at least 1"},
      {"plan --weights " + g + " --replicas 8 --ranks 4 --nodes 3", "--nodes 3 does not divide"},
      {"plan --weights " + g + " --replicas 8 --ranks 4 --groups 3", "--groups 3 does not divide"},
      {"plan --weights " + g + " --replicas 4000000000 --ranks 2", "too large a plan"},
      {"plan --weights " + g + " --replicas x --ranks 2", "replicas"},
      {"plan --weights " + g + " --replicas 4 --ranks 2 --gpus 2", "gpus"},
      {"plan --weights " + g + " --replicas 4 --ranks 2 extra", "unexpected argument 'extra'"},
  }, "eplb ");
}

}  // namespace
}  // namespace troupe::runtime::eplb
