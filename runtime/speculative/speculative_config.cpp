#include "runtime/speculative/speculative_config.h"

#include <nlohmann/json.hpp>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

// {"<batch>": [seconds at k = 0, 1, ...], ...}
std::vector<StepTimeSample> parse_step_seconds(const nlohmann::json& value) {
  if (!value.is_object())
    TROUPE_FAIL("speculative-config: \"step_seconds\" must be an object {\"<batch>\": [seconds "
                "by k]}");
  std::vector<StepTimeSample> out;
  for (const auto& [batch, times] : value.items()) {
    int64_t b = 0;
    try {
      size_t used = 0;
      b = std::stoll(batch, &used);
      if (used != batch.size()) b = 0;
    } catch (const std::exception&) {
      b = 0;
    }
    if (b < 1) TROUPE_FAIL("speculative-config: \"step_seconds\" key \"" << batch
                           << "\" is not a batch size >= 1");
    if (!times.is_array() || times.empty())
      TROUPE_FAIL("speculative-config: \"step_seconds\"[\"" << batch
                  << "\"] must be a non-empty array of seconds by k");
    for (size_t k = 0; k < times.size(); ++k) {
      if (!times[k].is_number() || !(times[k].get<double>() > 0))
        TROUPE_FAIL("speculative-config: \"step_seconds\"[\"" << batch << "\"][" << k
                    << "] must be a number of seconds > 0, got " << times[k].dump());
      out.push_back({b, static_cast<int64_t>(k), times[k].get<double>()});
    }
  }
  return out;
}

}  // namespace

SpeculativeConfig parse_speculative_config(std::string_view text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e999
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
    } else if (key == "adaptive") {
      if (!value.is_boolean())
        TROUPE_FAIL("speculative-config: \"adaptive\" must be true or false");
      c.adaptive = value.get<bool>();
    } else if (key == "step_seconds") {
      c.step_seconds = parse_step_seconds(value);
    } else {
      TROUPE_FAIL("speculative-config: unknown key \"" << key
                  << "\" (known: method, num_speculative_tokens, acceptance_rate, adaptive, "
                     "step_seconds)");
    }
  }
  if (c.method.empty()) TROUPE_FAIL("speculative-config: \"method\" is required");
  if (c.num_speculative_tokens == 0)
    TROUPE_FAIL("speculative-config: \"num_speculative_tokens\" is required");
  for (const StepTimeSample& s : c.step_seconds)
    if (s.k > c.num_speculative_tokens)
      TROUPE_FAIL("speculative-config: \"step_seconds\" of batch " << s.batch << " has "
                  << s.k + 1 << " times, more than num_speculative_tokens + 1");
  if (j.contains("acceptance_rate") && c.method != "oracle")
    TROUPE_FAIL("speculative-config: \"acceptance_rate\" applies to method \"oracle\" only");
  return c;
}

std::string to_json(const SpeculativeConfig& c) {
  if (c.method.empty()) return "";
  nlohmann::json j{{"method", c.method}, {"num_speculative_tokens", c.num_speculative_tokens}};
  if (c.method == "oracle") j["acceptance_rate"] = c.acceptance_rate;
  if (c.adaptive) j["adaptive"] = true;
  if (!c.step_seconds.empty()) {
    nlohmann::json table = nlohmann::json::object();
    for (const StepTimeSample& s : c.step_seconds)
      table[std::to_string(s.batch)].push_back(s.seconds);
    j["step_seconds"] = table;
  }
  return j.dump();
}

}  // namespace troupe::runtime
