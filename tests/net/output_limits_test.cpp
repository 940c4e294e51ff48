// Clients that do not read their output, in process over real sockets on 127.0.0.1
// (docs/serve.md "Clients that do not read"): an HTTP stream and a TCP request whose
// client never reads while the engine keeps producing (ScriptedEngine::flood_next). Past
// max_queued_bytes, or once a write moves no byte for write_timeout, the generation is
// aborted, the connection closed and troupe:slow_client_disconnects_total counted; the
// most any connection held queued stays under the cap; another client is served
// meanwhile. Without the limits the flood runs to its end (64 MiB queued) and each test
// fails. Also: a TCP frame still in the parse pool when the server drains (SIGTERM) is
// answered before the server stops.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>

#include "net/common/output_queue.h"
#include "net/http/server.h"
#include "net/http_raw.h"
#include "net/metrics/registry.h"
#include "net/metrics/serving_metrics.h"
#include "net/scripted_engine.h"
#include "net/tcp/server.h"
#include "net/tcp_test_client.h"

namespace troupe::testing {
namespace {

using nlohmann::json;
using ms = std::chrono::milliseconds;

constexpr size_t kCap = 256u << 10;    // max_queued_bytes of the cap tests
constexpr int kSmallWindow = 4096;     // the silent clients' receive buffer
const std::string kChunk(1024, 'z');  // the text of each flooded output

std::string streamed_completion() {
  return json{{"prompt", "Once"}, {"max_tokens", 16}, {"stream", true}}.dump();
}

class OutputLimits : public ::testing::Test {
 protected:
  void start_http(size_t cap, ms timeout) {
    net::http::ServerOptions o;
    o.port = 0;
    o.max_queued_bytes = cap;
    o.write_timeout = timeout;
    http_ = std::make_unique<net::http::Server>(o);
    port_ = http_->listen();
    http_->set_backend(backend());
  }
  void start_tcp(size_t cap, ms timeout) {
    net::tcp::TcpServerOptions o;
    o.port = 0;
    o.max_queued_bytes = cap;
    o.write_timeout = timeout;
    tcp_ = std::make_unique<net::tcp::TcpServer>(o);
    port_ = tcp_->listen();
    tcp_->set_backend(backend());
  }
  std::shared_ptr<net::http::Backend> backend() {
    auto b = scripted_backend(engine_, int64_t(1) << 20);
    b->registry = &registry_;
    b->metrics = &metrics_;
    return b;
  }
  void TearDown() override {
    engine_.stop();
    if (http_) http_->stop();
    if (tcp_) tcp_->stop();
  }
  double closed_for(const char* api, const char* reason) {
    return metrics_.slow_client_disconnects(api, reason).value();
  }
  // A silent client's request is aborted (its flood stops) and counted under `reason`.
  void expect_aborted(const char* api, const char* reason) {
    ASSERT_TRUE(eventually([&] { return engine_.aborts() == 1; }, 60))
        << "never aborted; " << api << " peak queued "
        << (http_ ? http_->peak_queued_bytes() : tcp_->peak_queued_bytes());
    EXPECT_EQ(closed_for(api, reason), 1.0);
    const char* other = std::string(reason) == net::kOutputLimit ? net::kWriteTimeout
                                                                 : net::kOutputLimit;
    EXPECT_EQ(closed_for(api, other), 0.0);
  }
  void expect_http_served() {
    const HttpResponse r = parse_response(raw_exchange(
        port_, request_text("POST", "/v1/completions",
                            json{{"prompt", "Once"}, {"max_tokens", 2}}.dump())));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "hello world");
  }
  void expect_tcp_served() {
    TcpClient c(port_);
    ASSERT_TRUE(c.send(submit(1, "Once", 2)));
    std::map<std::string, TcpResult> r = {{"1", {}}};
    read_until_done(c, r);
    EXPECT_EQ(r["1"].text, "hello world");
  }

  ScriptedEngine engine_;
  net::metrics::Registry registry_;
  net::metrics::ServingMetrics metrics_{registry_, "tiny"};
  std::unique_ptr<net::http::Server> http_;
  std::unique_ptr<net::tcp::TcpServer> tcp_;
  uint16_t port_ = 0;
};

TEST_F(OutputLimits, AnHttpStreamNobodyReadsIsAbortedOnceItsQueueIsFull) {
  start_http(kCap, ms(0));
  engine_.flood_next(kChunk);
  const int silent = connect_to(port_, kSmallWindow);
  ASSERT_TRUE(send_all(silent, request_text("POST", "/v1/completions", streamed_completion())));
  expect_aborted("http", net::kOutputLimit);
  EXPECT_LE(http_->peak_queued_bytes(), kCap);
  EXPECT_GT(http_->peak_queued_bytes(), kCap / 2);  // it did fill up first
  expect_http_served();
  // The connection was closed: reading ends (what the kernel held, then EOF), no [DONE].
  const std::string got = read_to_eof(silent);
  close(silent);
  EXPECT_EQ(got.find("[DONE]"), std::string::npos);
  EXPECT_TRUE(eventually([&] { return http_->connections() == 0; }));
}

TEST_F(OutputLimits, AnHttpStreamWhoseWritesStallIsAbortedAfterTheWriteTimeout) {
  start_http(/*cap=*/0, ms(300));
  engine_.flood_next(kChunk, std::chrono::microseconds(200));  // ~5 MB/s, without end
  const int silent = connect_to(port_, kSmallWindow);
  ASSERT_TRUE(send_all(silent, request_text("POST", "/v1/completions", streamed_completion())));
  expect_aborted("http", net::kWriteTimeout);
  expect_http_served();
  close(silent);
}

TEST_F(OutputLimits, ATcpRequestNobodyReadsIsAbortedOnceItsQueueIsFull) {
  start_tcp(kCap, ms(0));
  engine_.flood_next(kChunk);
  TcpClient silent(port_, kSmallWindow);
  ASSERT_TRUE(silent.send(submit(1, "Once", 16)));
  expect_aborted("tcp", net::kOutputLimit);
  EXPECT_LE(tcp_->peak_queued_bytes(), kCap);
  EXPECT_GT(tcp_->peak_queued_bytes(), kCap / 2);
  EXPECT_TRUE(tcp_->wait_idle(std::chrono::seconds(10)));  // its request ended
  expect_tcp_served();
  // Closed: the frames the kernel held, then the end, and never a done frame.
  for (std::optional<json> m; (m = silent.read());) EXPECT_EQ((*m)["type"], "tokens");
}

TEST_F(OutputLimits, ATcpRequestWhoseWritesStallIsAbortedAfterTheWriteTimeout) {
  start_tcp(/*cap=*/0, ms(300));
  engine_.flood_next(kChunk, std::chrono::microseconds(200));
  TcpClient silent(port_, kSmallWindow);
  ASSERT_TRUE(silent.send(submit(1, "Once", 16)));
  expect_aborted("tcp", net::kWriteTimeout);
  EXPECT_TRUE(tcp_->wait_idle(std::chrono::seconds(10)));
  expect_tcp_served();
}

// A prompt this long is parsed on the TCP server's parse pool (server.cpp).
const std::string kPoolPrompt(300u << 10, 'a');

TEST(TcpDrain, AFrameStillInTheParsePoolIsAnsweredBeforeTheServerStops) {
  std::mutex m;
  std::condition_variable cv;
  bool parsing = false, go_on = false;
  net::tcp::TcpServerOptions o;
  o.port = 0;
  o.on_offloaded_parse = [&] {
    std::unique_lock lock(m);
    parsing = true;
    cv.notify_all();
    cv.wait(lock, [&] { return go_on; });
  };
  ScriptedEngine engine;
  net::tcp::TcpServer server(o);
  const uint16_t port = server.listen();
  server.set_backend(scripted_backend(engine, int64_t(1) << 20));
  TcpClient c(port);
  ASSERT_TRUE(c.send(submit(1, kPoolPrompt, 1)));
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return parsing; }));
  }
  server.drain();  // SIGTERM, while the frame is in the pool
  EXPECT_FALSE(server.wait_idle(ms(0))) << "the frame in the pool does not count as busy";
  {
    std::lock_guard lock(m);
    go_on = true;
  }
  cv.notify_all();
  EXPECT_TRUE(server.wait_idle(std::chrono::seconds(10)));
  server.stop();  // the I/O threads end: only what was written before is there
  const std::optional<json> answer = c.read();
  ASSERT_TRUE(answer) << "the frame was dropped without an answer";
  EXPECT_EQ((*answer)["type"], "error");
  EXPECT_EQ((*answer)["id"], 1);
  EXPECT_EQ((*answer)["message"], "the server is shutting down");
  engine.stop();
}

}  // namespace
}  // namespace troupe::testing
