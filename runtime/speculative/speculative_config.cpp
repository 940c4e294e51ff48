#include "runtime/speculative/speculative_config.h"

#include <nlohmann/json.hpp>

#include "kernels/check.h"

namespace troupe::runtime {

SpeculativeConfig parse_speculative_config(std::string_view text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    TROUPE_FAIL("speculative-config: not valid JSON (" << e.what() << ")");
  }
  if (!j.is_object()) TROUPE_FAIL("speculative-config: must be a JSON object");
  for (const auto& [key, value] : j.items()) {
    if (key == "method") {
      if (!value.is_string()) TROUPE_FAIL("speculative-config: \"method\" must be a string");
      c.method = value.get<std::string>();
      if (c.method != "dspark" && c.method != "oracle")
        TROUPE_FAIL("speculative-config: \"method\" must be \"dspark\" (or the test mode "
                    "\"oracle\"), got \"" << c.method << "\"");
    } else if (key == "num_speculative_tokens") {
      if (!value.is_number_integer() || value.get<int64_t>() < 1 || value.get<int64_t>() > 64)
        TROUPE_FAIL("speculative-config: \"num_speculative_tokens\" must be an integer in "
                    "[1, 64], got " << value.dump());
      c.num_speculative_tokens = value.get<int64_t>();
    } else if (key == "acceptance_rate") {
      if (!value.is_number() || value.get<double>() < 0 || value.get<double>() > 1)
        TROUPE_FAIL("speculative-config: \"acceptance_rate\" must be a number in [0, 1], got "
                    << value.dump());
      c.acceptance_rate = value.get<double>();
    } else {
      TROUPE_FAIL("speculative-config: unknown key \"" << key
                  << "\" (known: method, num_speculative_tokens, acceptance_rate)");
    }
  }
  if (c.method.empty()) TROUPE_FAIL("speculative-config: \"method\" is required");
  if (c.num_speculative_tokens == 0)
    TROUPE_FAIL("speculative-config: \"num_speculative_tokens\" is required");
  if (j.contains("acceptance_rate") && c.method != "oracle")
    TROUPE_FAIL("speculative-config: \"acceptance_rate\" applies to method \"oracle\" only");
  return c;
}

std::string to_json(const SpeculativeConfig& c) {
  if (c.method.empty()) return "";
  nlohmann::json j{{"method", c.method}, {"num_speculative_tokens", c.num_speculative_tokens}};
  if (c.method == "oracle") j["acceptance_rate"] = c.acceptance_rate;
  return j.dump();
}

}  // namespace troupe::runtime
