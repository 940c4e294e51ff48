// `troupe eplb plan --weights W.json --replicas N --ranks R [--nodes A] [--groups G]`:
// the EPLB planner (runtime/eplb, MODEL.md §9) on anyone's routing trace. W.json holds
// `[[tokens per logical expert] per MoE layer]` (runtime/eplb/expert_loads_json.h); N is
// the physical expert slots per layer (logical experts + redundant replicas), R the EP
// ranks. Prints one JSON object:
//   {"phy2log": [L][N], "log2phy": [L][Nlog][max_cnt] (-1 padded), "logcnt": [L][Nlog],
//    "balance_before": [L], "balance_after": [L]}
// Bad input (unreadable file, bad JSON, ragged rows, negative counts, an N or R the planner
// cannot use) is a troupe::Error naming the flag or the entry: exit code 2.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "kernels/check.h"
#include "runtime/eplb/expert_loads_json.h"
#include "runtime/eplb/plan_report.h"

namespace troupe::cli {
namespace {

using runtime::eplb::EplbTopology;
using runtime::eplb::ExpertLoads;

// Bounds the output (log2phy has L·Nlog·max_cnt entries, max_cnt <= N - Nlog + 1): far
// above real shapes (61 layers x 256 experts x 288 slots), far below running out of memory.
constexpr int64_t kMaxEntries = int64_t{1} << 26;

ExpertLoads read_loads(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) TROUPE_FAIL("--weights: cannot open '" << path << "'");
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  if (in.bad()) TROUPE_FAIL("--weights: cannot read '" << path << "'");
  try {
    return runtime::eplb::parse_expert_loads_json(text);
  } catch (const Error& e) {
    TROUPE_FAIL("--weights " << path << ": " << e.what());
  }
}

int64_t required_int(const Args& a, const char* flag) {
  if (!a.has(flag)) TROUPE_FAIL("--" << flag << " is required");
  return a.get_int(flag, 0);
}

// The checks of EplbTopology::validate, worded with the flags.
EplbTopology topology_flags(const Args& a, const ExpertLoads& w) {
  EplbTopology t;
  t.num_physical = required_int(a, "replicas");
  t.num_gpus = required_int(a, "ranks");
  t.num_nodes = a.get_int("nodes", 1);
  t.num_groups = a.get_int("groups", 1);
  const int64_t n = w.num_logical;
  if (t.num_gpus < 1) TROUPE_FAIL("--ranks must be at least 1, got " << t.num_gpus);
  if (t.num_nodes < 1) TROUPE_FAIL("--nodes must be at least 1, got " << t.num_nodes);
  if (t.num_groups < 1) TROUPE_FAIL("--groups must be at least 1, got " << t.num_groups);
  if (t.num_physical < n)
    TROUPE_FAIL("--replicas " << t.num_physical << " is below the " << n
                              << " logical experts of --weights (every expert needs a slot)");
  if (t.num_physical % t.num_gpus != 0)
    TROUPE_FAIL("--replicas " << t.num_physical << " does not split evenly over --ranks "
                              << t.num_gpus << " (the slots per rank must be equal)");
  if (t.num_gpus % t.num_nodes != 0)
    TROUPE_FAIL("--nodes " << t.num_nodes << " does not divide --ranks " << t.num_gpus);
  if (n % t.num_groups != 0)
    TROUPE_FAIL("--groups " << t.num_groups << " does not divide the " << n << " logical experts");
  const int64_t redundant = t.num_physical - n;
  if (t.num_physical > kMaxEntries / w.num_layers ||
      (redundant + 1) > kMaxEntries / w.num_layers / n)
    TROUPE_FAIL("--replicas " << t.num_physical << " over " << w.num_layers << " layers of " << n
                              << " experts is too large a plan (over " << kMaxEntries
                              << " table entries)");
  return t;
}

nlohmann::ordered_json rows(const std::vector<int64_t>& flat, int64_t rows, int64_t cols) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (int64_t r = 0; r < rows; ++r)
    out.push_back(std::vector<int64_t>(flat.begin() + r * cols, flat.begin() + (r + 1) * cols));
  return out;
}

nlohmann::ordered_json report_json(const runtime::eplb::EplbPlanReport& r) {
  const auto& p = r.placement;
  nlohmann::ordered_json log2phy = nlohmann::ordered_json::array();
  for (int64_t l = 0; l < p.num_layers; ++l)
    log2phy.push_back(rows(std::vector<int64_t>(p.log2phy.begin() + l * p.num_logical * p.max_replicas,
                                                p.log2phy.begin() +
                                                    (l + 1) * p.num_logical * p.max_replicas),
                           p.num_logical, p.max_replicas));
  return {{"phy2log", rows(p.phy2log, p.num_layers, p.num_physical)},
          {"log2phy", std::move(log2phy)},
          {"logcnt", rows(p.logcnt, p.num_layers, p.num_logical)},
          {"balance_before", r.balance_before},
          {"balance_after", r.balance_after}};
}

int eplb_plan(const CommandArgs& argv) {
  Args a(argv, {"weights", "replicas", "ranks", "nodes", "groups"}, {});
  if (!a.positional().empty()) TROUPE_FAIL("unexpected argument '" << a.positional()[0] << "'");
  if (!a.has("weights")) TROUPE_FAIL("--weights is required (a JSON file of token counts)");
  const ExpertLoads loads = read_loads(*a.get("weights"));
  const EplbTopology topology = topology_flags(a, loads);
  const nlohmann::ordered_json out = report_json(runtime::eplb::make_plan_report(loads, topology));
  std::printf("%s\n", out.dump().c_str());
  return 0;
}

}  // namespace

int run_eplb(const CommandArgs& argv) {
  if (argv.empty() || argv[0] != "plan")
    TROUPE_FAIL("usage: troupe eplb plan --weights W.json --replicas N --ranks R [--nodes A] "
                "[--groups G]");
  return eplb_plan(CommandArgs(argv.begin() + 1, argv.end()));
}

}  // namespace troupe::cli
