// `troupe serve --data-parallel-size 3 --enable-expert-parallel` (DEP-3 with a redundant
// expert slot per rank, issue 10) over HTTP: concurrent completions get the greedy tokens
// of the plain one-rank Engine, and /metrics has each rank's state gauges under a
// `rank` label beside the instance total.
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "net/http_test_client.h"
#include "runtime/engine.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/prometheus_text.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

class ServeDep : public DaemonSuite<ServeDep> {
 public:
  static std::vector<std::string> daemon_args() {
    return {kModelDir,  "--port",         "0",     "--tcp-port",           "0",
            "--max-model-len", "512",     "--block-size", "16", "--kv-cache-memory-bytes",
            "16MiB",    "--max-num-seqs", "8", "--data-parallel-size", "3", "--enable-expert-parallel",
            "--num-redundant-experts", "3", "--threads", "2"};
  }
};

std::vector<int32_t> plain_greedy(const std::vector<int32_t>& prompt, int64_t n) {
  return runtime::engine_greedy(*golden_model().forward, prompt, n);
}

TEST_F(ServeDep, ConcurrentCompletionsGetTheOneRankTokensOverThreeRanks) {
  const int kRequests = 6;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kRequests; ++i) prompts.push_back(random_tokens(12 + 17 * i, 400 + i));
  std::vector<HttpResponse> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      const json body = {{"model", "v41-tiny-seed7"}, {"prompt", prompts[i]}, {"max_tokens", 10},
                         {"temperature", 0},          {"ignore_eos", true},  {"return_token_ids", true}};
      responses[i] = DaemonSuite::post("/v1/completions", body.dump());
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body;
    const json j = json::parse(responses[i].body);
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), plain_greedy(prompts[i], 10))
        << "request " << i;
  }
  const std::string m = http(port_, "GET", "/metrics").body;
  for (int r = 0; r < 3; ++r) {
    const std::string label = "rank=\"" + std::to_string(r) + "\"";
    EXPECT_EQ(series_with(m, "troupe:num_requests_running", label), 0) << m;
    EXPECT_EQ(series_with(m, "troupe:kv_cache_used_blocks", label), 0) << m;
  }
  EXPECT_EQ(series_with(m, "troupe:num_requests_running", "rank=\"3\""), -1);  // three ranks
  EXPECT_EQ(http(port_, "GET", "/health").status, 200);
}

}  // namespace
}  // namespace troupe::testing
