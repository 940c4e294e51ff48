// Speculative decoding settings, vLLM's --speculative-config JSON object:
//
//   {"method": "dspark", "num_speculative_tokens": 3}
//
// Optional keys (troupe's own): "adaptive": true picks each step's k in
// 0..num_speculative_tokens with the online cost table (draft_length.h); "step_seconds":
// {"<batch>": [T(b, 0), ..., T(b, k)], ...} seeds its step times from a bench run
// (`troupe bench forward --speculative` prints that object).
//
// method "dspark" drafts with the checkpoint's DSpark network (MODEL.md §8); "oracle" is a
// TEST/BENCH mode only: drafts are the target's own greedy continuation, each kept with
// probability acceptance_rate (runtime/speculative/oracle_drafter.h). Unknown keys, a
// wrong type or a bad value throw troupe::Error naming the key.
#pragma once

#include <cstdint>
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

  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
  bool operator==(const SpeculativeConfig&) const = default;
};

// Parses the JSON text; "" gives the default (off).
SpeculativeConfig parse_speculative_config(std::string_view json);
// The JSON text parse_speculative_config reads back ("" when off).
std::string to_json(const SpeculativeConfig& c);

}  // namespace troupe::runtime
