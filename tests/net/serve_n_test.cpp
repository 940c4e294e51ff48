// n > 1 over real sockets: `troupe serve` on the golden model sends the n choices as one
// group (one prefill, the others forked from it). Greedy choices all equal the n = 1
// text, streamed or not; seeded choices each run the whole max_tokens; /metrics counts
// the prompt once and every choice's tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "net/http_test_client.h"
#include "support/prometheus_text.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

class ServeN : public DaemonSuite<ServeN> {
 public:
  static std::vector<std::string> daemon_args() {
    return {kModelDir, "--port", "0", "--tcp-port", "0", "--max-model-len", "256"};
  }

 protected:
  static json post_json(const json& body) {
    const HttpResponse r = DaemonSuite::post("/v1/completions", body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return json::parse(r.body);
  }
};

json body(const std::string& prompt, int n, double temperature) {
  return {{"prompt", prompt},           {"max_tokens", 7},   {"n", n}, {"seed", 41},
          {"temperature", temperature}, {"ignore_eos", true}};
}

TEST_F(ServeN, GreedyChoicesEqualTheSingleRequest) {
  const std::string prompt = "The quick brown fox jumps over the lazy dog, again and again";
  const json one = post_json(body(prompt, 1, 0.0));
  const json three = post_json(body(prompt, 3, 0.0));
  ASSERT_EQ(three["choices"].size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(three["choices"][i]["index"], i);
    EXPECT_EQ(three["choices"][i]["text"], one["choices"][0]["text"]) << "choice " << i;
    EXPECT_EQ(three["choices"][i]["finish_reason"], "length");
  }
  EXPECT_EQ(three["usage"]["prompt_tokens"], one["usage"]["prompt_tokens"]);
  EXPECT_EQ(three["usage"]["completion_tokens"], 21);
}

TEST_F(ServeN, SeededChoicesRunInFullAndMetricsCountThePromptOnce) {
  const HttpResponse before = http(port_, "GET", "/metrics");
  ASSERT_EQ(before.status, 200);
  const json r = post_json(body("Once upon a time there was a", 3, 1.0));
  ASSERT_EQ(r["choices"].size(), 3u);
  for (const json& c : r["choices"]) {
    EXPECT_EQ(c["finish_reason"], "length");
    EXPECT_FALSE(c["text"].get<std::string>().empty());
  }
  EXPECT_EQ(r["usage"]["completion_tokens"], 21);
  const HttpResponse after = http(port_, "GET", "/metrics");
  ASSERT_EQ(after.status, 200);
  const double prompt = r["usage"]["prompt_tokens"].get<double>();
  EXPECT_EQ(prometheus_value(after.body, "troupe:prompt_tokens_total") -
                prometheus_value(before.body, "troupe:prompt_tokens_total"),
            prompt);
  EXPECT_EQ(prometheus_value(after.body, "troupe:generation_tokens_total") -
                prometheus_value(before.body, "troupe:generation_tokens_total"),
            21.0);
  EXPECT_EQ(prometheus_value(after.body, "troupe:num_requests_running"), 0.0);
  EXPECT_EQ(prometheus_value(after.body, "troupe:kv_cache_usage_perc"), 0.0);
}

// A seed reproduces across requests: sampled choice i of an n = 3 request with seed s is
// the text of an n = 1 request with seed s + i (the engine draws from seed and output index
// only), and a request repeated with the same seed gives the same text.
TEST_F(ServeN, SeededChoicesEqualSingleRequestsWithTheirSeeds) {
  const std::string prompt = "Once upon a time there was a";
  json three_body = body(prompt, 3, 1.0);
  const json three = post_json(three_body);
  ASSERT_EQ(three["choices"].size(), 3u);
  std::set<std::string> distinct;
  for (int i = 0; i < 3; ++i) {
    json one_body = body(prompt, 1, 1.0);
    one_body["seed"] = 41 + i;
    const json one = post_json(one_body);
    EXPECT_EQ(three["choices"][i]["text"], one["choices"][0]["text"]) << "choice " << i;
    EXPECT_EQ(post_json(one_body)["choices"][0]["text"], one["choices"][0]["text"]);
    distinct.insert(one["choices"][0]["text"].get<std::string>());
  }
  EXPECT_GT(distinct.size(), 1u);  // temperature 1 on a random model: the seeds matter
}

// Streamed: each index's text equals the non-streamed greedy text.
TEST_F(ServeN, StreamedChoicesEqualTheWholeOnes) {
  json b = body("a b c d e f g h", 2, 0.0);
  const json whole = post_json(b);
  b["stream"] = true;
  const HttpResponse r = DaemonSuite::post("/v1/completions", b.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  std::string text[2];
  for (const std::string& e : sse_payloads(r.body)) {
    if (e == "[DONE]") continue;
    const json chunk = json::parse(e);
    for (const json& c : chunk["choices"])
      text[c["index"].get<int>()] += c["text"].get<std::string>();
  }
  for (int i = 0; i < 2; ++i) EXPECT_EQ(text[i], whole["choices"][i]["text"]) << "choice " << i;
}

}  // namespace
}  // namespace troupe::testing
