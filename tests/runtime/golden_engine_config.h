// What the golden-model engine tests share: the Engine configuration (16-token blocks,
// positions up to 4096, with the KV budget, scheduling mode and step limits the test
// picks; small limits give chunked prefill and several requests per step) and greedy
// request parameters.
#pragma once

#include <cstdint>
#include <vector>

#include "model/forward.h"
#include "runtime/dep/dep_engine.h"
#include "runtime/engine.h"

namespace troupe::runtime {

inline EngineConfig golden_engine_config(int64_t kv_budget_bytes, bool async_scheduling,
                                         int64_t max_num_batched_tokens, int64_t max_num_running) {
  EngineConfig c;
  c.kv_budget_bytes = kv_budget_bytes;
  c.block_size = 16;
  c.async_scheduling = async_scheduling;
  c.scheduler.max_num_batched_tokens = max_num_batched_tokens;
  c.scheduler.max_num_running = max_num_running;
  c.scheduler.max_model_len = 4096;
  return c;
}

// Greedy, EOS ignored: exactly max_tokens tokens.
inline RequestParams greedy(int64_t max_tokens) {
  RequestParams p;
  p.max_tokens = max_tokens;
  p.ignore_eos = true;
  return p;
}

// The plain one-rank Engine's greedy tokens of one request (16 MiB of KV, async, a whole
// prompt per step): the reference the serve tests compare a daemon's tokens with.
inline std::vector<int32_t> engine_greedy(const model::Forward& forward,
                                          const std::vector<int32_t>& prompt, int64_t n) {
  Engine e(forward, nullptr, golden_engine_config(int64_t(16) << 20, true, 8192, 4));
  e.add_request(0, prompt, greedy(n));
  std::vector<int32_t> out;
  while (e.has_unfinished())
    for (const auto& o : e.step()) out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
  return out;
}

// The same from DEP-R in one process (runtime::DepEngine: its MoE over an InProcessGroup),
// the reference of the tests that spread an instance's ranks over processes.
inline std::vector<int32_t> dep_engine_greedy(const model::Forward& forward, int ranks,
                                              const std::vector<int32_t>& prompt, int64_t n) {
  DepConfig d;
  d.ranks = ranks;
  DepEngine e(forward, nullptr, golden_engine_config(int64_t(16) << 20, true, 8192, 4), d);
  e.add_request(0, prompt, greedy(n));
  std::vector<int32_t> out;
  while (e.has_unfinished())
    for (const auto& o : e.step()) out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
  return out;
}

}  // namespace troupe::runtime
