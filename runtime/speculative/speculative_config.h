// Speculative decoding settings, vLLM's --speculative-config JSON object:
//
//   {"method": "dspark", "num_speculative_tokens": 3}
//
// method "dspark" drafts with the checkpoint's DSpark network (MODEL.md §8); "oracle" is a
// TEST/BENCH mode only: drafts are the target's own greedy continuation, each kept with
// probability acceptance_rate (runtime/speculative/oracle_drafter.h). Unknown keys, a
// wrong type or a bad value throw troupe::Error naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::runtime {

struct SpeculativeConfig {
  std::string method;                  // "" (off), "dspark", "oracle"
  int64_t num_speculative_tokens = 0;  // k >= 1 when on
  double acceptance_rate = 1.0;        // oracle only: p in [0, 1]

  bool enabled() const { return !method.empty() && num_speculative_tokens > 0; }
  bool operator==(const SpeculativeConfig&) const = default;
};

// Parses the JSON text; "" gives the default (off).
SpeculativeConfig parse_speculative_config(std::string_view json);
// The JSON text parse_speculative_config reads back ("" when off).
std::string to_json(const SpeculativeConfig& c);

}  // namespace troupe::runtime
