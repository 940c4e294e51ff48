// The HTTP server against hostile-but-realistic clients, over real sockets on 127.0.0.1:
// an in-process net::http::Server with the golden model's tokenizer and a scripted
// engine (ScriptedEngine) whose text is fixed and whose generations can be held open. Each
// case sends the bad input, checks the status, error body and `Connection: close`, then
// checks that a good request still gets the same text.
#include <gtest/gtest.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "model/tokenizer.h"
#include "net/http/server.h"
#include "net/http_raw.h"
#include "net/metrics/registry.h"
#include "net/scripted_engine.h"

namespace troupe::testing {
namespace {

using nlohmann::json;
namespace http = net::http;

std::string completion(const std::string& prompt, bool stream) {
  return json{{"prompt", prompt}, {"max_tokens", 2}, {"stream", stream}}.dump();
}

class HttpHostile : public ::testing::Test {
 protected:
  void start(http::ServerOptions o = {}) {
    o.port = 0;
    o.max_body_bytes = size_t(8) << 20;
    server_ = std::make_unique<http::Server>(std::move(o));
    port_ = server_->listen();
    auto b = scripted_backend(engine_, int64_t(1) << 24);
    b->info.max_body_bytes = size_t(8) << 20;
    b->registry = &registry_;
    server_->set_backend(b);
  }
  void TearDown() override {
    engine_.release();
    engine_.stop();
    if (server_) server_->stop();
  }
  // The good request every case ends with; its text must not change.
  void expect_good_request() {
    const HttpResponse r = parse_response(
        raw_exchange(port_, request_text("POST", "/v1/completions", completion("Once", false))));
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "hello world");
  }

  ScriptedEngine engine_;
  net::metrics::Registry registry_;
  std::unique_ptr<http::Server> server_;
  uint16_t port_ = 0;
};

// A refusal: the status, a JSON error whose message has `says`, and a closed connection.
void expect_refusal(const std::string& raw, int status, const std::string& says) {
  HttpResponse r = parse_response(raw);
  EXPECT_EQ(r.status, status) << raw;
  EXPECT_EQ(r.headers["connection"], "close") << raw;
  const json err = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(err.is_object() && err.contains("error")) << raw;
  EXPECT_NE(err["error"]["message"].get<std::string>().find(says), std::string::npos) << raw;
}

struct RawCase {
  const char* name;
  std::string request;
  int status;
  const char* says;  // in the error message
};

TEST_F(HttpHostile, MalformedRequestsGetTheirStatusAndServingGoesOn) {
  start();
  const std::string post = "POST /v1/completions HTTP/1.1\r\nHost: x\r\n";
  const std::vector<RawCase> cases = {
      {"no request line", "GARBAGE\r\n\r\n", 400, "malformed request"},
      {"bad version", "GET /health HTTP/1.1 x\r\nHost: x\r\n\r\n", 400, "malformed request"},
      {"bad target", "GET he alth HTTP/1.1\r\nHost: x\r\n\r\n", 400, "malformed request"},
      {"bad field", "GET /health HTTP/1.1\r\nHost: x\r\nNo Colon\r\n\r\n", 400, "bad field"},
      {"oversized header",
       "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(100000, 'a') + "\r\n\r\n", 431,
       "over the limit of 65536 bytes"},
      {"duplicate Content-Length", post + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n{}", 400,
       "Content-Length given 2 times"},
      {"conflicting Content-Length", post + "Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400,
       "bad Content-Length"},
      {"bad Content-Length", post + "Content-Length: 2x\r\n\r\n{}", 400, "bad Content-Length"},
      {"negative Content-Length", post + "Content-Length: -2\r\n\r\n{}", 400, "bad Content-Length"},
      {"Content-Length and chunked",
       post + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", 400,
       "malformed request"},
      {"bad chunk size", post + "Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400,
       "bad chunk"},
      {"huge chunk size",
       post + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n{}\r\n0\r\n\r\n", 400,
       "malformed request"},
      {"unknown coding", post + "Transfer-Encoding: gzip\r\n\r\n", 400, "must be chunked"},
      {"no Host", "GET /health HTTP/1.1\r\n\r\n", 400, "needs a Host header"},
      {"two Hosts", "GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400,
       "Host given more than once"},
      {"NUL after the JSON",
       post + "Connection: close\r\nContent-Length: 18\r\n\r\n{\"prompt\": \"hi\"}" +
           std::string(1, '\0') + "x",
       400, "NUL byte at offset 16"},
      {"NUL inside a string",
       post + "Connection: close\r\nContent-Length: 17\r\n\r\n{\"prompt\": \"h" +
           std::string(1, '\0') + "i\"}",
       400, "NUL byte at offset 13"},
  };
  for (const RawCase& c : cases) {
    SCOPED_TRACE(c.name);
    expect_refusal(raw_exchange(port_, c.request), c.status, c.says);
    expect_good_request();
  }
}

TEST_F(HttpHostile, HalfClosedMidRequestGets400) {
  start();
  const int fd = raw_connect(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHo"));
  shutdown(fd, SHUT_WR);
  expect_refusal(read_to_eof(fd), 400, "closed its side mid-request");
  close(fd);
  expect_good_request();
}

TEST_F(HttpHostile, LeadingEmptyLinesAreIgnored) {
  start();
  const HttpResponse r = parse_response(raw_exchange(
      port_, "\r\n\r\n\nGET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(r.status, 200) << r.body;
  // Between two requests on a kept-alive connection too.
  const int fd = raw_connect(port_);
  ASSERT_TRUE(send_all(
      fd, keep_alive_request("GET", "/health") + "\r\n" + keep_alive_request("GET", "/v1/models")));
  std::string pending;
  EXPECT_EQ(read_response(fd, pending).status, 200);
  const HttpResponse models = read_response(fd, pending);
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(json::parse(models.body)["data"][0]["id"], "tiny");
  close(fd);
  expect_good_request();
}

TEST_F(HttpHostile, HeadGetsTheHeadOfGetWithoutABody) {
  start();
  for (const char* path : {"/v1/models", "/health"}) {
    SCOPED_TRACE(path);
    const int fd = raw_connect(port_);
    ASSERT_GE(fd, 0);
    // HEAD, then GET on the same connection: the GET's response must follow the HEAD's
    // head directly, so no body bytes were sent for the HEAD.
    ASSERT_TRUE(send_all(fd, keep_alive_request("HEAD", path) + keep_alive_request("GET", path)));
    std::string pending;
    HttpResponse head = read_response(fd, pending, /*head_request=*/true);
    EXPECT_EQ(head.status, 200);
    EXPECT_EQ(pending.rfind("HTTP/1.1 200 OK\r\n", 0) == 0 || pending.empty(), true) << pending;
    HttpResponse get = read_response(fd, pending);
    EXPECT_EQ(get.status, 200);
    EXPECT_FALSE(get.body.empty());
    EXPECT_EQ(head.headers["content-length"], std::to_string(get.body.size()));
    EXPECT_EQ(head.headers["content-type"], get.headers["content-type"]);
    close(fd);
  }
  HttpResponse post_route = parse_response(
      raw_exchange(port_, "HEAD /tokenize HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(post_route.status, 405);
  EXPECT_EQ(post_route.headers["allow"], "POST");
  EXPECT_EQ(post_route.body, "");  // a HEAD response has no body, errors included
  expect_good_request();
}

TEST_F(HttpHostile, SlowClientsAreClosedAfterTheirTimeoutWhileOthersAreServed) {
  http::ServerOptions o;
  o.header_timeout = std::chrono::milliseconds(300);
  o.body_timeout = std::chrono::milliseconds(300);
  o.idle_timeout = std::chrono::milliseconds(300);
  start(o);
  const int half_header = raw_connect(port_);
  ASSERT_TRUE(send_all(half_header, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Le"));
  const int half_body = raw_connect(port_);
  ASSERT_TRUE(send_all(half_body,
                       "POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                       "Content-Length: 100\r\n\r\n{\"prompt\":"));
  const int silent = raw_connect(port_);  // connects and never sends
  const int idle = raw_connect(port_);    // one request, then nothing
  ASSERT_TRUE(send_all(idle, keep_alive_request("GET", "/health")));
  std::string pending;
  EXPECT_EQ(read_response(idle, pending).status, 200);
  expect_good_request();  // served while the slow ones hang
  expect_refusal(read_to_eof(half_header), 408, "the request header did not arrive within 0.3 s");
  expect_refusal(read_to_eof(half_body), 408, "the request body did not arrive within 0.3 s");
  EXPECT_EQ(read_to_eof(silent), "");  // nothing was asked, nothing is answered
  EXPECT_EQ(read_to_eof(idle), "");
  for (int fd : {half_header, half_body, silent, idle}) close(fd);
  expect_good_request();
}

TEST_F(HttpHostile, AGenerationInProgressHasNoIdleTimeout) {
  http::ServerOptions o;
  o.header_timeout = o.body_timeout = o.idle_timeout = std::chrono::milliseconds(100);
  start(o);
  engine_.hold();
  const int fd = raw_connect(port_);
  ASSERT_TRUE(send_all(fd, request_text("POST", "/v1/completions", completion("Once", true))));
  char c;
  ASSERT_EQ(recv(fd, &c, 1, MSG_PEEK), 1);  // the stream has begun
  // The one sleep of this file: the time any timeout would need to fire, and some.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  engine_.release();
  const HttpResponse r = parse_response(read_to_eof(fd));
  close(fd);
  EXPECT_EQ(r.status, 200);
  const auto events = sse_payloads(r.body);
  ASSERT_EQ(events.size(), 3u) << r.body;
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"].get<std::string>() +
                json::parse(events[1])["choices"][0]["text"].get<std::string>(),
            "hello world");
  expect_good_request();
}

TEST_F(HttpHostile, TheConnectionOverTheCapGets503) {
  http::ServerOptions o;
  o.max_connections = 2;
  start(o);
  std::vector<int> open;
  for (int i = 0; i < 2; ++i) {  // answered, so surely counted
    open.push_back(raw_connect(port_));
    ASSERT_TRUE(send_all(open.back(), keep_alive_request("GET", "/health")));
    std::string pending;
    ASSERT_EQ(read_response(open.back(), pending).status, 200);
  }
  EXPECT_EQ(server_->connections(), 2u);
  expect_refusal(raw_exchange(port_, keep_alive_request("GET", "/health")), 503,
                 "too many connections: the server is at its limit of 2");
  close(open[0]);
  // The closed connection's place frees once the server reads its EOF.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (server_->connections() >= 2 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  expect_good_request();
  close(open[1]);
}

TEST_F(HttpHostile, BytesPouredDuringAStreamAreDiscardedNotBuffered) {
  const http::ServerOptions defaults;
  start();
  engine_.hold();
  const int fd = raw_connect(port_);
  const std::string body = completion("Once", true);
  ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body));
  char c;
  ASSERT_EQ(recv(fd, &c, 1, MSG_PEEK), 1);  // the stream has begun: its watch read is on
  const size_t poured = size_t(8) << 20;
  ASSERT_TRUE(send_all(fd, std::string(poured, 'x')));
  // All of it is read (the server keeps reading to notice a disconnect), at most
  // pipeline_bytes of it is kept.
  const uint64_t want = poured - defaults.pipeline_bytes;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (server_->discarded_bytes() < want && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(server_->discarded_bytes(), want);
  engine_.release();
  // The stream ends whole, then the connection closes (its next request was cut).
  const HttpResponse r = parse_response(read_to_eof(fd));
  close(fd);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(sse_payloads(r.body).back(), "[DONE]");
  expect_good_request();
}

TEST_F(HttpHostile, APipelinedRequestUnderTheCapIsAnswered) {
  start();
  const int fd = raw_connect(port_);
  const std::string body = completion("Once", false);
  ASSERT_TRUE(send_all(fd, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\n\r\n" + body +
                               keep_alive_request("GET", "/health")));
  std::string pending;
  const HttpResponse first = read_response(fd, pending);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(json::parse(first.body)["choices"][0]["text"], "hello world");
  EXPECT_EQ(read_response(fd, pending).status, 200);
  close(fd);
  EXPECT_EQ(server_->discarded_bytes(), 0u);
}

// Two large prompts held inside their parse on the worker pool (on_offloaded_parse
// blocks): the one I/O thread still answers /health and /metrics, and the large
// requests have no answer yet. Were the parse on the I/O thread, /health could not answer.
TEST_F(HttpHostile, LargePromptsParseOffTheIoThreads) {
  std::mutex m;
  std::condition_variable cv;
  int entered = 0;
  bool go = false;
  http::ServerOptions o;
  o.io_threads = 1;
  o.parse_threads = 2;
  o.on_offloaded_parse = [&] {
    std::unique_lock lock(m);
    ++entered;
    cv.notify_all();
    cv.wait(lock, [&] { return go; });
  };
  start(o);
  std::string prompt;
  for (int i = 0; prompt.size() < (size_t(1) << 20); ++i)
    prompt += "word" + std::to_string(i % 97) + " ";
  const std::string body = completion(prompt, false);
  int big[2];
  for (int& fd : big) {
    fd = raw_connect(port_);
    ASSERT_TRUE(send_all(fd, request_text("POST", "/v1/completions", body)));
  }
  {
    std::unique_lock lock(m);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(30), [&] { return entered == 2; }));
  }
  for (const char* probe : {"/health", "/metrics"})
    EXPECT_EQ(parse_response(raw_exchange(port_, request_text("GET", probe, ""))).status, 200);
  for (int fd : big) EXPECT_FALSE(has_answered(fd));  // still parsing
  {
    std::lock_guard lock(m);
    go = true;
  }
  cv.notify_all();
  for (int fd : big) {
    const HttpResponse r = parse_response(read_to_eof(fd));
    close(fd);
    ASSERT_EQ(r.status, 200) << r.body.substr(0, 200);
    const json j = json::parse(r.body);
    EXPECT_EQ(j["choices"][0]["text"], "hello world");
    EXPECT_EQ(j["usage"]["prompt_tokens"], engine_.last_prompt_tokens());
    EXPECT_GT(engine_.last_prompt_tokens(), 100000);  // the whole prompt was tokenized
  }
  expect_good_request();
}

}  // namespace
}  // namespace troupe::testing
