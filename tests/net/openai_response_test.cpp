// Response bodies, SSE framing, /v1/models, /tokenize and /detokenize: exact JSON
// written out by hand.
#include <gtest/gtest.h>

#include "model/tokenizer.h"
#include "net/openai/request_parse.h"
#include "net/openai/responses.h"
#include "net/openai/stream.h"
#include "net/openai/tokenize.h"
#include "support/golden.h"

namespace troupe::net::openai {
namespace {

using nlohmann::json;
using runtime::RequestOutput;
using runtime::RequestStatus;

const model::Tokenizer& tiny_tokenizer() { return testing::golden_tokenizer(); }

ServingInfo info() {
  ServingInfo i;
  i.model_name = "tiny";
  i.max_model_len = 64;
  return i;
}

RequestOutput output(std::vector<int32_t> tokens, std::string text,
                     RequestStatus status = RequestStatus::Running, runtime::StopReason stop = {},
                     int64_t cached = 0) {
  RequestOutput o;
  o.new_tokens = std::move(tokens);
  o.new_text = std::move(text);
  o.status = status;
  o.stop_reason = std::move(stop);
  o.num_cached_tokens = cached;
  return o;
}

GenerationRequest request(Endpoint e, int32_t n, bool include_usage = false) {
  GenerationRequest r;
  r.endpoint = e;
  r.prompt_tokens = {0, 10, 11, 12, 13};
  r.n = n;
  r.stream = include_usage;
  r.include_usage = include_usage;
  return r;
}

const ResponseMeta kMeta{"cmpl-0000000000000007", 1700000000, "tiny"};

TEST(OpenAiResponse, ResponseIds) {
  EXPECT_EQ(make_response_id(Endpoint::Completions, 7), "cmpl-0000000000000007");
  EXPECT_EQ(make_response_id(Endpoint::ChatCompletions, 0xabc), "chatcmpl-0000000000000abc");
}

TEST(OpenAiResponse, CompletionWithTwoChoices) {
  ResponseCollector c(request(Endpoint::Completions, 2), kMeta);
  c.on_output(1, output({20}, "Hel", RequestStatus::Running, {}, 4));
  c.on_output(0, output({21, 22}, "Hi", RequestStatus::Running, {}, 4));
  EXPECT_FALSE(c.done());
  c.on_output(0, output({23}, "!", RequestStatus::FinishedStopped, std::string("END"), 4));
  c.on_output(1, output({24, 1}, "lo", RequestStatus::FinishedLength, {}, 4));
  ASSERT_TRUE(c.done());
  const json want = json::parse(R"({
    "id": "cmpl-0000000000000007", "object": "text_completion", "created": 1700000000,
    "model": "tiny",
    "choices": [
      {"index": 0, "text": "Hi!", "logprobs": null, "finish_reason": "stop", "stop_reason": "END"},
      {"index": 1, "text": "Hello", "logprobs": null, "finish_reason": "length",
       "stop_reason": null}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11,
              "prompt_tokens_details": {"cached_tokens": 4}}})");
  EXPECT_EQ(c.response(), want) << c.response().dump(2);
}

TEST(OpenAiResponse, ChatCompletionWithStopTokenId) {
  ResponseCollector c(request(Endpoint::ChatCompletions, 1), {"chatcmpl-1", 5, "tiny"});
  c.on_output(0, output({30, 31}, "4.", RequestStatus::FinishedStopped, int32_t(31)));
  const json want = json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 5, "model": "tiny",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "4."},
                 "logprobs": null, "finish_reason": "stop", "stop_reason": 31}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7,
              "prompt_tokens_details": {"cached_tokens": 0}}})");
  EXPECT_EQ(c.response(), want) << c.response().dump(2);
}

TEST(OpenAiResponse, LogprobShapes) {
  const std::vector<TokenLogprob> lps = {{"He", -0.5f, {{"He", -0.5f}, {"Hi", -1.0f}}},
                                         {"y", -0.25f, {{"y", -0.25f}}}};
  EXPECT_EQ(logprobs_json(Endpoint::Completions, lps), json::parse(R"({
    "tokens": ["He", "y"], "token_logprobs": [-0.5, -0.25],
    "top_logprobs": [{"He": -0.5, "Hi": -1.0}, {"y": -0.25}], "text_offset": [0, 2]})"));
  EXPECT_EQ(logprobs_json(Endpoint::ChatCompletions, lps), json::parse(R"({"content": [
    {"token": "He", "logprob": -0.5, "bytes": [72, 101],
     "top_logprobs": [{"token": "He", "logprob": -0.5, "bytes": [72, 101]},
                      {"token": "Hi", "logprob": -1.0, "bytes": [72, 105]}]},
    {"token": "y", "logprob": -0.25, "bytes": [121],
     "top_logprobs": [{"token": "y", "logprob": -0.25, "bytes": [121]}]}]})"));
}

// Splits an SSE stream into its data payloads, checking the framing on the way.
std::vector<std::string> sse_payloads(const std::string& stream) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < stream.size()) {
    EXPECT_EQ(stream.compare(pos, 6, "data: "), 0) << stream.substr(pos);
    const size_t end = stream.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos);
    if (end == std::string::npos) break;
    out.push_back(stream.substr(pos + 6, end - pos - 6));
    EXPECT_EQ(out.back().find('\n'), std::string::npos);  // one line per event
    pos = end + 2;
  }
  return out;
}

TEST(OpenAiStream, CompletionChunksThenDone) {
  StreamEncoder s(request(Endpoint::Completions, 1), kMeta);
  std::string wire = s.start();
  EXPECT_TRUE(wire.empty());
  wire += s.on_output(0, output({20}, "Hel"));
  EXPECT_EQ(s.on_output(0, output({21}, "")), "");  // a token with no text yet: no event
  wire += s.on_output(0, output({22}, "lo", RequestStatus::FinishedLength));
  ASSERT_TRUE(s.done());
  wire += s.finish();
  const std::vector<std::string> p = sse_payloads(wire);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(json::parse(p[0]), json::parse(R"({"id": "cmpl-0000000000000007",
    "object": "text_completion", "created": 1700000000, "model": "tiny",
    "choices": [{"index": 0, "text": "Hel", "logprobs": null, "finish_reason": null,
                 "stop_reason": null}]})"));
  EXPECT_EQ(json::parse(p[1])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(p[1])["choices"][0]["text"], "lo");
  EXPECT_EQ(p[2], "[DONE]");
  EXPECT_EQ(wire.substr(wire.size() - 14), "data: [DONE]\n\n");
}

TEST(OpenAiStream, ChatRoleDeltaUsageChunkAndDone) {
  StreamEncoder s(request(Endpoint::ChatCompletions, 2, /*include_usage=*/true),
                  {"chatcmpl-9", 3, "tiny"});
  std::string wire = s.start();
  wire += s.on_output(0, output({40}, "Yes", RequestStatus::Running, {}, 3));
  wire += s.on_output(1, output({41}, "No", RequestStatus::FinishedStopped, std::string("."), 3));
  wire += s.on_output(0, output({1}, "", RequestStatus::FinishedStopped, {}, 3));
  ASSERT_TRUE(s.done());
  wire += s.finish();
  const std::vector<std::string> p = sse_payloads(wire);
  ASSERT_EQ(p.size(), 7u);
  const json role0 = json::parse(p[0]);
  EXPECT_EQ(role0, json::parse(R"({"id": "chatcmpl-9", "object": "chat.completion.chunk",
    "created": 3, "model": "tiny", "usage": null,
    "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": null,
                 "finish_reason": null}]})"));
  EXPECT_EQ(json::parse(p[1])["choices"][0]["index"], 1);
  EXPECT_EQ(json::parse(p[2])["choices"][0]["delta"], json::parse(R"({"content": "Yes"})"));
  const json stop1 = json::parse(p[3])["choices"][0];
  EXPECT_EQ(stop1["delta"], json::parse(R"({"content": "No"})"));
  EXPECT_EQ(stop1["finish_reason"], "stop");
  EXPECT_EQ(stop1["stop_reason"], ".");
  const json eos0 = json::parse(p[4])["choices"][0];
  EXPECT_EQ(eos0["delta"], json::object());
  EXPECT_EQ(eos0["finish_reason"], "stop");
  EXPECT_EQ(eos0["stop_reason"], nullptr);
  EXPECT_EQ(json::parse(p[5]), json::parse(R"({"id": "chatcmpl-9",
    "object": "chat.completion.chunk", "created": 3, "model": "tiny", "choices": [],
    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
              "prompt_tokens_details": {"cached_tokens": 3}}})"));
  EXPECT_EQ(p[6], "[DONE]");
}

TEST(OpenAiStream, ErrorEventThenDone) {
  StreamEncoder s(request(Endpoint::Completions, 1), kMeta);
  const std::string wire = s.error({ErrorKind::Internal, "engine failed", ""});
  const std::vector<std::string> p = sse_payloads(wire);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(json::parse(p[0])["error"]["type"], "server_error");
  EXPECT_EQ(p[1], "[DONE]");
  EXPECT_EQ(sse_data(json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(OpenAiResponse, ModelsList) {
  EXPECT_EQ(models_response(info(), 42), json::parse(R"({"object": "list", "data": [
    {"id": "tiny", "object": "model", "created": 42, "owned_by": "troupe", "root": "tiny",
     "parent": null, "max_model_len": 64}]})"));
}

TEST(OpenAiTokenize, TokenizeAndDetokenize) {
  const model::Tokenizer& tok = tiny_tokenizer();
  const JsonResult t = tokenize(R"({"prompt": "the cat", "return_token_strs": true})", info(), tok);
  ASSERT_TRUE(std::holds_alternative<json>(t));
  const json& body = std::get<json>(t);
  const std::vector<int32_t> ids = body["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, tok.encode("the cat", true));
  EXPECT_EQ(ids.front(), 0);
  EXPECT_EQ(body["count"], ids.size());
  EXPECT_EQ(body["max_model_len"], 64);
  ASSERT_EQ(body["token_strs"].size(), ids.size());
  EXPECT_EQ(body["token_strs"][0], "<｜begin▁of▁sentence｜>");

  const JsonResult plain = tokenize(R"({"prompt": "x", "add_special_tokens": false})", info(), tok);
  EXPECT_EQ(std::get<json>(plain)["tokens"], json::array({5 + 'x'}));  // byte token 5 + b
  EXPECT_EQ(std::get<json>(plain)["token_strs"], nullptr);

  const JsonResult chat =
      tokenize(R"({"messages": [{"role": "user", "content": "x"}]})", info(), tok);
  EXPECT_EQ(std::get<json>(chat)["tokens"], json::array({0, 3, 5 + 'x', 4}));

  const JsonResult d = detokenize(R"({"tokens": [0, 125, 4]})", info(), tok);
  ASSERT_TRUE(std::holds_alternative<json>(d));
  EXPECT_EQ(std::get<json>(d),
            json::parse(R"({"prompt": "<｜begin▁of▁sentence｜>x<｜Assistant｜>"})"));

  for (const char* bad : {R"({"tokens": [99999]})", R"({"tokens": "x"})", R"({})", "nope"}) {
    const JsonResult r = detokenize(bad, info(), tok);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r)) << bad;
    EXPECT_EQ(std::get<ApiError>(r).status(), 400) << bad;
  }
  const JsonResult wrong_model = tokenize(R"({"model": "x", "prompt": "a"})", info(), tok);
  ASSERT_TRUE(std::holds_alternative<ApiError>(wrong_model));
  EXPECT_EQ(std::get<ApiError>(wrong_model).status(), 404);
}

}  // namespace
}  // namespace troupe::net::openai
