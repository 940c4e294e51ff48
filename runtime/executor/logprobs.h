// Log-probabilities of a sampled token and its top alternatives, from one row of raw
// logits (vLLM's raw_logprobs: before temperature, top-k/top-p and penalties).
//
//   lse        = max z + log Σ_i exp(z_i − max z)      (f64 sum: stable for any vocab)
//   logprob_i  = z_i − lse
//   top        = the k largest z, most likely first, equal logits by lower id
#pragma once

#include <cstdint>
#include <span>

#include "runtime/scheduler/step_plan.h"

namespace troupe::runtime {

// log Σ exp(logits), in f64. logits must be non-empty; -inf entries count as zero mass.
double log_sum_exp(std::span<const float> logits);

// The logprob of `token` and the min(k, #finite logits) most likely tokens. k >= 0.
SampleLogprobs sample_logprobs(std::span<const float> logits, int32_t token, int32_t k);

}  // namespace troupe::runtime
