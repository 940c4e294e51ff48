// `troupe bench engine`: the engine's step costs on one model.
//
// Prefill: B requests, each a shared P-token prefix + its own N new tokens, max_tokens 1
// (so a request ends at its first token). With P > 0 the prefix is computed once by an
// untimed request, so each timed request hits the cache (P rounded down to a block, plus
// the SWA window replayed, MODEL.md §6); the baseline runs the same prompts on an engine
// without the prefix cache. One untimed repeat, then R timed repeats with fresh suffixes.
//
// Decode: for each context C, B requests of C random tokens are prefilled (untimed) and
// then decode together; each step of B decodes is timed: the whole Engine::step, the
// executor's share, and the scheduler's CPU time (schedule() + update()).
#pragma once

#include <cstdint>
#include <vector>

#include "bench/engine/engine_setup.h"
#include "model/batch_forward.h"

namespace troupe::bench {

struct EngineBenchShape {
  int64_t batch = 1;                            // B requests per step
  std::vector<int64_t> contexts = {256, 1024};  // C values of the decode sweep
  int64_t new_tokens = 128;                     // N new prefill tokens per request
  int64_t cached_prefix = 0;                    // P shared prefix tokens
  int64_t decode_steps = 8;                     // timed decode steps per context
  int64_t repeats = 3;                          // R timed prefill repeats
  uint64_t seed = 1234;
};

struct StepSamples {
  std::vector<double> step_s;           // Engine::step wall seconds
  std::vector<double> execute_s;        // the executor's part
  std::vector<double> scheduler_cpu_s;  // schedule() + update() CPU seconds
};

struct PrefillResult {
  bool prefix_cache = false;
  const char* decoder = "tail";  // "tail" (bounded replay), "full" or "clip_prefix"
  int64_t prompt_tokens = 0;    // per repeat: B·(P + N)
  int64_t cached_tokens = 0;    // per repeat, from the requests' admissions
  int64_t computed_tokens = 0;  // per repeat: scheduled tokens (incl. SWA replay)
  int64_t steps = 0;            // per repeat
  std::vector<double> seconds;  // [R] first step to last first token
  StepSamples per_step;         // every timed step
};

struct DecodeResult {
  int64_t context = 0;
  StepSamples samples;  // [decode_steps]
};

PrefillResult time_prefill(const model::BatchForward& forward, const EngineBenchShape& shape,
                           const EngineBenchConfig& config, bool prefix_cache);
DecodeResult time_decode(const model::BatchForward& forward, const EngineBenchShape& shape,
                         const EngineBenchConfig& config, int64_t context);

void print_prefill_table(const EngineBenchShape& shape, const std::vector<PrefillResult>& rows);
void print_decode_table(const EngineBenchShape& shape, const std::vector<DecodeResult>& rows);

}  // namespace troupe::bench
