#include "runtime/speculative/speculative_config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "kernels/check.h"

namespace troupe::runtime {

std::vector<StepTimeSample> parse_step_seconds(const nlohmann::json& value, std::string_view where) {
  if (!value.is_object())
    TROUPE_FAIL(where << ": \"step_seconds\" must be an object {\"<batch>\": [seconds by k]}");
  std::vector<StepTimeSample> out;
  std::set<int64_t> batches;
  for (const auto& [batch, times] : value.items()) {
    int64_t b = 0;
    try {
      size_t used = 0;
      b = std::stoll(batch, &used);
      if (used != batch.size()) b = 0;
    } catch (const std::exception&) {
      b = 0;
    }
    if (b < 1) TROUPE_FAIL(where << ": \"step_seconds\" key \"" << batch
                           << "\" is not a batch size >= 1");
    if (!batches.insert(b).second)
      TROUPE_FAIL(where << ": \"step_seconds\" gives batch size " << b << " twice");
    if (!times.is_array() || times.empty())
      TROUPE_FAIL(where << ": \"step_seconds\"[\"" << batch
                  << "\"] must be a non-empty array of seconds by k");
    for (size_t k = 0; k < times.size(); ++k) {
      if (times[k].is_null()) continue;  // not measured
      if (!times[k].is_number() || !(times[k].get<double>() > 0))
        TROUPE_FAIL(where << ": \"step_seconds\"[\"" << batch << "\"][" << k
                    << "] must be a number of seconds > 0 or null, got " << times[k].dump());
      out.push_back({b, static_cast<int64_t>(k), times[k].get<double>()});
    }
  }
  std::stable_sort(out.begin(), out.end(), [](const StepTimeSample& a, const StepTimeSample& b) {
    return a.batch < b.batch;  // JSON object keys come in text order: "16" before "8"
  });
  return out;
}

std::string step_seconds_json(std::span<const StepTimeSample> cells, int digits) {
  std::map<int64_t, std::vector<double>> rows;  // by batch; 0: no cell
  for (const StepTimeSample& s : cells) {
    if (s.batch < 1 || s.k < 0) continue;
    std::vector<double>& row = rows[s.batch];
    if (static_cast<int64_t>(row.size()) <= s.k) row.resize(size_t(s.k + 1), 0.0);
    row[size_t(s.k)] = s.seconds;
  }
  std::string out = "{";
  for (const auto& [batch, row] : rows) {
    out += (out.size() > 1 ? ", \"" : "\"") + std::to_string(batch) + "\": [";
    for (size_t k = 0; k < row.size(); ++k) {
      char t[40];
      if (row[k] > 0) std::snprintf(t, sizeof t, "%s%.*g", k ? ", " : "", digits, row[k]);
      else std::snprintf(t, sizeof t, "%snull", k ? ", " : "");
      out += t;
    }
    out += "]";
  }
  return out + "}";
}

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
      c.step_seconds = parse_step_seconds(value, "speculative-config");
    } else if (key == "table_file") {
      if (!value.is_string() || value.get<std::string>().empty())
        TROUPE_FAIL("speculative-config: \"table_file\" must be a non-empty path");
      c.table_file = value.get<std::string>();
    } else {
      TROUPE_FAIL("speculative-config: unknown key \"" << key
                  << "\" (known: method, num_speculative_tokens, acceptance_rate, adaptive, "
                     "step_seconds, table_file)");
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
  if (!c.step_seconds.empty()) j["step_seconds"] = nlohmann::json::parse(step_seconds_json(c.step_seconds));
  if (!c.table_file.empty()) j["table_file"] = c.table_file;
  return j.dump();
}

}  // namespace troupe::runtime
