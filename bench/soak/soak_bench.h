// `troupe bench soak`: C concurrent clients for N minutes against one server, each
// looping over the seeded mix of bench/soak/soak_workload.h (good requests, clients that
// leave, bad requests); then, with every client stopped, /metrics polled until nothing
// runs, and the figures: requests sent / served / expected and unexpected errors by kind,
// KV blocks still in use (must be 0), the server's RSS before and after, and the
// throughput of the good requests next to a single-client reference run measured first
// on the same server. It fails (exit 1) when the server died, a request got an answer
// its kind does not allow, a block leaked or the started server did not exit 0.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/serve/sse_client.h"
#include "bench/soak/soak_actions.h"
#include "bench/soak/soak_server.h"
#include "bench/soak/soak_workload.h"

namespace troupe::bench {

struct SoakConfig {
  double minutes = 1;
  int64_t concurrency = 64;
  uint64_t seed = 0;
  // Empty base.host: start `troupe serve` with serve_args; else use base and server_pid.
  BaseUrl base;
  pid_t server_pid = 0;
  std::vector<std::string> serve_args;
};

// One kind's counts: sent = served + expected_errors + unexpected.
struct SoakTally {
  int64_t sent = 0, served = 0, expected_errors = 0, unexpected = 0;
  int64_t output_tokens = 0;               // of the served good requests
  std::map<std::string, int64_t> answers;  // "200" -> count, "closed" -> count, ...
  std::string first_unexpected;

  void add(const SoakOutcome& o);
  void merge(const SoakTally& other);
};
using SoakTallies = std::array<SoakTally, kSoakKinds>;

// A phase of good requests timed for throughput.
struct SoakPhase {
  int64_t clients = 0;
  double seconds = 0;
  int64_t good_requests = 0, output_tokens = 0, all_requests = 0;
};

struct SoakResult {
  SoakTallies tallies;
  SoakPhase reference, soak;
  bool alive_at_end = false;
  ServerIdleState idle;  // after the clients stopped
  int64_t rss_start_kib = -1, rss_peak_kib = -1, rss_end_kib = -1;
  std::vector<int64_t> rss_quarters_kib;  // at 25, 50, 75 and 100% of the soak's length
  bool chat = true;                       // false: the model has no chat template (the
                                          // mix sent completions in chat's place)
  bool own_server = false;                // started by this bench
  int exit_code = 0;                      // of the server this bench started, after SIGTERM
  std::vector<std::string> failures;      // why the soak failed; empty: passed
};

// Runs the whole soak and prints its progress (stderr) and report (stdout); the exit
// code: 0 passed, 1 failed.
int run_soak(const SoakConfig& config);

void print_soak_report(const SoakResult& r);

}  // namespace troupe::bench
