// `troupe bench serve`: the analogue of `vllm bench serve` against a running OpenAI-style
// server (`troupe serve`, or any /v1/completions endpoint). N streaming requests with
// seeded random token-id prompts (ignore_eos, so each output has the asked length), at
// most C in flight, arriving all at once (rate inf) or as a seeded Poisson process; then
// request and token throughput and TTFT / TPOT / ITL statistics.
#pragma once

#include <cstdint>
#include <functional>
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
  std::vector<double> itl_s;       // gaps between successive chunks with text or ids
  double sent_at_s = 0;            // now_seconds() when it was sent
  std::vector<double> chunk_at_s;  // now_seconds() of each chunk with text or ids
  std::vector<int32_t> token_ids;  // the output's, when the chunks carry them
};

struct ServeBenchRun {
  std::vector<RequestResult> requests;
  double duration_s = 0;  // first send to last finish
};

// Sums over the successful requests of a run.
struct ServeTotals {
  int64_t ok = 0, failed = 0;
  int64_t input = 0, cached = 0, output = 0;  // tokens
  int64_t uncached() const { return input - cached; }
  double hit_rate() const { return input ? double(cached) / double(input) : 0; }
};
ServeTotals serve_totals(const ServeBenchRun& run);

// A streaming POST /v1/completions body: greedy, EOS ignored (the output has max_tokens
// tokens), usage in the last chunk; with return_token_ids the chunks carry the output ids
// (vLLM's extension, net/openai/token_ids.h).
std::string completion_body(const std::string& model, const std::vector<int32_t>& prompt,
                            int64_t max_tokens, bool return_token_ids);

// Sends one body; TTFT is the first chunk with text or token ids, ITL the gaps after it.
// on_chunk, when set, is called after each such chunk (from this thread).
RequestResult send_completion(const BaseUrl& base, const std::string& body,
                              const std::function<void()>& on_chunk = {});

// The progress bar on stderr ("[####   ] done/total"; a newline when done == total).
void print_progress(int64_t done, int64_t total);

// GET /v1/models; throws troupe::Error (naming --base-url) when the server does not answer.
void check_reachable(const ServeBenchConfig& config);

// Runs the benchmark, printing a progress line to stderr.
ServeBenchRun run_serve_bench(const ServeBenchConfig& config);

void print_serve_report(const ServeBenchConfig& config, const ServeBenchRun& run);

}  // namespace troupe::bench
