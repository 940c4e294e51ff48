// `troupe bench drain` (docs/pd.md "Drain"): what a decode drain costs a stream. N greedy
// streams run against a cluster router; once each has streamed K chunks (so all are
// decoding on a decode instance), the bench asks it to drain one
// decode instance (POST /admin/drain), whose requests then move with their KV to another
// decode instance. Per moved stream: the gap between its last token before the move and
// its first after it, and the time from the drain's ask to that first token. Beside them,
// the reference measured in the same run: the streams' ordinary inter-token gaps before
// the drain (TPOT). With --check, the same prompts run again undisturbed and the moved
// streams' tokens are compared with theirs. Figures only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/serve/serve_bench.h"

namespace troupe::bench {

struct DrainBenchConfig {
  BaseUrl base;
  std::string instance;        // the decode instance to drain
  std::string api_key;         // "" = none
  int64_t num_prompts = 8;     // streams, all in flight at once
  int64_t input_len = 64;      // prompt tokens
  int64_t output_len = 400;    // max_tokens (EOS ignored)
  int64_t drain_after = 50;    // the drain is asked once every stream has this many chunks
  int32_t max_token_id = 4096;
  uint64_t seed = 0;
  bool check = true;           // rerun undisturbed and compare tokens
};

// The gaps of one run. Which streams moved: the drain answers how many requests it moves
// (M); the client cannot tell which, so the M streams with the largest gap after the ask
// count as moved (a move costs a pack, a put and a load; an unmoved stream only sees its
// instance's next step).
struct DrainGaps {
  // Every gap that ended before the ask (the reference): its median is the ordinary
  // TPOT; its tail includes each stream's first gap, the move from the prefill side.
  std::vector<double> tpot_s;
  std::vector<double> move_gap_s;     // moved streams: the gap across the move
  std::vector<double> next_token_s;   // moved streams: from the ask to the first token after the move
  std::vector<double> unmoved_gap_s;  // the other streams: their largest gap after the ask
  int64_t not_across = 0;  // streams with no token before the ask or none after it
};
DrainGaps drain_gaps(const std::vector<RequestResult>& streams, double drain_at_s, int64_t moved);

struct DrainBenchRun {
  std::vector<RequestResult> streams;
  double drain_at_s = 0;  // now_seconds() of the ask
  int drain_status = 0;   // the router's HTTP status (0: no answer)
  std::string drain_answer;
  int64_t moved = 0;      // "requests" in the router's answer
  std::vector<RequestResult> undisturbed;  // --check: the same prompts again, no drain
};

DrainBenchRun run_drain_bench(const DrainBenchConfig& config);
void print_drain_report(const DrainBenchConfig& config, const DrainBenchRun& run);

}  // namespace troupe::bench
