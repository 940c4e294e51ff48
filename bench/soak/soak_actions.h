// Sends one action of the soak mix (bench/soak/soak_workload.h) over a new connection and
// judges the answer against what the kind expects: served (a good request got its 200
// and a complete body or stream; a leaving client left as planned), an expected error (a
// bad request got a 4xx, or for garbage a close, or for slow headers nothing), or
// unexpected (anything else: another status, a broken stream, a refused connection, a
// read that waited past the timeout).
#pragma once

#include <cstdint>
#include <string>

#include "bench/serve/sse_client.h"
#include "bench/soak/soak_workload.h"

namespace troupe::bench {

enum class SoakClass { Served, ExpectedError, Unexpected };

struct SoakOutcome {
  SoakClass cls = SoakClass::Unexpected;
  std::string answer;         // "200", "400", "closed", "client left", "timeout", ...
  int64_t output_tokens = 0;  // a good request's usage.completion_tokens
  std::string detail;         // why it is unexpected
};

// Seconds a read may wait before the request counts as hung (unexpected).
constexpr double kSoakReadTimeoutS = 120;

SoakOutcome run_soak_action(const BaseUrl& base, const SoakAction& action);

}  // namespace troupe::bench
