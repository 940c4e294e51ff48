// What the golden-model engine tests share: the Engine configuration (16-token blocks,
// positions up to 4096, with the KV budget, scheduling mode and step limits the test
// picks; small limits give chunked prefill and several requests per step) and greedy
// request parameters.
#pragma once

#include <cstdint>

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

}  // namespace troupe::runtime
