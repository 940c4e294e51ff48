// `troupe serve --speculative-config '{"method": "dspark", "num_speculative_tokens": 3}'`
// over HTTP (issue 13): concurrent greedy completions of mixed lengths, one with n = 2,
// beside a stream whose client disconnects (an abort), get the plain Engine's tokens
// token for token - async scheduling, sync scheduling, and DEP-2 (expert parallel) - and
// /metrics has vLLM's spec_decode series counting the verified drafts.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "net/http_test_client.h"
#include "runtime/golden_engine_config.h"
#include "support/golden.h"
#include "support/prometheus_text.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using json = nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";
const std::string kSpec = R"({"method": "dspark", "num_speculative_tokens": 3})";

std::vector<std::string> spec_daemon(std::vector<std::string> extra) {
  std::vector<std::string> args = {kModelDir, "--port",          "0",   "--tcp-port",
                                   "0",       "--max-model-len", "512", "--block-size",
                                   "16",      "--threads",       "2",   "--speculative-config",
                                   kSpec};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

struct AsyncScheduling : DaemonSuite<AsyncScheduling> {
  static std::vector<std::string> daemon_args() { return spec_daemon({}); }
};
struct SyncScheduling : DaemonSuite<SyncScheduling> {
  static std::vector<std::string> daemon_args() { return spec_daemon({"--no-async-scheduling"}); }
};
struct ExpertParallelTwoRanks : DaemonSuite<ExpertParallelTwoRanks> {
  static std::vector<std::string> daemon_args() {
    return spec_daemon({"--data-parallel-size", "2", "--enable-expert-parallel"});
  }
};

json completion(const std::vector<int32_t>& prompt, int64_t max_tokens, int n, bool stream) {
  return {{"prompt", prompt},   {"max_tokens", max_tokens}, {"n", n},          {"temperature", 0},
          {"ignore_eos", true}, {"return_token_ids", true}, {"stream", stream}};
}

template <class Suite>
class ServeSpeculative : public Suite {
 protected:
  // Opens a stream of many tokens, waits for its first bytes and hangs up: the server
  // aborts the request. Returns once the abort is counted (30 s at most).
  static void abort_a_stream() {
    const std::string aborted = "troupe:request_success_total{finished_reason=\"abort\"";
    const double before = prometheus_value(http(Suite::port_, "GET", "/metrics").body, aborted);
    const int fd = connect_to(Suite::port_);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, request_text("POST", "/v1/completions",
                                          completion(random_tokens(9, 31), 400, 1, true).dump())));
    char buf[256];
    ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // the stream has begun
    close(fd);
    EXPECT_TRUE(eventually(
        [&] {
          return prometheus_value(http(Suite::port_, "GET", "/metrics").body, aborted) >=
                 before + 1;
        },
        30))
        << Suite::daemon_->output();
  }
};

using Suites = ::testing::Types<AsyncScheduling, SyncScheduling, ExpertParallelTwoRanks>;
TYPED_TEST_SUITE(ServeSpeculative, Suites);

TYPED_TEST(ServeSpeculative, GreedyCompletionsEqualPlainGreedyAndMetricsCountTheDrafts) {
  const int kRequests = 5;
  std::vector<std::vector<int32_t>> prompts;
  std::vector<int64_t> lengths;
  for (int i = 0; i < kRequests; ++i) {
    prompts.push_back(random_tokens(3 + 29 * i, 500 + i));
    lengths.push_back(6 + 5 * i);
  }
  std::vector<HttpResponse> responses(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i)
    clients.emplace_back([&, i] {
      const int n = i == 2 ? 2 : 1;
      responses[i] = http(TestFixture::port_, "POST", "/v1/completions",
                          completion(prompts[i], lengths[i], n, false).dump());
    });
  this->abort_a_stream();  // while the others run
  for (auto& t : clients) t.join();
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_EQ(responses[i].status, 200) << responses[i].body;
    const json j = json::parse(responses[i].body);
    // The plain (non-speculative) one-rank Engine's greedy tokens.
    const std::vector<int32_t> want =
        runtime::engine_greedy(*golden_model().forward, prompts[i], lengths[i]);
    ASSERT_EQ(j["choices"].size(), i == 2 ? 2u : 1u);
    for (const json& c : j["choices"]) {
      EXPECT_EQ(c["token_ids"].get<std::vector<int32_t>>(), want) << "request " << i;
      EXPECT_EQ(c["finish_reason"], "length");
    }
  }
  const std::string m = http(TestFixture::port_, "GET", "/metrics").body;
  const double drafts = prometheus_value(m, "troupe:spec_decode_num_drafts_total");
  const double draft_tokens = prometheus_value(m, "troupe:spec_decode_num_draft_tokens_total");
  EXPECT_GT(drafts, 0) << m;
  EXPECT_GE(draft_tokens, drafts);
  EXPECT_LE(draft_tokens, 3 * drafts);
  EXPECT_GE(prometheus_value(m, "troupe:spec_decode_num_accepted_tokens_total"), 0) << m;
  for (const char* pos : {"position=\"0\"", "position=\"1\"", "position=\"2\""})
    EXPECT_GE(series_with(m, "troupe:spec_decode_num_accepted_tokens_per_pos_total", pos), 0)
        << pos << "\n"
        << m;
  EXPECT_EQ(prometheus_value(m, "troupe:num_requests_running"), 0.0);
  EXPECT_EQ(prometheus_value(m, "troupe:kv_cache_used_blocks"), 0.0);
}

// Refused at start-up: the test-only oracle, and a bad JSON key, each naming the key.
TEST(ServeSpeculativeConfig, TheOracleModeAndABadKeyStopStartUp) {
  for (const std::string& spec :
       {std::string(R"({"method": "oracle", "num_speculative_tokens": 2})"),
        std::string(R"({"method": "dspark", "num_speculative_tokens": 2, "k": 1})")}) {
    Daemon d({kModelDir, "--port", "0", "--tcp-port", "0", "--speculative-config", spec});
    EXPECT_NE(d.wait_exit(std::chrono::seconds(60)), 0);
    EXPECT_NE(d.output().find("speculative-config"), std::string::npos) << d.output();
  }
}

}  // namespace
}  // namespace troupe::testing
