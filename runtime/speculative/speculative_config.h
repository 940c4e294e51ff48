// Speculative decoding settings, vLLM's --speculative-config JSON object:
//
//   {"method": "dspark", "num_speculative_tokens": 3}
//
// Optional keys (troupe's own): "adaptive": true picks each step's k in
// 0..num_speculative_tokens with the online cost table (draft_length.h); "step_seconds":
// {"<batch>": [T(b, 0), ..., T(b, k)], ...} seeds its step times from a bench run
// (`troupe bench forward --speculative` prints that object; a null leaves that cell to be
// measured); "table_file": "PATH" keeps the table in a file across restarts
// (runtime/speculative/cost_table_file.h).
//
// method "dspark" drafts with the checkpoint's DSpark network (MODEL.md §8); "oracle" is a
// TEST/BENCH mode only: drafts are the target's own greedy continuation, each kept with
// probability acceptance_rate (runtime/speculative/oracle_drafter.h). Unknown keys, a
// wrong type or a bad value throw troupe::Error naming the key.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/speculative/draft_length.h"

namespace troupe::runtime {

inline bool operator==(const StepTimeSample& a, const StepTimeSample& b) {
  return a.batch == b.batch && a.k == b.k && a.seconds == b.seconds;
}

struct SpeculativeConfig {
  std::string method;                  // "" (off), "dspark", "oracle"
  int64_t num_speculative_tokens = 0;  // k >= 1 when on
  double acceptance_rate = 1.0;        // oracle only: p in [0, 1]
  bool adaptive = false;               // the online cost table chooses k per step
  std::vector<StepTimeSample> step_seconds;  // its seed: (batch, k, seconds)
  std::string table_file;                    // where the table is kept ("": nowhere)

  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
  bool operator==(const SpeculativeConfig&) const = default;
};

// The "step_seconds" object: {"<batch>": [seconds or null by k], ...}; `where` starts
// each error's text (the config key, or a file). Cells in batch then k order.
std::vector<StepTimeSample> parse_step_seconds(const nlohmann::json& value, std::string_view where);
// The object parse_step_seconds reads, a row per batch up to its largest k (null where a
// cell is missing), seconds printed to `digits` significant digits (17: exactly).
std::string step_seconds_json(std::span<const StepTimeSample> cells, int digits = 17);

// Parses the JSON text; "" gives the default (off).
SpeculativeConfig parse_speculative_config(std::string_view json);
// The JSON text parse_speculative_config reads back ("" when off).
std::string to_json(const SpeculativeConfig& c);

}  // namespace troupe::runtime
