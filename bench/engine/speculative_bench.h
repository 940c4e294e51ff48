// `troupe bench forward --speculative`: decode throughput of the Engine with speculative
// decoding vs plain decoding, at several batch sizes. The drafts come from the TEST/BENCH
// ORACLE (runtime/speculative/oracle_drafter.h): the target's own greedy continuation
// (taken from the plain run), each token kept with probability p, so both the machinery's
// overhead and its speed-up at a known acceptance are measured on any checkpoint (the
// tiny random draft accepts nothing). With `adaptive` also the online cost table
// (speculative-config "adaptive": k per step in 0..k) on each oracle p, and the real DSpark
// draft with fixed k and adaptive, when the checkpoint has one: its random tiny draft
// accepts nothing, so the adaptive row measures what noticing that costs against plain.
// Figures only, never pass/fail.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "bench/engine/engine_setup.h"
#include "model/op_profile.h"

namespace troupe::bench {

struct SpeculativeBenchShape {
  std::vector<int64_t> batches = {1, 8, 16};
  std::vector<double> acceptance = {0.3, 0.6, 0.9};
  int64_t k = 3;            // num_speculative_tokens
  int64_t context = 64;     // prompt tokens per request
  int64_t new_tokens = 64;  // output tokens per request
  uint64_t seed = 99;
  bool adaptive = false;
  bool profile = false;  // time each op of the decode steps, the draft's apart
  // > 1: every run on a DepEngine of this many ranks (DEP-R: the requests spread over the
  // ranks, the target's and the DSpark draft's MoE expert-parallel over them), the
  // machine's kernel threads shared out. Not with `profile` (it times the caller's thread).
  int ranks = 1;
};

// The checkpoint's DSpark draft for the bench: the target Forward that fills its feature
// rings and the drafter (both outlive the run).
struct DsparkBench {
  const model::Forward* forward = nullptr;
  const runtime::Drafter* drafter = nullptr;
};

struct SpeculativeBenchRow {
  int64_t batch = 0;
  std::string mode;           // "plain", "oracle p=0.6", "adaptive p=0.6", "dspark k=3", ...
  int64_t decode_steps = 0;   // steps after the prefill steps (DEP-R: lockstep group steps)
  double decode_seconds = 0;  // wall time of those steps
  int64_t tokens = 0;         // output tokens after each request's first
  double mean_accepted_length = 0;  // tokens per speculative verify (1 + accepted / drafts)
  std::vector<int64_t> steps_by_k;  // decode steps by draft limit (EngineFigures::spec_steps_by_k;
                                    // DEP-R: the ranks' steps summed)
  // With `profile`: the decode steps' ops (the target's), and the draft's ops (in
  // ops.draft_seconds their wall time).
  model::OpProfile ops, draft_ops;
};

struct SpeculativeBenchResult {
  std::vector<SpeculativeBenchRow> rows;
  // The adaptive runs' measured step times (the DSpark one's when there is one), as the
  // speculative-config "step_seconds" seed (DEP-R: rank 0's); empty without `adaptive`.
  std::vector<runtime::StepTimeSample> step_seconds;
};

// Plain, then one oracle run per p (and the adaptive and DSpark runs), for each batch size.
SpeculativeBenchResult run_speculative_bench(const model::Forward& forward,
                                             const SpeculativeBenchShape& shape,
                                             const EngineBenchConfig& config,
                                             const DsparkBench& dspark = {});

void print_speculative_table(const std::vector<SpeculativeBenchRow>& rows);
// Per batch size, ms per decode step of each op by mode: the target's ops, then the
// draft's (rows measured with `profile`).
void print_speculative_profile(const std::vector<SpeculativeBenchRow>& rows);

}  // namespace troupe::bench
