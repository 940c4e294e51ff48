// vLLM's --eplb-config JSON object for live EPLB (with --enable-eplb):
//
//   {"window_size": 1000, "step_interval": 3000, "num_redundant_experts": 0}
//
// Every key is optional (the defaults of EplbConfig; num_redundant_experts: unset).
// Unknown keys, wrong types and out-of-range values throw troupe::Error naming the key.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "runtime/eplb/eplb_planner.h"

namespace troupe::runtime::eplb {

struct EplbConfigJson {
  EplbConfig config;  // enabled stays false: that is --enable-eplb's business
  std::optional<int64_t> num_redundant_experts;
};

// "" gives the defaults.
EplbConfigJson parse_eplb_config(std::string_view json);

}  // namespace troupe::runtime::eplb
