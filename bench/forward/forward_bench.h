// `troupe bench forward`'s measurement (the analogue of `vllm bench forward`): B
// sequences of C random token ids prefilled as one batched model::Forward::run, then N
// batched decode steps of one token per sequence, repeated R times on fresh states;
// reported as median and spread next to the bytes and FLOPs each step must move and
// compute (forward_cost.h) and this machine's limits measured in the same run.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/common/limits.h"
#include "bench/forward/forward_cost.h"
#include "model/forward.h"
#include "model/op_profile.h"

namespace troupe::bench {

struct ForwardBenchShape {
  int64_t batch = 1;       // B sequences
  int64_t context = 128;   // C prompt tokens per sequence
  int64_t new_tokens = 8;  // N decode steps
  int64_t repeats = 3;     // R
  uint64_t seed = 1234;    // of the random prompts
};

struct ForwardTimes {
  std::vector<double> prefill_s;  // [R] seconds per prefill step
  std::vector<double> decode_s;   // [R·N] seconds per decode step
  model::OpProfile decode_ops;    // summed over the R·N decode steps (when profiled)
};

// Runs one untimed warm-up step (faults the mmapped weights in), then the R repeats.
// Decode feeds each sequence its greedy next token (chosen outside the timed call).
// profile: also time each op of the decode steps (model/op_profile.h) into
// ForwardTimes::decode_ops.
ForwardTimes time_forward(const model::Forward& forward, const ForwardBenchShape& shape,
                          bool profile = false);

// The table: one row per step kind (prefill; decode unless N = 0) with median, min and
// max time, tokens/s, bytes and FLOPs per step, the achieved rates and the share of the
// limit each step is judged against (prefill: fp32 FMA peak; decode: DRAM bandwidth).
void print_forward_table(const ForwardBenchShape& shape, const ForwardCostModel& cost,
                         const ForwardTimes& times, const MachineLimits& limits);

// The decode steps' time per op: ms per step (mean), share of the mean step, spans per
// step; the remainder (batch setup, norms between ops, the layer loop) as "other".
void print_op_profile(const ForwardTimes& times);
// The same table for `steps` steps that took `total_s` seconds in all, ops summed in `ops`
// (`troupe bench peer --profile` prints its tg steps' and its prefill's so), to `out`;
// `what` names a step in the title.
void print_op_table(std::FILE* out, const model::OpProfile& ops, int64_t steps, double total_s,
                    const std::string& what = "decode step");

}  // namespace troupe::bench
