// troupe's side of the side-by-side with llama.cpp (bench/peer/llamacpp.sh): timings of
// the LLaMA forward on one GGUF file, the teacher-forced greedy check, and the machine
// limits, each printed as one JSON line the script joins with llama.cpp's (measured by
// bench/peer/llamacpp_bench.mjs on the same file, same token ids, same thread count).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::bench {

// The token ids both engines feed: 3 + (i · 7919) mod (V - 3) (skips <unk>, <s>, </s>).
std::vector<int32_t> peer_tokens(int64_t count, int64_t vocab);

struct PeerRunConfig {
  std::string model;              // .gguf
  int threads = 2;
  int64_t pp = 512;               // prompt tokens of the prefill figure
  int64_t tg = 128;               // decode steps of the generation figure (after a 16-token prompt)
  std::vector<int64_t> parallel;  // sequence counts for batched decode (16-token prompts each)
  int64_t parallel_steps = 32;    // decode steps per batched figure
  int repeats = 2;                // best of, for each figure
  bool profile = false;           // also the tg steps' time per op, on stderr (one more pass)
};

// {"engine":"troupe","model":...,"pp_tok_s":...,"tg_tok_s":...,"parallel":[{"seqs":4,"tok_s":...}],
//  "weight_bytes":...,"active_bytes_per_token":...,"flops_per_token":...}
void run_peer_troupe(const PeerRunConfig& c);

// Teacher-forced greedy check on llama.cpp's tokens: troupe's logits at every position of
// `tokens`; for each position p >= prompt_len - 1 whose next token llama.cpp picked,
// whether troupe's argmax agrees, else the gap (troupe's top logit - its logit of
// llama.cpp's token) relative to the logits' max magnitude. One JSON line.
void check_peer_tokens(const std::string& model, const std::vector<int32_t>& tokens,
                       int64_t prompt_len, int threads);

// measure_limits(quick) as one JSON line: {"dram_gbs":..., "int8_gops":..., "fp32_gflops":...}.
void print_peer_limits(int threads, bool quick);

}  // namespace troupe::bench
