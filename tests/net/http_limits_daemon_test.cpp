// `troupe serve` with short HTTP timeouts, or a small connection cap, set by flags (the
// config keys reach the server), on the golden model: a half-sent header or body gets
// 408, an idle kept-alive connection is closed, HEAD has no body, the connection over the
// cap gets 503, and a completion's greedy text is the same before and after.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "net/http_raw.h"
#include "net/http_test_client.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

// The daemon's HTTP port once /health answers 200; 0 if it does not.
uint16_t start_daemon(Daemon& d) {
  const uint16_t port = d.port();
  return port != 0 && d.wait_ready(port) ? port : 0;
}

std::vector<std::string> args_with(std::vector<std::string> flags) {
  std::vector<std::string> a = {kModelDir, "--port",          "0",  "--tcp-port",
                                "0",       "--max-model-len", "256"};
  a.insert(a.end(), flags.begin(), flags.end());
  return a;
}

std::string greedy_text(uint16_t port) {
  const std::string body = json{
      {"prompt", "Once upon a time"},
      {"max_tokens", 8},
      {"temperature", 0},
      {"ignore_eos", true}}.dump();
  const HttpResponse r =
      parse_response(raw_exchange(port, request_text("POST", "/v1/completions", body)));
  EXPECT_EQ(r.status, 200) << r.body;
  return r.status == 200 ? json::parse(r.body)["choices"][0]["text"].get<std::string>() : "";
}

TEST(HttpLimitsDaemon, TimeoutsAndHeadFromFlags) {
  Daemon d(args_with({"--http-header-timeout", "300ms", "--http-body-timeout", "300ms",
                      "--http-idle-timeout", "300ms"}));
  const uint16_t port = start_daemon(d);
  ASSERT_NE(port, 0) << d.output();
  const std::string text = greedy_text(port);
  ASSERT_FALSE(text.empty());

  for (const std::string partial :
       {"GET /health HTTP/1.1\r\nHo",
        "POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\n{"}) {
    HttpResponse r = parse_response(raw_exchange(port, partial));
    EXPECT_EQ(r.status, 408) << r.body;
    EXPECT_EQ(r.headers["connection"], "close");
  }
  const int idle = raw_connect(port);
  ASSERT_TRUE(send_all(idle, keep_alive_request("GET", "/health")));
  std::string pending;
  EXPECT_EQ(read_response(idle, pending).status, 200);
  EXPECT_EQ(read_to_eof(idle), "");  // closed by the idle timeout, nothing sent
  close(idle);

  HttpResponse head = parse_response(
      raw_exchange(port, "HEAD /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_EQ(head.status, 200);
  EXPECT_NE(head.headers["content-length"], "0");
  EXPECT_EQ(head.body, "");
  EXPECT_EQ(greedy_text(port), text);
}

TEST(HttpLimitsDaemon, ConnectionCapFromFlags) {
  Daemon d(args_with({"--max-connections", "3"}));
  const uint16_t port = start_daemon(d);
  ASSERT_NE(port, 0) << d.output();
  const std::string text = greedy_text(port);
  ASSERT_FALSE(text.empty());
  // Three connections answered (so surely counted). The server frees a closed
  // connection's place when it reads the close, so one of the earlier requests' places
  // may still be taken for a moment: a 503 here is retried.
  std::vector<int> open;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (open.size() < 3 && std::chrono::steady_clock::now() < until) {
    const int fd = raw_connect(port);
    ASSERT_TRUE(send_all(fd, keep_alive_request("GET", "/health")));
    std::string p;
    if (read_response(fd, p).status == 200) {
      open.push_back(fd);
    } else {
      close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  ASSERT_EQ(open.size(), 3u);
  HttpResponse refused = parse_response(raw_exchange(port, keep_alive_request("GET", "/health")));
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(refused.headers["connection"], "close");
  EXPECT_NE(refused.body.find("too many connections"), std::string::npos) << refused.body;
  for (int fd : open) close(fd);
  // The places free once the server sees the closes; until then a request may get 503.
  const auto freed_by = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (parse_response(raw_exchange(port, request_text("GET", "/health", ""))).status != 200 &&
         std::chrono::steady_clock::now() < freed_by)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(greedy_text(port), text);
}

}  // namespace
}  // namespace troupe::testing
