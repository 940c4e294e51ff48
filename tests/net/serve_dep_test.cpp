// `troupe serve --data-parallel-size 3 --enable-expert-parallel` (DEP-3 with a redundant
// expert slot per rank, issue 10) with live EPLB replanning every 3 steps over HTTP:
// concurrent completions get the greedy tokens of the plain one-rank Engine through the
// placement switches, and /metrics has each rank's state gauges under a `rank` label
// beside the instance total, and the switches with their balance.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "net/http_test_client.h"
#include "runtime/engine.h"
#include "runtime/eplb/counts_trace.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/prometheus_text.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

// Where the daemon records its routing counts (expert-counts-file): one per test process.
std::string counts_path() { return "/tmp/troupe-servedep-" + std::to_string(::getpid()) + ".jsonl"; }

class ServeDep : public DaemonSuite<ServeDep> {
 public:
  static std::vector<std::string> daemon_args() {
    std::remove(counts_path().c_str());
    return {kModelDir,  "--port",         "0",     "--tcp-port",           "0",
            "--max-model-len", "512",     "--block-size", "16", "--kv-cache-memory-bytes",
            "16MiB",    "--max-num-seqs", "8", "--data-parallel-size", "3", "--enable-expert-parallel",
            "--num-redundant-experts", "3", "--threads", "2", "--enable-eplb",
            "--eplb-config", R"({"window_size": 4, "step_interval": 3})",
            "--expert-counts-file", counts_path()};
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
      const json body = {{"model", "v41-tiny-seed7"}, {"prompt", prompts[i]}, {"max_tokens", 16},
                         {"temperature", 0},          {"ignore_eos", true},  {"return_token_ids", true}};
      responses[i] = DaemonSuite::post("/v1/completions", body.dump());
    });
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body;
    const json j = json::parse(responses[i].body);
    EXPECT_EQ(j["choices"][0]["token_ids"].get<std::vector<int32_t>>(), plain_greedy(prompts[i], 16))
        << "request " << i;
  }
  // The planner works beside the steps and a new placement goes live at a later step: when
  // the first round ended before one did, more requests (counted in the trace below too)
  // give it the steps.
  std::string m = http(port_, "GET", "/metrics").body;
  for (int extra = 0; extra < 8 && series_with(m, "troupe:eplb_rebalances_total", "") < 1; ++extra) {
    prompts.push_back(random_tokens(20, 500 + extra));
    const json body = {{"model", "v41-tiny-seed7"}, {"prompt", prompts.back()}, {"max_tokens", 16},
                       {"temperature", 0},          {"ignore_eos", true}};
    ASSERT_EQ(DaemonSuite::post("/v1/completions", body.dump()).status, 200);
    m = http(port_, "GET", "/metrics").body;
  }
  for (int r = 0; r < 3; ++r) {
    const std::string label = "rank=\"" + std::to_string(r) + "\"";
    EXPECT_EQ(series_with(m, "troupe:num_requests_running", label), 0) << m;
    EXPECT_EQ(series_with(m, "troupe:kv_cache_used_blocks", label), 0) << m;
  }
  EXPECT_EQ(series_with(m, "troupe:num_requests_running", "rank=\"3\""), -1);  // three ranks
  EXPECT_GE(series_with(m, "troupe:eplb_rebalances_total", ""), 1) << m;
  const double after = series_with(m, "troupe:eplb_balance", "when=\"after\"");
  EXPECT_GT(after, 0.0) << m;
  EXPECT_LE(after, 1.0) << m;
  EXPECT_GT(series_with(m, "troupe:eplb_balance", "when=\"before\""), 0.0) << m;

  // The recording: every forward row (prompt tokens and every output token but the last)
  // routed top_k picks, summed over the ranks, one line per step. The
  // planner writes a step once all ranks reported it: wait a little for the last.
  const model::ModelConfig& c = golden_model().config;
  int64_t rows = 0;
  for (const auto& p : prompts) rows += static_cast<int64_t>(p.size()) + 16 - 1;
  std::vector<double> per_layer;
  for (int i = 0; i < 100; ++i) {
    per_layer.assign(c.num_hidden_layers, 0);
    for (const runtime::eplb::ExpertLoads& step : runtime::eplb::read_counts_trace(counts_path())) {
      ASSERT_EQ(step.num_layers, c.num_hidden_layers);
      ASSERT_EQ(step.num_logical, c.n_routed_experts);
      for (int64_t l = 0; l < step.num_layers; ++l)
        for (int64_t e = 0; e < step.num_logical; ++e) per_layer[l] += step.weight[l * step.num_logical + e];
    }
    if (per_layer.front() >= double(rows * c.top_k)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  // The first layer sees every row; with bounded replay (MODEL.md 6) later layers run a
  // prompt's bounded tail only, so fewer, but always whole rows of top_k picks.
  EXPECT_EQ(per_layer[0], double(rows * c.top_k));
  for (int64_t l = 1; l < c.num_hidden_layers; ++l) {
    EXPECT_LE(per_layer[l], per_layer[0]) << "layer " << l;
    EXPECT_GT(per_layer[l], 0) << "layer " << l;
    EXPECT_EQ(std::fmod(per_layer[l], double(c.top_k)), 0.0) << "layer " << l;
  }
  std::remove(counts_path().c_str());
  EXPECT_EQ(http(port_, "GET", "/health").status, 200);
}

}  // namespace
}  // namespace troupe::testing
