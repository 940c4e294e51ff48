// vLLM's return_token_ids extension (net/openai/token_ids.h): parsed from the body, and
// the prompt and output ids in whole responses and streams of both endpoints, with exact
// JSON written out by hand.
#include <gtest/gtest.h>

#include "net/openai/request_parse.h"
#include "net/openai/responses.h"
#include "net/openai/stream.h"
#include "support/golden.h"

namespace troupe::net::openai {
namespace {

using nlohmann::json;
using runtime::RequestOutput;
using runtime::RequestStatus;

RequestOutput output(std::vector<int32_t> tokens, std::string text,
                     RequestStatus status = RequestStatus::Running) {
  RequestOutput o;
  o.new_tokens = std::move(tokens);
  o.new_text = std::move(text);
  o.status = status;
  return o;
}

GenerationRequest request(Endpoint e, int32_t n, bool return_token_ids = true) {
  GenerationRequest r;
  r.endpoint = e;
  r.prompt_tokens = {0, 10, 11};
  r.n = n;
  r.return_token_ids = return_token_ids;
  return r;
}

const ResponseMeta kMeta{"cmpl-1", 7, "tiny"};

// The JSON payloads of "data: X\n\n" events, [DONE] left out.
std::vector<json> events(const std::string& sse) {
  std::vector<json> out;
  for (size_t pos = 0; pos < sse.size();) {
    const size_t end = sse.find("\n\n", pos);
    const std::string payload = sse.substr(pos + 6, end - pos - 6);
    if (payload != "[DONE]") out.push_back(json::parse(payload));
    pos = end + 2;
  }
  return out;
}

TEST(OpenAiTokenIds, ParsedFromTheBodyOffByDefault) {
  ServingInfo info;
  info.model_name = "tiny";
  info.max_model_len = 64;
  const auto& tok = testing::golden_tokenizer();
  for (const auto& [body, want] : std::vector<std::pair<std::string, bool>>{
           {R"({"prompt": [1, 2], "return_token_ids": true})", true},
           {R"({"prompt": [1, 2], "return_token_ids": false})", false},
           {R"({"prompt": [1, 2]})", false}}) {
    const ParseResult r = parse_generation_request(Endpoint::Completions, body, info, tok);
    ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << body;
    EXPECT_EQ(std::get<GenerationRequest>(r).return_token_ids, want) << body;
  }
  const ParseResult bad = parse_generation_request(
      Endpoint::Completions, R"({"prompt": [1], "return_token_ids": 3})", info, tok);
  ASSERT_TRUE(std::holds_alternative<ApiError>(bad));
  EXPECT_NE(std::get<ApiError>(bad).message.find("return_token_ids"), std::string::npos);
}

TEST(OpenAiTokenIds, CompletionChoicesCarryPromptAndOutputIds) {
  ResponseCollector c(request(Endpoint::Completions, 2), kMeta);
  c.on_output(0, output({20, 21}, "ab"));
  c.on_output(1, output({30}, "c", RequestStatus::FinishedLength));
  c.on_output(0, output({22}, "", RequestStatus::FinishedLength));
  const json body = c.response();
  EXPECT_FALSE(body.contains("prompt_token_ids"));
  ASSERT_EQ(body["choices"].size(), 2u);
  EXPECT_EQ(body["choices"][0]["prompt_token_ids"], json({0, 10, 11}));
  EXPECT_EQ(body["choices"][0]["token_ids"], json({20, 21, 22}));
  EXPECT_EQ(body["choices"][1]["prompt_token_ids"], json({0, 10, 11}));
  EXPECT_EQ(body["choices"][1]["token_ids"], json({30}));
}

TEST(OpenAiTokenIds, ChatPutsPromptIdsAtTheTop) {
  ResponseCollector c(request(Endpoint::ChatCompletions, 1), kMeta);
  c.on_output(0, output({5, 6}, "hi", RequestStatus::FinishedLength));
  const json body = c.response();
  EXPECT_EQ(body["prompt_token_ids"], json({0, 10, 11}));
  EXPECT_FALSE(body["choices"][0].contains("prompt_token_ids"));
  EXPECT_EQ(body["choices"][0]["token_ids"], json({5, 6}));
}

TEST(OpenAiTokenIds, AbsentUnlessAsked) {
  ResponseCollector c(request(Endpoint::Completions, 1, false), kMeta);
  c.on_output(0, output({5}, "x", RequestStatus::FinishedLength));
  EXPECT_FALSE(c.response()["choices"][0].contains("token_ids"));
  StreamEncoder s(request(Endpoint::Completions, 1, false), kMeta);
  EXPECT_EQ(s.on_output(0, output({5}, "x", RequestStatus::FinishedLength)).find("token_ids"),
            std::string::npos);
}

// A token whose text is held back (empty new_text) sends no chunk; its id goes with the
// next chunk, so the chunks' lists joined are the whole output.
TEST(OpenAiTokenIds, CompletionStreamDeltasJoinToTheOutput) {
  StreamEncoder s(request(Endpoint::Completions, 1), kMeta);
  EXPECT_EQ(s.start(), "");
  std::string sse = s.on_output(0, output({40}, "a"));
  EXPECT_EQ(s.on_output(0, output({41}, "")), "");  // held back
  sse += s.on_output(0, output({42}, "bc"));
  sse += s.on_output(0, output({43}, "d", RequestStatus::FinishedLength));
  const std::vector<json> ev = events(sse);
  ASSERT_EQ(ev.size(), 3u) << sse;
  EXPECT_EQ(ev[0]["choices"][0]["prompt_token_ids"], json({0, 10, 11}));
  EXPECT_EQ(ev[0]["choices"][0]["token_ids"], json({40}));
  EXPECT_FALSE(ev[1]["choices"][0].contains("prompt_token_ids"));
  EXPECT_EQ(ev[1]["choices"][0]["token_ids"], json({41, 42}));
  EXPECT_EQ(ev[1]["choices"][0]["text"], "bc");
  EXPECT_EQ(ev[2]["choices"][0]["token_ids"], json({43}));
  EXPECT_FALSE(ev[2]["choices"][0].contains("prompt_token_ids"));
}

TEST(OpenAiTokenIds, CompletionStreamSendsThePromptOncePerChoice) {
  StreamEncoder s(request(Endpoint::Completions, 2), kMeta);
  std::string sse = s.on_output(1, output({50}, "x"));
  sse += s.on_output(0, output({60}, "y"));
  sse += s.on_output(1, output({51}, "z", RequestStatus::FinishedLength));
  const std::vector<json> ev = events(sse);
  ASSERT_EQ(ev.size(), 3u) << sse;
  EXPECT_EQ(ev[0]["choices"][0]["index"], 1);
  EXPECT_EQ(ev[0]["choices"][0]["prompt_token_ids"], json({0, 10, 11}));
  EXPECT_EQ(ev[1]["choices"][0]["prompt_token_ids"], json({0, 10, 11}));
  EXPECT_FALSE(ev[2]["choices"][0].contains("prompt_token_ids"));
  EXPECT_EQ(ev[2]["choices"][0]["token_ids"], json({51}));
}

TEST(OpenAiTokenIds, ChatStreamPromptIdsOnTheFirstChunkOnly) {
  StreamEncoder s(request(Endpoint::ChatCompletions, 1), kMeta);
  std::string sse = s.start();
  sse += s.on_output(0, output({7, 8}, "hi"));
  sse += s.on_output(0, output({9}, "!", RequestStatus::FinishedLength));
  const std::vector<json> ev = events(sse);
  ASSERT_EQ(ev.size(), 3u) << sse;
  EXPECT_EQ(ev[0]["prompt_token_ids"], json({0, 10, 11}));  // the role chunk
  EXPECT_EQ(ev[0]["choices"][0]["token_ids"], json::array());
  EXPECT_FALSE(ev[1].contains("prompt_token_ids"));
  EXPECT_EQ(ev[1]["choices"][0]["token_ids"], json({7, 8}));
  EXPECT_EQ(ev[2]["choices"][0]["token_ids"], json({9}));
}

}  // namespace
}  // namespace troupe::net::openai
