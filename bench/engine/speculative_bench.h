// `troupe bench forward --speculative`: decode throughput of the Engine with speculative
// decoding vs plain decoding, at several batch sizes. The drafts come from the TEST/BENCH
// ORACLE (runtime/speculative/oracle_drafter.h): the target's own greedy continuation
// (taken from the plain run), each token kept with probability p, so both the machinery's
// overhead and its speed-up at a known acceptance are measured on any checkpoint (the
// tiny random draft accepts nothing). Figures only, never pass/fail.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/engine/engine_setup.h"

namespace troupe::bench {

struct SpeculativeBenchShape {
  std::vector<int64_t> batches = {1, 8, 16};
  std::vector<double> acceptance = {0.3, 0.6, 0.9};
  int64_t k = 3;            // num_speculative_tokens
  int64_t context = 64;     // prompt tokens per request
  int64_t new_tokens = 64;  // output tokens per request
  uint64_t seed = 99;
};

struct SpeculativeBenchRow {
  int64_t batch = 0;
  double p = -1;              // < 0: plain decoding
  int64_t decode_steps = 0;   // steps after the prefill steps
  double decode_seconds = 0;  // wall time of those steps
  int64_t tokens = 0;         // output tokens after each request's first
  double mean_accepted_length = 0;  // tokens per speculative verify (1 + accepted / drafts)
};

// Plain, then one oracle run per p, for each batch size.
std::vector<SpeculativeBenchRow> run_speculative_bench(const model::Forward& forward,
                                                       const SpeculativeBenchShape& shape,
                                                       const EngineBenchConfig& config);

void print_speculative_table(const std::vector<SpeculativeBenchRow>& rows);

}  // namespace troupe::bench
