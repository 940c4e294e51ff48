#include "runtime/eplb/eplb_config_json.h"

#include <nlohmann/json.hpp>

#include "kernels/check.h"

namespace troupe::runtime::eplb {
namespace {

int64_t integer_in(const nlohmann::json& v, const std::string& key, int64_t lo, int64_t hi) {
  if (!v.is_number_integer() || v.get<int64_t>() < lo || v.get<int64_t>() > hi)
    TROUPE_FAIL("eplb-config: \"" << key << "\" must be an integer in [" << lo << ", " << hi
                << "], got " << v.dump());
  return v.get<int64_t>();
}

}  // namespace

EplbConfigJson parse_eplb_config(std::string_view text) {
  EplbConfigJson c;
  if (text.empty()) return c;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
    TROUPE_FAIL("eplb-config: not valid JSON (" << e.what() << ")");
  }
  if (!j.is_object()) TROUPE_FAIL("eplb-config: must be a JSON object");
  constexpr int64_t kMaxSteps = int64_t(1) << 40;
  for (const auto& [key, value] : j.items()) {
    if (key == "window_size")
      c.config.window_size = integer_in(value, key, 1, kMaxSteps);
    else if (key == "step_interval")
      c.config.step_interval = integer_in(value, key, 1, kMaxSteps);
    else if (key == "num_redundant_experts")
      c.num_redundant_experts = integer_in(value, key, 0, 1 << 20);
    else
      TROUPE_FAIL("eplb-config: unknown key \"" << key
                  << "\" (known: window_size, step_interval, num_redundant_experts)");
  }
  return c;
}

}  // namespace troupe::runtime::eplb
