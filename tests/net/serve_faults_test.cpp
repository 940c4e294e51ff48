// Failures end to end over real sockets: `troupe serve --inject-faults ...` on the golden
// model. A failed step gives a 500 (a dead rank a 503) (non-streamed) or an error event then [DONE]
// (streamed), never finish_reason "abort"; a dead rank fails its request, the instance
// restarts (/health 503 "restarting" meanwhile, held open by a slow rank start) and
// /health and the next request recover, and past --max-engine-restarts the instance is
// down; a request past --request-timeout gets a timeout error and frees its blocks; a
// stream whose client never reads is aborted past --max-queued-output-bytes and frees
// its blocks; a failing tokenizer call is a 500; errors are counted by cause in /metrics
// and logged with the request id; each time the next request still gets `troupe
// generate`'s text. A config that cannot work stops start-up.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "net/http_test_client.h"
#include "net/tcp_test_client.h"
#include "support/prometheus_text.h"
#include "support/run_troupe.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";
const std::string kPrompt = "Once upon a time";
constexpr int kTokens = 6;

HttpResponse complete(uint16_t port, bool stream) {
  const json body = {{"prompt", kPrompt},
                     {"max_tokens", kTokens},
                     {"temperature", 0},
                     {"ignore_eos", true},
                     {"stream", stream}};
  return http(port, "POST", "/v1/completions", body.dump());
}

// The plain single-sequence forward's text for the request above.
const std::string& reference_text() {
  static const std::string text = [] {
    const RunResult gen = run_troupe("generate --model " + kModelDir + " --prompt '" + kPrompt +
                                     "' --max-tokens " + std::to_string(kTokens) + " --ignore-eos");
    EXPECT_EQ(gen.status, 0) << gen.out;
    return gen.out.substr(0, gen.out.size() - 1);  // its newline
  }();
  return text;
}

// A non-streamed error response: the status and the OpenAI error body's message.
std::string error_message(const HttpResponse& r, int status) {
  EXPECT_EQ(r.status, status) << r.body;
  const json j = json::parse(r.body, nullptr, false);
  if (!j.is_object() || !j.contains("error")) return "<no error body: " + r.body + ">";
  return j["error"].value("message", "");
}

// The next request is served as if nothing had happened.
void expect_serves_on(uint16_t port) {
  const HttpResponse r = complete(port, false);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], reference_text());
}

double metric(uint16_t port, const std::string& series) {
  return prometheus_value(http(port, "GET", "/metrics").body, series);
}

struct FaultyDaemon {
  explicit FaultyDaemon(std::vector<std::string> extra) : d(args(std::move(extra))) {
    port = d.port();
    ready = port != 0 && d.wait_ready(port);
  }
  static std::vector<std::string> args(std::vector<std::string> extra) {
    std::vector<std::string> a = {kModelDir, "--port", "0", "--tcp-port", "0"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }
  Daemon d;
  uint16_t port = 0;
  bool ready = false;
};

TEST(ServeFaults, AFailedStepIsA500NotAnAbortAndIsCountedAndLogged) {
  FaultyDaemon f({"--inject-faults", "tokenize-fail@1,step-throw@1"});
  ASSERT_TRUE(f.ready) << f.d.output();
  EXPECT_NE(error_message(complete(f.port, false), 500).find("injected fault: tokenize-fail"),
            std::string::npos);
  const std::string step = error_message(complete(f.port, false), 500);
  EXPECT_NE(step.find("step 0 failed: injected fault: step-throw"), std::string::npos) << step;
  expect_serves_on(f.port);
  EXPECT_EQ(metric(f.port, "troupe:request_errors_total{cause=\"step_failed\""), 1.0);
  EXPECT_EQ(metric(f.port, "troupe:failed_steps_total"), 1.0);
  EXPECT_EQ(metric(f.port, "troupe:request_success_total{finished_reason=\"abort\""), 0.0);
  EXPECT_EQ(metric(f.port, "troupe:kv_cache_used_blocks"), 0.0);
  EXPECT_EQ(f.d.stop(SIGTERM), 0);
  const std::string log = f.d.output();
  EXPECT_NE(log.find("failed (step_failed): step 0 failed"), std::string::npos) << log;
  EXPECT_NE(log.find("step 0 (rank step 1) failed: injected fault: step-throw; failing requests"),
            std::string::npos)
      << log;
}

TEST(ServeFaults, AFailingTokenizerCallOverTcpIsAnErrorFrameAndTheConnectionGoesOn) {
  FaultyDaemon f({"--inject-faults", "tokenize-fail@1"});
  ASSERT_TRUE(f.ready) << f.d.output();
  TcpClient c(tcp_port_of(f.d));
  ASSERT_TRUE(c.send(submit(1, kPrompt, kTokens)));
  const std::optional<json> e = c.read();
  ASSERT_TRUE(e);
  EXPECT_EQ((*e)["type"], "error") << e->dump();
  EXPECT_NE(e->dump().find("injected fault: tokenize-fail"), std::string::npos) << e->dump();
  ASSERT_TRUE(c.send(submit(2, kPrompt, kTokens)));  // the same connection, served
  std::map<std::string, TcpResult> r = {{"2", {}}};
  read_until_done(c, r);
  EXPECT_EQ(r["2"].text, reference_text());
  EXPECT_EQ(r["2"].done["finish_reason"], "length");
}

TEST(ServeFaults, AFailedStepEndsAStreamWithAnErrorEventThenDone) {
  FaultyDaemon f({"--inject-faults", "step-throw@1"});
  ASSERT_TRUE(f.ready) << f.d.output();
  const HttpResponse r = complete(f.port, true);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto events = sse_payloads(r.body);
  ASSERT_GE(events.size(), 2u) << r.body;
  EXPECT_EQ(events.back(), "[DONE]");
  const json err = json::parse(events[events.size() - 2]);
  ASSERT_TRUE(err.contains("error")) << err.dump();
  EXPECT_NE(err["error"].value("message", "").find("injected fault: step-throw"),
            std::string::npos);
  for (const std::string& e : events) EXPECT_EQ(e.find("\"abort\""), std::string::npos) << e;
  expect_serves_on(f.port);
}

TEST(ServeFaults, ADeadRankFailsItsRequestAndTheInstanceRestarts) {
  FaultyDaemon f({"--inject-faults", "rank-exit@2"});
  ASSERT_TRUE(f.ready) << f.d.output();
  // An engine that died is a 503 (unavailable: a retry may find it back), not a 500.
  const std::string why = error_message(complete(f.port, false), 503);
  EXPECT_NE(why.find("rank died"), std::string::npos) << why;
  ASSERT_TRUE(f.d.wait_ready(f.port)) << f.d.output();  // /health 200 again
  expect_serves_on(f.port);
  EXPECT_EQ(metric(f.port, "troupe:engine_restarts_total"), 1.0);
  EXPECT_EQ(metric(f.port, "troupe:request_errors_total{cause=\"engine_died\""), 1.0);
  EXPECT_EQ(metric(f.port, "troupe:kv_cache_used_blocks"), 0.0);
}

// The first rank exits at step 1; its replacement takes 5 s to start (rank-start-stall),
// which holds the restarting window open; the second rank exits at step 2, one death
// past --max-engine-restarts 1: down for good.
TEST(ServeFaults, HealthIs503RestartingWhileTheEngineRestartsAndDownPastTheLimit) {
  FaultyDaemon f({"--max-engine-restarts", "1", "--inject-faults",
                  "rank-exit@1,rank-start-stall@2:5000,rank-exit@2"});
  ASSERT_TRUE(f.ready) << f.d.output();
  EXPECT_NE(error_message(complete(f.port, false), 503).find("rank died"), std::string::npos);
  const std::string restarting = error_message(http(f.port, "GET", "/health"), 503);
  EXPECT_EQ(restarting.rfind("engine restarting: rank died: injected fault: rank-exit", 0), 0u)
      << restarting;
  ASSERT_TRUE(f.d.wait_ready(f.port)) << f.d.output();  // the new rank is up: 200
  EXPECT_EQ(metric(f.port, "troupe:engine_restarts_total"), 1.0);

  EXPECT_NE(error_message(complete(f.port, false), 503).find("rank died"), std::string::npos);
  const std::string down = error_message(http(f.port, "GET", "/health"), 503);
  EXPECT_EQ(down.rfind("engine down: rank died", 0), 0u) << down;
  EXPECT_NE(down.find("(1 restarts within 60 s"), std::string::npos) << down;
  const std::string refused = error_message(complete(f.port, false), 503);
  EXPECT_NE(refused.find("the engine is down"), std::string::npos) << refused;
  EXPECT_EQ(metric(f.port, "troupe:engine_restarts_total"), 1.0);
  EXPECT_EQ(metric(f.port, "troupe:request_errors_total{cause=\"engine_died\""), 3.0);
  EXPECT_EQ(f.d.stop(SIGTERM), 0);
}

// A client that asks for a long stream (4 choices of 4000 tokens with logprobs, ~16 MB
// of events) and never reads: once 64 KiB are queued for it (after the kernel's buffers,
// ~3.5 MB here) the request is aborted, its KV blocks come back, it is logged and
// counted, and other clients are served throughout. Measured: closed after 3540 of the
// 16000 tokens.
TEST(ServeFaults, AStreamNobodyReadsIsAbortedPastTheOutputLimitAndFreesItsBlocks) {
  FaultyDaemon f({"--max-queued-output-bytes", "64KiB"});
  ASSERT_TRUE(f.ready) << f.d.output();
  const json body = {{"prompt", kPrompt}, {"max_tokens", 4000}, {"temperature", 0},
                     {"ignore_eos", true}, {"logprobs", 20}, {"n", 4}, {"stream", true}};
  const int silent = connect_to(f.port, 4096);
  ASSERT_TRUE(send_all(silent, request_text("POST", "/v1/completions", body.dump())));
  const std::string closed =
      "troupe:slow_client_disconnects_total{api=\"http\",reason=\"output_limit\"";
  ASSERT_TRUE(eventually([&] { return metric(f.port, closed) == 1.0; }, 120)) << f.d.output();
  expect_serves_on(f.port);
  EXPECT_TRUE(eventually([&] { return metric(f.port, "troupe:kv_cache_used_blocks") == 0.0; }));
  EXPECT_EQ(metric(f.port, "troupe:request_success_total{finished_reason=\"abort\""), 4.0);
  EXPECT_EQ(metric(f.port, "troupe:num_requests_running"), 0.0);
  close(silent);
  EXPECT_EQ(f.d.stop(SIGTERM), 0);
  const std::string log = f.d.output();
  EXPECT_NE(log.find("does not read: "), std::string::npos) << log;
  EXPECT_NE(log.find("(max-queued-output-bytes); aborting request 0, closing"), std::string::npos)
      << log;
  EXPECT_NE(log.find("request 0 finished: abort"), std::string::npos) << log;
}

TEST(ServeFaults, ARequestPastTheTimeoutGetsATimeoutErrorAndFreesItsBlocks) {
  FaultyDaemon f({"--request-timeout", "1500ms", "--inject-faults", "step-stall@1:4000"});
  ASSERT_TRUE(f.ready) << f.d.output();
  const std::string why = error_message(complete(f.port, false), 500);
  EXPECT_NE(why.find("timed out after 1.5 s"), std::string::npos) << why;
  EXPECT_EQ(metric(f.port, "troupe:kv_cache_used_blocks"), 0.0);
  EXPECT_EQ(metric(f.port, "troupe:request_errors_total{cause=\"timeout\""), 1.0);
  // The stalled step counts as busy time; once it is reported the rank is free.
  for (int i = 0; i < 1000 && metric(f.port, "troupe:rank_busy_seconds_total") < 4.0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  expect_serves_on(f.port);
}

TEST(ServeFaults, JsonLogLinesAreObjects) {
  FaultyDaemon f({"--log-format", "json"});
  ASSERT_TRUE(f.ready) << f.d.output();
  expect_serves_on(f.port);
  EXPECT_EQ(f.d.stop(SIGTERM), 0);
  std::istringstream lines(f.d.output());
  int finished = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("troupe: ", 0) == 0) continue;  // the status lines on stdout
    const json j = json::parse(line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << line;
    EXPECT_TRUE(j.contains("ts") && j.contains("level") && j.contains("msg")) << line;
    finished += j.value("msg", "").find("finished: length prompt_tokens=") != std::string::npos;
  }
  EXPECT_EQ(finished, 1) << f.d.output();
}

TEST(ServeFaults, AConfigThatCannotWorkStopsStartUpWithTheNumbers) {
  Daemon d(FaultyDaemon::args({"--kv-cache-memory-bytes", "2MB"}));
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(60)), 2) << d.output();
  const std::string out = d.output();
  EXPECT_NE(out.find("the engine config cannot work"), std::string::npos) << out;
  EXPECT_NE(out.find("at least"), std::string::npos) << out;
  EXPECT_EQ(out.find("ready: serving"), std::string::npos) << out;
}

TEST(ServeFaults, ABadFaultSpecStopsStartUp) {
  expect_usage_errors({{"--port 0 --tcp-port 0 --inject-faults explode@1", "unknown kind"}},
                      "serve " + kModelDir + " ");
}

}  // namespace
}  // namespace troupe::testing
