// `troupe serve` end to end over real sockets: the daemon binary on the golden model with
// --port 0; completions and chat, streamed and not (streamed text equals the non-streamed
// text and the plain `troupe generate` output), /v1/models, /health, /metrics, tokenize,
// every bad input answered with its status and error body while the next request still
// succeeds, 8 concurrent streams, a client that disconnects mid-stream, the API key, and
// SIGTERM with a stream in flight -> the stream completes and the daemon exits 0.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "net/http_test_client.h"
#include "support/prometheus_text.h"
#include "support/run_troupe.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";
constexpr int kMaxModelLen = 256;

// One daemon for the suite (starting one per test would only repeat the model load).
class ServeE2E : public DaemonSuite<ServeE2E> {
 public:
  static std::vector<std::string> daemon_args() {
    return {kModelDir, "--port", "0", "--tcp-port", "0", "--max-model-len",
            std::to_string(kMaxModelLen), "--max-body-bytes", "65536"};
  }

 protected:
  static HttpResponse post(const std::string& path, const json& body) {
    return DaemonSuite::post(path, body.dump());
  }
};

json completion_body(const std::string& prompt, int max_tokens, bool stream) {
  return {{"model", "v41-tiny-seed7"}, {"prompt", prompt}, {"max_tokens", max_tokens},
          {"temperature", 0},          {"ignore_eos", true}, {"stream", stream}};
}

json chat_body(const std::string& content, int max_tokens, bool stream) {
  return {{"messages", {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", content}}}},
          {"max_tokens", max_tokens}, {"temperature", 0}, {"ignore_eos", true}, {"stream", stream}};
}

// The text of a streamed response, checking the SSE framing on the way: every event a
// JSON chunk of `object`, the last one [DONE], the last chunk's finish_reason.
std::string streamed_text(const HttpResponse& r, const std::string& object, std::string* finish) {
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
  const auto events = sse_payloads(r.body);
  EXPECT_GE(events.size(), 2u);
  if (events.empty()) return {};
  EXPECT_EQ(events.back(), "[DONE]");
  EXPECT_TRUE(r.body.ends_with("data: [DONE]\n\n"));
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    EXPECT_EQ(chunk["object"], object);
    if (chunk["choices"].empty()) continue;  // usage chunk
    const json& c = chunk["choices"][0];
    text += object == "chat.completion.chunk" ? c["delta"].value("content", "") : c["text"].get<std::string>();
    if (!c["finish_reason"].is_null()) *finish = c["finish_reason"];
  }
  return text;
}

TEST_F(ServeE2E, HealthAndModels) {
  EXPECT_EQ(http(port_, "GET", "/health").status, 200);
  const HttpResponse r = http(port_, "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  EXPECT_EQ(j["object"], "list");
  ASSERT_EQ(j["data"].size(), 1u);
  EXPECT_EQ(j["data"][0]["id"], "v41-tiny-seed7");
  EXPECT_EQ(j["data"][0]["max_model_len"], kMaxModelLen);
}

TEST_F(ServeE2E, CompletionStreamedEqualsWholeAndGenerate) {
  const HttpResponse whole = post("/v1/completions", completion_body("Once upon a time", 12, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json j = json::parse(whole.body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["completion_tokens"], 12);
  const std::string text = j["choices"][0]["text"];

  json body = completion_body("Once upon a time", 12, true);
  body["stream_options"] = {{"include_usage", true}};
  const HttpResponse streamed = post("/v1/completions", body);
  std::string finish;
  EXPECT_EQ(streamed_text(streamed, "text_completion", &finish), text);
  EXPECT_EQ(finish, "length");
  const auto events = sse_payloads(streamed.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["completion_tokens"], 12);

  // The plain single-sequence forward (troupe generate) gives the same greedy text.
  const RunResult gen = run_troupe("generate --model " + kModelDir +
                                   " --prompt 'Once upon a time' --max-tokens 12 --ignore-eos");
  ASSERT_EQ(gen.status, 0) << gen.out;
  EXPECT_EQ(gen.out, text + "\n");
}

TEST_F(ServeE2E, ChatStreamedEqualsWhole) {
  const HttpResponse whole = post("/v1/chat/completions", chat_body("Tell me a story", 10, false));
  ASSERT_EQ(whole.status, 200) << whole.body;
  const json j = json::parse(whole.body);
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["usage"]["completion_tokens"], 10);
  const HttpResponse streamed = post("/v1/chat/completions", chat_body("Tell me a story", 10, true));
  std::string finish;
  EXPECT_EQ(streamed_text(streamed, "chat.completion.chunk", &finish),
            j["choices"][0]["message"]["content"].get<std::string>());
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(json::parse(sse_payloads(streamed.body).front())["choices"][0]["delta"]["role"], "assistant");
}

TEST_F(ServeE2E, TokenizeRoundTrips) {
  const HttpResponse t = post("/tokenize", {{"prompt", "hello world"}});
  ASSERT_EQ(t.status, 200) << t.body;
  const json tokens = json::parse(t.body)["tokens"];
  EXPECT_GT(tokens.size(), 1u);
  const HttpResponse d = post("/detokenize", {{"tokens", tokens}});
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_NE(json::parse(d.body)["prompt"].get<std::string>().find("hello world"), std::string::npos);
}

TEST_F(ServeE2E, MetricsHaveTroupeNames) {
  ASSERT_EQ(post("/v1/completions", completion_body("a b c", 3, false)).status, 200);
  const HttpResponse m = http(port_, "GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_EQ(m.headers.at("content-type").rfind("text/plain", 0), 0u);
  for (const char* name : {"troupe:num_requests_running", "troupe:num_requests_waiting",
                           "troupe:kv_cache_usage_perc", "troupe:prompt_tokens_total",
                           "troupe:generation_tokens_total", "troupe:time_to_first_token_seconds_bucket",
                           "troupe:e2e_request_latency_seconds_count"})
    EXPECT_NE(m.body.find(std::string("\n") + name), std::string::npos) << name;
  EXPECT_GE(prometheus_value(m.body, "troupe:generation_tokens_total"), 3.0);
  EXPECT_GE(prometheus_value(m.body, "troupe:request_success_total{finished_reason=\"length\""),
            1.0);
  EXPECT_EQ(prometheus_value(m.body, "troupe:num_requests_running"), 0.0);
}

struct BadCase {
  const char* name;
  std::string method, path, body;
  int status;
  const char* code;   // error.code, or "" for null
  const char* param;  // error.param, or "" for null
};

TEST_F(ServeE2E, BadInputsGetErrorsAndServingGoesOn) {
  json long_prompt = completion_body("", 4, false);
  long_prompt["prompt"] = std::vector<int>(kMaxModelLen + 10, 5);
  json wrong_type = completion_body("hi", 4, false);
  wrong_type["max_tokens"] = "ten";
  json negative = completion_body("hi", 4, false);
  negative["max_tokens"] = -3;
  json absurd = completion_body("hi", 4, false);
  absurd["max_tokens"] = 1000000000;
  json unknown_model = completion_body("hi", 4, false);
  unknown_model["model"] = "gpt-4";
  json unknown_field = completion_body("hi", 2, false);
  unknown_field["frobnicate"] = {1, 2};
  const std::vector<BadCase> cases = {
      {"malformed json", "POST", "/v1/completions", R"({"prompt": "hi", )", 400, "", ""},
      {"not an object", "POST", "/v1/chat/completions", "[1, 2]", 400, "", ""},
      {"wrong type", "POST", "/v1/completions", wrong_type.dump(), 400, "", "max_tokens"},
      {"unknown model", "POST", "/v1/completions", unknown_model.dump(), 404, "model_not_found", "model"},
      {"prompt too long", "POST", "/v1/completions", long_prompt.dump(), 400, "context_length_exceeded", "prompt"},
      {"negative max_tokens", "POST", "/v1/completions", negative.dump(), 400, "", "max_tokens"},
      {"absurd max_tokens", "POST", "/v1/completions", absurd.dump(), 400, "context_length_exceeded", "max_tokens"},
      {"bad role", "POST", "/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})", 400, "", "messages[0].role"},
      {"oversized body", "POST", "/v1/completions", std::string(100000, ' '), 413, "request_too_large", ""},
      {"unknown route", "GET", "/v2/everything", "", 404, "", ""},
      {"wrong method", "GET", "/v1/completions", "", 405, "", ""},
      {"drain without instance", "POST", "/admin/drain", "{}", 400, "", "instance"},
      {"drain of a number", "POST", "/admin/drain", R"({"instance": 3})", 400, "", "instance"},
      // One process, no cluster router: nothing to drain to.
      {"drain here", "POST", "/admin/drain", R"({"instance": "d"})", 400, "", "instance"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    const HttpResponse r = http(port_, c.method, c.path, c.body);
    EXPECT_EQ(r.status, c.status) << r.body;
    const json err = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(err.contains("error")) << r.body;
    EXPECT_EQ(err["error"]["type"], "invalid_request_error");
    EXPECT_FALSE(err["error"]["message"].get<std::string>().empty());
    EXPECT_EQ(err["error"]["code"], *c.code ? json(c.code) : json(nullptr));
    EXPECT_EQ(err["error"]["param"], *c.param ? json(c.param) : json(nullptr));
    const HttpResponse good = post("/v1/completions", unknown_field);  // unknown fields ignored
    EXPECT_EQ(good.status, 200) << good.body;
  }
}

TEST_F(ServeE2E, ConcurrentStreamsMatchASingleClient) {
  const std::vector<std::string> prompts = {"The sea was calm", "Once upon a time", "1 2 3 4", "Hello"};
  std::vector<std::string> single;
  for (const auto& p : prompts) {
    const HttpResponse r = post("/v1/completions", completion_body(p, 16, false));
    ASSERT_EQ(r.status, 200) << r.body;
    single.push_back(json::parse(r.body)["choices"][0]["text"]);
  }
  constexpr int kClients = 10;
  std::vector<HttpResponse> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] { got[i] = post("/v1/completions", completion_body(prompts[i % 4], 16, true)); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i) {
    std::string finish;
    EXPECT_EQ(streamed_text(got[i], "text_completion", &finish), single[i % 4]) << "client " << i;
    EXPECT_EQ(finish, "length");
  }
}

TEST_F(ServeE2E, DisconnectMidStreamAbortsTheRequest) {
  const std::string aborted = "troupe:request_success_total{finished_reason=\"abort\"";
  const double before = prometheus_value(http(port_, "GET", "/metrics").body, aborted);
  ASSERT_GE(before, 0.0);
  const int fd = connect_to(port_);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, request_text("POST", "/v1/completions",
                                        completion_body("Once", kMaxModelLen - 8, true).dump())));
  char buf[256];
  ASSERT_GT(recv(fd, buf, sizeof buf, 0), 0);  // the stream has begun
  close(fd);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  double now = before;
  while (now < before + 1 && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    now = prometheus_value(http(port_, "GET", "/metrics").body, aborted);
  }
  EXPECT_EQ(now, before + 1);
  EXPECT_EQ(post("/v1/completions", completion_body("hi", 2, false)).status, 200);
}

TEST(ServeDaemon, ApiKeyAndSigtermFinishesTheStreamAndExitsZero) {
  Daemon d({kModelDir, "--port", "0", "--tcp-port", "0", "--api-key", "sekret"});
  const uint16_t port = d.port();
  ASSERT_NE(port, 0) << d.output();
  ASSERT_TRUE(d.wait_ready(port)) << d.output();
  const std::string body = completion_body("Once", 48, true).dump();
  const HttpResponse no_key = http(port, "POST", "/v1/completions", body);
  EXPECT_EQ(no_key.status, 401);
  EXPECT_EQ(json::parse(no_key.body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(http(port, "POST", "/v1/completions", body, "Authorization: Bearer wrong\r\n").status, 401);

  const int fd = connect_to(port);
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(send_all(fd, request_text("POST", "/v1/completions", body, "Authorization: Bearer sekret\r\n")));
  char first[64];
  const ssize_t n = recv(fd, first, sizeof first, MSG_PEEK);  // the stream has begun
  ASSERT_GT(n, 0);
  std::thread stopper([&] { EXPECT_EQ(d.stop(SIGTERM), 0) << d.output(); });
  const HttpResponse r = parse_response(read_to_eof(fd));
  close(fd);
  stopper.join();
  std::string finish;
  streamed_text(r, "text_completion", &finish);
  EXPECT_EQ(finish, "length");  // finished within the grace period, not aborted
  EXPECT_NE(d.output().find("SIGTERM: shutting down"), std::string::npos) << d.output();
}

}  // namespace
}  // namespace troupe::testing
