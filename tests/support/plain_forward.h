// The plain single-request forward of the golden model (contiguous state, every layer on
// every token) as an independent reference for logits and logprobs, and an f64
// log-softmax to read them with.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "support/golden.h"

namespace troupe::testing {

// log-softmax in f64 with the max subtracted.
inline std::vector<double> log_softmax_f64(std::span<const float> z) {
  double max = -std::numeric_limits<double>::infinity();
  for (float v : z) max = std::max(max, double(v));
  double sum = 0;
  for (float v : z) sum += std::exp(double(v) - max);
  std::vector<double> out;
  out.reserve(z.size());
  for (float v : z) out.push_back(double(v) - max - std::log(sum));
  return out;
}

// The raw logits before each output token: row i is the distribution output[i] was drawn
// from (the prompt, then output[0..i) fed back).
inline std::vector<std::vector<float>> plain_logits(const std::vector<int32_t>& prompt,
                                                    const std::vector<int32_t>& output) {
  const GoldenModel& g = golden_model();
  model::SequenceState st = model::SequenceState::empty(g.config);
  std::vector<std::vector<float>> rows;
  std::vector<int32_t> next = prompt;
  for (int32_t t : output) {
    model::SequenceInput in{&st, next, false};
    rows.push_back(g.forward->run({&in, 1})[0]);
    next = {t};
  }
  return rows;
}

// Greedy continuation of n tokens and the logits each was the argmax of.
struct PlainGreedy {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
};
inline PlainGreedy plain_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  const GoldenModel& g = golden_model();
  model::SequenceState st = model::SequenceState::empty(g.config);
  PlainGreedy out;
  std::vector<int32_t> next = prompt;
  for (int64_t i = 0; i < n; ++i) {
    model::SequenceInput in{&st, next, false};
    out.logits.push_back(g.forward->run({&in, 1})[0]);
    out.tokens.push_back(kernels::argmax(out.logits.back().data(), g.config.vocab_size));
    next = {out.tokens.back()};
  }
  return out;
}

}  // namespace troupe::testing
