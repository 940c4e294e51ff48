// The routing-trace token counts of `troupe eplb plan --weights` (runtime/eplb/
// expert_loads_json): the bytes are the file's text. Contract: a malformed file is a
// troupe::Error from the reader; loads it accepts are planned (1 to 4 ranks, a redundant
// slot per rank) and the plan checked, and there nothing may throw at all: the reader
// must not let through what the planner cannot take.
#include "fuzz/targets.h"
#include "kernels/check.h"
#include "runtime/eplb/expert_loads_json.h"
#include "runtime/eplb/plan_report.h"

namespace troupe::fuzz {

void expert_loads_json(const uint8_t* data, size_t size) {
  runtime::eplb::ExpertLoads loads;
  try {
    loads = runtime::eplb::parse_expert_loads_json(as_text(data, size));
  } catch (const Error&) {
    return;
  }
  if (loads.num_layers * loads.num_logical > 4096) return;  // planning time, not parsing
  runtime::eplb::EplbTopology t;
  t.num_gpus = 1 + static_cast<int64_t>(size % 4);
  t.num_physical = (loads.num_logical + t.num_gpus - 1) / t.num_gpus * t.num_gpus + t.num_gpus;
  const runtime::eplb::EplbPlanReport r = runtime::eplb::make_plan_report(loads, t);
  runtime::eplb::check_placement(r.placement);
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::expert_loads_json)
