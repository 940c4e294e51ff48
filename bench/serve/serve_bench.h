// `troupe bench serve`: the analogue of `vllm bench serve` against a running OpenAI-style
// server (`troupe serve`, or any /v1/completions endpoint). N streaming requests with
// seeded random token-id prompts (ignore_eos, so each output has the asked length), at
// most C in flight, arriving all at once (rate inf) or as a seeded Poisson process; then
// request and token throughput and TTFT / TPOT / ITL statistics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/serve/sse_client.h"

namespace troupe::bench {

struct ServeBenchConfig {
  BaseUrl base;
  std::string model;            // "" = leave "model" out of the request
  int64_t num_prompts = 16;     // N
  int64_t max_concurrency = 4;  // C
  double request_rate = 0;      // requests/s; 0 or inf = all at once
  int64_t input_len = 64;       // I prompt tokens
  int64_t output_len = 16;      // O max_tokens
  int32_t max_token_id = 4096;  // prompt ids drawn from [0, max)
  uint64_t seed = 0;
};

struct RequestResult {
  bool ok = false;
  std::string error;
  int64_t prompt_tokens = 0, cached_tokens = 0, output_tokens = 0;  // from usage
  double latency_s = 0, ttft_s = 0;
  std::vector<double> itl_s;  // gaps between successive text chunks
};

struct ServeBenchRun {
  std::vector<RequestResult> requests;
  double duration_s = 0;  // first send to last finish
};

// GET /v1/models; throws troupe::Error (naming --base-url) when the server does not answer.
void check_reachable(const ServeBenchConfig& config);

// Runs the benchmark, printing a progress line to stderr.
ServeBenchRun run_serve_bench(const ServeBenchConfig& config);

void print_serve_report(const ServeBenchConfig& config, const ServeBenchRun& run);

}  // namespace troupe::bench
