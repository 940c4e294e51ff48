// The reference the engine tests compare greedy outputs with: a chunk run on the plain
// contiguous SequenceState (its own decoder tail, or full compute), then greedy decode
// steps, with the full-vocabulary logprobs of each token as the engine computes them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling.h"
#include "model/state.h"
#include "runtime/executor/logprobs.h"
#include "runtime/scheduler/step_plan.h"
#include "support/golden.h"

namespace troupe::runtime {

struct GreedyOut {
  std::vector<int32_t> tokens;
  std::vector<SampleLogprobs> logprobs;
};

// Runs `chunk` on st (decoder tail from `tail_start`, -1: every layer), then greedy
// decode steps on the golden model.
inline GreedyOut continue_greedy(model::SequenceState& st, std::span<const int32_t> chunk,
                                 int64_t tail_start, int64_t steps) {
  const auto& g = testing::golden_model();
  const int32_t V = static_cast<int32_t>(g.config.vocab_size);
  GreedyOut out;
  model::SequenceInput in{&st, chunk, false, tail_start};
  std::vector<float> logits = g.forward->run({&in, 1})[0];
  for (int64_t i = 0; i < steps; ++i) {
    const int32_t t = kernels::argmax(logits.data(), V);
    out.tokens.push_back(t);
    out.logprobs.push_back(sample_logprobs(logits, t, V));
    if (i + 1 == steps) break;
    model::SequenceInput step{&st, std::span<const int32_t>(&t, 1), false};
    logits = g.forward->run({&step, 1})[0];
  }
  return out;
}

}  // namespace troupe::runtime
