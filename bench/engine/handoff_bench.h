// `troupe bench handoff` (docs/pd.md "Benchmarks"): what moving a request's KV between two
// engines of this process costs at each prompt length, against a memcpy of the same bytes
// measured in the same run and against recomputing the prompt (the fallback when a move
// fails). Per length, medians over `repeats` fresh random prompts:
//   pack    Engine::export_request: the blocks and slot state copied into one region
//   encode  encode_kv_handoff (the bytes between processes), decode  decode_kv_handoff
//   memcpy  one memcpy of the region's bytes (the reference)
//   load    the receiver's first step (its KvLoad copies + one decode) minus its next
//           step (one decode)
//   prefill the sender's prompt steps: what a recompute on the receiver costs
// The network is not in it: over UCX or CAF the bytes cost their link on top.
#pragma once

#include <cstdint>
#include <vector>

#include "bench/engine/engine_setup.h"
#include "model/forward.h"

namespace troupe::bench {

struct HandoffTimes {
  int64_t prompt_tokens = 0;
  int64_t bytes = 0;  // the region
  double pack_s = 0, encode_s = 0, decode_s = 0, memcpy_s = 0, load_s = 0, prefill_s = 0;
};

std::vector<HandoffTimes> time_handoffs(const model::Forward& forward, const EngineBenchConfig& c,
                                        const std::vector<int64_t>& prompt_lens, int repeats);
void print_handoffs(const std::vector<HandoffTimes>& t);

}  // namespace troupe::bench
