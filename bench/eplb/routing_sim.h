// A synthetic MoE router for the EPLB benchmark: every token of a step picks top_k
// distinct experts per layer, drawn one after another in proportion to a fixed popularity
// (sampling without replacement). Popularity is uniform, or Zipf-like: the expert of
// popularity rank i (a seeded shuffle per layer) has weight 1 / (i + 1)^s. Draws come from
// splitmix64 streams keyed by (seed, layer, step), so a run is reproducible and does not
// depend on the thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::bench {

struct RoutingShape {
  int64_t layers = 40;    // L, MoE layers
  int64_t experts = 384;  // Nlog
  int64_t top_k = 6;      // experts per token
  double zipf = 0.0;      // skew s; 0 = uniform popularity
  uint64_t seed = 1;
};

class RoutingSim {
 public:
  explicit RoutingSim(const RoutingShape& shape);

  const RoutingShape& shape() const { return shape_; }
  // The experts of every token of step `step`: [L, tokens, top_k].
  std::vector<int16_t> route_step(int64_t step, int64_t tokens) const;
  // Tokens per expert summed over steps [first, first + steps): [L, Nlog], the planner's input.
  std::vector<float> window_counts(int64_t first, int64_t steps, int64_t tokens) const;

 private:
  // Vose alias table of one layer's popularity: O(1) draws.
  struct Alias {
    std::vector<double> prob;
    std::vector<int32_t> alias;
  };
  void route_layer(int64_t layer, int64_t step, int64_t tokens, int16_t* out) const;

  RoutingShape shape_;
  std::vector<Alias> tables_;  // [L]
};

}  // namespace troupe::bench
