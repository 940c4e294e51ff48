// `troupe serve` under many clients and a real one: 64 concurrent streaming completions
// (each token sequence equals a single client's; afterwards /metrics shows no KV block
// held and nothing running, and the scheduler's per-step figures add up), and the
// official `openai` npm client (tests/net/npm, installed by scripts/test.sh) streaming a
// chat completion whose text equals the non-streamed one.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include <nlohmann/json.hpp>

#include "net/http_test_client.h"
#include "support/prometheus_text.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";
const std::filesystem::path kNpmDir = std::filesystem::path(TROUPE_TEST_DATA).parent_path() / "net/npm";
constexpr int kMaxTokens = 16;

class ServeClients : public DaemonSuite<ServeClients> {
 public:
  static std::vector<std::string> daemon_args() {
    return {kModelDir, "--port", "0", "--tcp-port", "0", "--max-model-len", "512"};
  }

 protected:
  static HttpResponse post(const std::string& path, const json& body) {
    return DaemonSuite::post(path, body.dump());
  }
};

// Greedy with a fixed seed; streamed with the usage chunk.
json completion_body(const std::string& prompt, bool stream) {
  json body = {{"model", "v41-tiny-seed7"}, {"prompt", prompt}, {"max_tokens", kMaxTokens},
               {"temperature", 0},          {"seed", 7},        {"ignore_eos", true},
               {"stream", stream}};
  if (stream) body["stream_options"] = {{"include_usage", true}};
  return body;
}

// The text deltas of a streamed completion, one per engine output: the server sends an
// event per output and the engine gives one token per request and step, so this is the
// token sequence as text. Checks that the stream completed: every event a chunk, [DONE]
// last, finish_reason "length", kMaxTokens completion tokens in the usage.
std::vector<std::string> streamed_tokens(const HttpResponse& r) {
  EXPECT_EQ(r.status, 200) << r.body;
  const auto events = sse_payloads(r.body);
  EXPECT_GE(events.size(), 2u) << r.body;
  if (events.size() < 2) return {};
  EXPECT_EQ(events.back(), "[DONE]");
  std::vector<std::string> tokens;
  std::string finish;
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    const json chunk = json::parse(events[i]);
    const json& c = chunk["choices"].at(0);
    tokens.push_back(c["text"]);
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(finish, "length");
  EXPECT_EQ(json::parse(events[events.size() - 2])["usage"]["completion_tokens"], kMaxTokens);
  return tokens;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) out += p;
  return out;
}

// Polls /metrics until `done` holds for it, or the deadline; returns the last text.
template <class Pred>
std::string poll_metrics(uint16_t port, Pred done, std::chrono::seconds deadline) {
  const auto until = Clock::now() + deadline;
  std::string text = http(port, "GET", "/metrics").body;
  while (!done(text) && Clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    text = http(port, "GET", "/metrics").body;
  }
  return text;
}

TEST_F(ServeClients, SixtyFourStreamsMatchASingleClientAndLeakNoKvBlock) {
  // One long prompt (several 64-token KV blocks) so the clients share a cached prefix.
  std::string long_prompt;
  for (int i = 0; i < 20; ++i) long_prompt += "the sea was calm and the sky was grey; ";
  const std::vector<std::string> prompts = {"The sea was calm", "Once upon a time", "1 2 3 4",
                                            "Hello", long_prompt};
  const double admitted_before = prometheus_value(http(port_, "GET", "/metrics").body,
                                                  "troupe:num_requests_admitted_per_step_sum");
  // A single client's tokens for each prompt (streamed alone; its text is the whole one's).
  // The first request of a prompt warms the prefix cache: with bounded replay (MODEL.md
  // §6) a prefill from a cached prefix may differ from one from position 0 (the documented
  // non-equivalence), and the 64 clients below all find the long prompt cached.
  std::vector<std::vector<std::string>> single;
  for (const auto& p : prompts) {
    ASSERT_EQ(post("/v1/completions", completion_body(p, false)).status, 200);
    const HttpResponse whole = post("/v1/completions", completion_body(p, false));
    ASSERT_EQ(whole.status, 200) << whole.body;
    single.push_back(streamed_tokens(post("/v1/completions", completion_body(p, true))));
    ASSERT_EQ(joined(single.back()), json::parse(whole.body)["choices"][0]["text"]) << p;
  }

  constexpr int kClients = 64;
  std::vector<HttpResponse> got(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i)
    threads.emplace_back([&, i] { got[i] = post("/v1/completions", completion_body(prompts[i % prompts.size()], true)); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kClients; ++i)
    EXPECT_EQ(streamed_tokens(got[i]), single[i % prompts.size()]) << "client " << i;

  // Every request finished and gave its blocks back (cached prefix blocks count as free).
  const std::string m = poll_metrics(
      port_,
      [](const std::string& t) {
        return prometheus_value(t, "troupe:kv_cache_used_blocks") == 0 &&
               prometheus_value(t, "troupe:num_requests_running") == 0;
      },
      std::chrono::seconds(30));
  EXPECT_EQ(prometheus_value(m, "troupe:kv_cache_used_blocks"), 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:num_requests_running"), 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:num_requests_waiting"), 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:kv_cache_usage_perc"), 0) << m;

  // The scheduler's figures: each request admitted once (again after each preemption),
  // every planned step timed, and the shared long prompt served from the prefix cache.
  const double preempted = prometheus_value(m, "troupe:num_preemptions_total");
  ASSERT_GE(preempted, 0) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:num_requests_admitted_per_step_sum") - admitted_before,
            kClients + 3.0 * double(prompts.size()) + preempted)
      << m;
  const double steps = prometheus_value(m, "troupe:scheduler_step_time_seconds_count");
  EXPECT_GE(steps, kMaxTokens) << m;
  EXPECT_EQ(prometheus_value(m, "troupe:num_requests_admitted_per_step_count"), steps) << m;
  const double queries = prometheus_value(m, "troupe:prefix_cache_queries_total");
  const double hits = prometheus_value(m, "troupe:prefix_cache_hits_total");
  EXPECT_GT(hits, 0) << m;
  EXPECT_LT(hits, queries) << m;
}

struct CommandResult {
  int status = -1;
  std::string out;  // stdout only
  std::string err;  // stderr
};

CommandResult run_command(const std::string& cmd) {
  const std::string err_path = ::testing::TempDir() + "serve_clients_stderr.txt";
  FILE* p = popen((cmd + " 2>" + err_path).c_str(), "r");
  if (!p) return {};
  CommandResult r;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), p)) > 0;) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  r.err.assign(std::istreambuf_iterator<char>(err), {});
  return r;
}

// Under CI=true a missing client is a failure: CI must not pass with the test unrun.
bool in_ci() {
  const char* ci = std::getenv("CI");
  return ci && (std::string_view(ci) == "true" || std::string_view(ci) == "1");
}

#define SKIP_UNLESS_CI(why)                                         \
  do {                                                              \
    if (in_ci()) FAIL() << why << " (CI=true: this test must run)"; \
    GTEST_SKIP() << why;                                            \
  } while (0)

TEST_F(ServeClients, OpenAiNpmClientStreamsTheNonStreamedChatText) {
  if (!std::filesystem::exists(kNpmDir / "node_modules/openai/package.json"))
    SKIP_UNLESS_CI("the openai npm package is not installed in "
                   << kNpmDir << " (scripts/test.sh installs it: npm ci in that folder)");
  if (run_command("node --version").status != 0) SKIP_UNLESS_CI("node is not on PATH");

  // The same request as stream_chat.mjs makes, not streamed.
  const json body = {{"model", "v41-tiny-seed7"},
                     {"messages", {{{"role", "system"}, {"content", "Be brief."}},
                                   {{"role", "user"}, {"content", "Tell me a story"}}}},
                     {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
  const HttpResponse whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const std::string text = json::parse(whole.body)["choices"][0]["message"]["content"];
  ASSERT_FALSE(text.empty());

  const CommandResult r = run_command("node " + (kNpmDir / "stream_chat.mjs").string() +
                                      " http://127.0.0.1:" + std::to_string(port_) +
                                      " v41-tiny-seed7 'Tell me a story' 10");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, text) << r.err;
}

}  // namespace
}  // namespace troupe::testing
