// Reads the token counts a routing trace gives the EPLB planner (`troupe eplb plan
// --weights W.json`): JSON `[[tokens per logical expert] per MoE layer]`, e.g.
//   [[120, 3, 0, 55], [9, 9, 80, 2]]       2 layers, 4 logical experts
// Outside input: every malformation is a troupe::Error naming what is wrong and where
// (`layer 1 has 3 experts, layer 0 has 4`, `weight[0][2] = -1 is not a count >= 0`), never
// a crash. Parsed as a stream (no document tree), so nesting deeper than two is refused
// at its first bracket.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace troupe::runtime::eplb {

struct ExpertLoads {
  int64_t num_layers = 0;    // L, MoE layers (rows)
  int64_t num_logical = 0;   // Nlog, logical experts per layer (columns)
  std::vector<float> weight;  // [L, Nlog] token counts, finite, >= 0, f32 as the planner takes
};

ExpertLoads parse_expert_loads_json(std::string_view text);

}  // namespace troupe::runtime::eplb
