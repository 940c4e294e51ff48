// logprobs over real sockets: `troupe serve` on the golden model (full compute, no prefix
// cache, so the engine's logits are the plain forward's) answers greedy completions with
// each token's logprob equal to the f64 log-softmax of the plain forward within 1e-4, the
// top alternatives likewise; streamed chunks join to the non-streamed lists; chat and
// n > 1 carry one entry per generated token.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "net/http_test_client.h"
#include "support/plain_forward.h"
#include "support/test_paths.h"

namespace troupe::testing {
namespace {

using nlohmann::json;

const std::string kModelDir = std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7";

class ServeLogprobs : public DaemonSuite<ServeLogprobs> {
 public:
  static std::vector<std::string> daemon_args() {
    return {kModelDir,
            "--port",
            "0",
            "--tcp-port",
            "0",
            "--max-model-len",
            "256",
            "--no-bounded-replay",
            "--no-enable-prefix-caching"};
  }

 protected:
  // The body of a 200 answer (an SSE stream when body asks for one).
  static std::string post_ok(const std::string& path, const json& body) {
    const HttpResponse r = DaemonSuite::post(path, body.dump());
    EXPECT_EQ(r.status, 200) << r.body;
    return r.body;
  }
  static json post_json(const std::string& path, const json& body) {
    return json::parse(post_ok(path, body));
  }
};

std::string text_of(int32_t id) {
  return golden_tokenizer().decode(std::span<const int32_t>(&id, 1));
}

// The logprobs of each choice joined over a stream's chunks.
std::vector<json> joined_logprobs(const std::string& body, bool chat, size_t n) {
  std::vector<json> joined(n, nullptr);
  for (const std::string& payload : sse_payloads(body)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);  // named: a temporary's member would dangle
    for (const json& c : chunk["choices"]) {
      if (c["logprobs"].is_null()) continue;
      json& into = joined[c["index"].get<size_t>()];
      if (into.is_null()) {
        into = c["logprobs"];
        continue;
      }
      for (const char* key : chat ? std::vector<const char*>{"content"}
                                  : std::vector<const char*>{"tokens", "token_logprobs",
                                                             "top_logprobs", "text_offset"})
        for (const json& x : c["logprobs"][key]) into[key].push_back(x);
    }
  }
  return joined;
}

TEST_F(ServeLogprobs, GreedyCompletionMatchesThePlainForward) {
  const std::vector<int32_t> prompt = random_tokens(11, 21);
  const int64_t n = 8, k = 3;
  const PlainGreedy ref = plain_greedy(prompt, n);
  json body = {{"prompt", prompt},
               {"max_tokens", n},
               {"temperature", 0},
               {"ignore_eos", true},
               {"logprobs", k}};
  const json whole = post_json("/v1/completions", body);
  const json& lp = whole["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), size_t(n)) << whole.dump();
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE("token " + std::to_string(i));
    const std::vector<double> want = log_softmax_f64(ref.logits[size_t(i)]);
    const int32_t id = ref.tokens[size_t(i)];
    EXPECT_EQ(lp["tokens"][i], text_of(id));
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), want[size_t(id)], 1e-4);
    EXPECT_NEAR(lp["token_logprobs"][i].get<double>(), *std::max_element(want.begin(), want.end()),
                1e-4);
    // The top 3 by the reference, keyed by text (the sampled token is the first of them).
    std::vector<int32_t> order(want.size());
    for (size_t j = 0; j < order.size(); ++j) order[j] = int32_t(j);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return want[size_t(a)] > want[size_t(b)]; });
    const json& top = lp["top_logprobs"][i];
    EXPECT_LE(top.size(), size_t(k));
    for (int64_t j = 0; j < k; ++j) {
      const std::string t = text_of(order[size_t(j)]);
      ASSERT_TRUE(top.contains(t)) << t << " not in " << top.dump();
      if (top.size() == size_t(k)) {  // distinct texts: each value is its token's
        EXPECT_NEAR(top[t].get<double>(), want[size_t(order[size_t(j)])], 1e-4);
      }
    }
  }

  body["stream"] = true;
  const std::vector<json> streamed = joined_logprobs(post_ok("/v1/completions", body), false, 1);
  ASSERT_FALSE(streamed[0].is_null());
  EXPECT_EQ(streamed[0]["tokens"], lp["tokens"]);
  EXPECT_EQ(streamed[0]["text_offset"], lp["text_offset"]);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(streamed[0]["token_logprobs"][i].get<double>(),
                lp["token_logprobs"][i].get<double>(), 1e-6);
}

TEST_F(ServeLogprobs, ChatTopLogprobsStreamedEqualsWhole) {
  json body = {{"messages", {{{"role", "user"}, {"content", "Tell me a story"}}}},
               {"max_tokens", 5},
               {"temperature", 0},
               {"ignore_eos", true},
               {"logprobs", true},
               {"top_logprobs", 2}};
  const json whole = post_json("/v1/chat/completions", body);
  const json& content = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), 5u) << whole.dump();
  for (const json& t : content) {
    ASSERT_EQ(t["top_logprobs"].size(), 2u);
    EXPECT_EQ(t["top_logprobs"][0]["token"], t["token"]);  // greedy: the most likely
    EXPECT_EQ(t["top_logprobs"][0]["logprob"], t["logprob"]);
    EXPECT_GE(t["top_logprobs"][0]["logprob"].get<double>(),
              t["top_logprobs"][1]["logprob"].get<double>());
    EXPECT_LT(t["logprob"].get<double>(), 0.0);
  }
  body["stream"] = true;
  const std::vector<json> streamed =
      joined_logprobs(post_ok("/v1/chat/completions", body), true, 1);
  ASSERT_FALSE(streamed[0].is_null());
  ASSERT_EQ(streamed[0]["content"].size(), content.size());
  for (size_t i = 0; i < content.size(); ++i) {
    EXPECT_EQ(streamed[0]["content"][i]["token"], content[i]["token"]);
    EXPECT_NEAR(streamed[0]["content"][i]["logprob"].get<double>(),
                content[i]["logprob"].get<double>(), 1e-6);
  }
}

// n = 2 sampled choices: each has one entry per token, the sampled token in its top dict.
TEST_F(ServeLogprobs, EveryChoiceOfNCarriesItsLogprobs) {
  const json whole = post_json("/v1/completions", {{"prompt", "Once upon a time"},
                                                   {"max_tokens", 6},
                                                   {"temperature", 1.0},
                                                   {"seed", 3},
                                                   {"n", 2},
                                                   {"ignore_eos", true},
                                                   {"logprobs", 2}});
  ASSERT_EQ(whole["choices"].size(), 2u);
  for (const json& c : whole["choices"]) {
    const json& lp = c["logprobs"];
    ASSERT_EQ(lp["tokens"].size(), 6u) << c.dump();
    for (size_t i = 0; i < 6; ++i) {
      const json& top = lp["top_logprobs"][i];
      EXPECT_TRUE(top.size() >= 1 && top.size() <= 3) << top.dump();
      ASSERT_TRUE(top.contains(lp["tokens"][i].get<std::string>()));
      EXPECT_EQ(top[lp["tokens"][i].get<std::string>()], lp["token_logprobs"][i]);
    }
  }
}

}  // namespace
}  // namespace troupe::testing
