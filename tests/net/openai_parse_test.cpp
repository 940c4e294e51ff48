// /v1/completions and /v1/chat/completions bodies -> GenerationRequest or the exact error
// (status, type, param, code), against hand-written expectations.
#include <gtest/gtest.h>

#include "model/tokenizer.h"
#include "net/openai/request_parse.h"
#include "support/golden.h"

namespace troupe::net::openai {
namespace {

using runtime::RequestParams;

const model::Tokenizer& tiny_tokenizer() { return testing::golden_tokenizer(); }

ServingInfo info() {
  ServingInfo i;
  i.model_name = "tiny";
  i.max_model_len = 64;
  i.max_body_bytes = 4096;
  i.max_n = 4;
  i.max_logprobs = 5;
  return i;
}

ParseResult parse(Endpoint e, const std::string& body) {
  return parse_generation_request(e, body, info(), tiny_tokenizer());
}

GenerationRequest parse_ok(Endpoint e, const std::string& body) {
  ParseResult r = parse(e, body);
  if (const ApiError* err = std::get_if<ApiError>(&r))
    ADD_FAILURE() << body << " -> " << err->message;
  return std::holds_alternative<GenerationRequest>(r) ? std::get<GenerationRequest>(r)
                                                      : GenerationRequest{};
}

constexpr Endpoint kCmpl = Endpoint::Completions;
constexpr Endpoint kChat = Endpoint::ChatCompletions;

TEST(OpenAiParse, BadBodiesGetTheRightError) {
  struct Case {
    Endpoint endpoint;
    std::string body;
    int status;
    std::string param;  // "" -> null
    std::string code;   // "" -> null
  };
  std::string ids70 = "[0";  // 70 tokens: more than max_model_len 64
  for (int i = 1; i < 70; ++i) ids70 += ", 10";
  ids70 += "]";
  const std::vector<Case> cases = {
      {kCmpl, "{\"prompt\": \"hi\"", 400, "", ""},  // malformed JSON
      {kCmpl, "[1, 2]", 400, "", ""},               // not an object
      {kCmpl, "", 400, "", ""},
      {kCmpl, R"({"model": "gpt-4", "prompt": "hi"})", 404, "model", "model_not_found"},
      {kCmpl, R"({"model": 7, "prompt": "hi"})", 400, "model", ""},
      {kCmpl, R"({})", 400, "prompt", ""},
      {kCmpl, R"({"prompt": 5})", 400, "prompt", ""},
      {kCmpl, R"({"prompt": []})", 400, "prompt", ""},
      {kCmpl, R"({"prompt": ["a", "b"]})", 400, "prompt", ""},  // batch
      {kCmpl, R"({"prompt": [1, 99999]})", 400, "prompt", ""},  // outside the vocab
      {kCmpl, R"({"prompt": [1, -1]})", 400, "prompt", ""},
      {kCmpl, R"({"prompt": [1, "x"]})", 400, "prompt", ""},
      {kCmpl, R"({"prompt": "hi", "max_tokens": 0})", 400, "max_tokens", ""},
      {kCmpl, R"({"prompt": "hi", "max_tokens": -5})", 400, "max_tokens", ""},
      {kCmpl, R"({"prompt": "hi", "max_tokens": 1e30})", 400, "max_tokens", ""},
      {kCmpl, R"({"prompt": "hi", "max_tokens": 1000000})", 400, "max_tokens",
       "context_length_exceeded"},
      {kCmpl, R"({"prompt": "hi", "max_tokens": 2.5})", 400, "max_tokens", ""},
      {kCmpl, R"({"prompt": "hi", "max_tokens": "10"})", 400, "max_tokens", ""},
      {kCmpl, R"({"prompt": "hi", "max_tokens": true})", 400, "max_tokens", ""},
      {kCmpl, R"({"prompt": "hi", "temperature": -0.1})", 400, "temperature", ""},
      {kCmpl, R"({"prompt": "hi", "temperature": "hot"})", 400, "temperature", ""},
      {kCmpl, R"({"prompt": "hi", "top_p": 0})", 400, "top_p", ""},
      {kCmpl, R"({"prompt": "hi", "top_p": 1.5})", 400, "top_p", ""},
      {kCmpl, R"({"prompt": "hi", "top_k": -2})", 400, "top_k", ""},
      {kCmpl, R"({"prompt": "hi", "min_p": 2})", 400, "min_p", ""},
      {kCmpl, R"({"prompt": "hi", "seed": "x"})", 400, "seed", ""},
      {kCmpl, R"({"prompt": "hi", "stop": 3})", 400, "stop", ""},
      {kCmpl, R"({"prompt": "hi", "stop": ["a", ""]})", 400, "stop", ""},
      {kCmpl, R"({"prompt": "hi", "stop_token_ids": [70000]})", 400, "stop_token_ids", ""},
      {kCmpl, R"({"prompt": "hi", "n": 0})", 400, "n", ""},
      {kCmpl, R"({"prompt": "hi", "n": 5})", 400, "n", ""},
      {kCmpl, R"({"prompt": "hi", "logprobs": 6})", 400, "logprobs", ""},
      {kCmpl, R"({"prompt": "hi", "stream": "yes"})", 400, "stream", ""},
      {kCmpl, R"({"prompt": "hi", "stream_options": {"include_usage": true}})", 400,
       "stream_options", ""},
      {kCmpl, R"({"prompt": "hi", "stream": true, "stream_options": 1})", 400, "stream_options",
       ""},
      {kCmpl, R"({"prompt": "hi", "user": 5})", 400, "user", ""},
      {kCmpl, R"({"prompt": "hi", "ignore_eos": 1})", 400, "ignore_eos", ""},
      {kCmpl, "{\"prompt\": " + ids70 + "}", 400, "prompt", "context_length_exceeded"},
      {kCmpl, "{\"prompt\": \"" + std::string(5000, 'z') + "\"}", 413, "", "request_too_large"},
      {kChat, R"({"prompt": "hi"})", 400, "messages", ""},
      {kChat, R"({"messages": []})", 400, "messages", ""},
      {kChat, R"({"messages": "hi"})", 400, "messages", ""},
      {kChat, R"({"messages": [{"role": "tool", "content": "x"}]})", 400, "messages[0].role", ""},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}, {"content": "y"}]})", 400,
       "messages[1].role", ""},
      {kChat, R"({"messages": [{"role": "user", "content": 5}]})", 400, "messages[0].content", ""},
      {kChat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400,
       "messages[0].content", ""},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})",
       400, "max_completion_tokens", ""},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400,
       "top_logprobs", ""},
      {kChat,
       R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 9})",
       400, "top_logprobs", ""},
      {kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": 2})", 400, "logprobs",
       ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body.substr(0, 120));
    const ParseResult r = parse(c.endpoint, c.body);
    const ApiError* err = std::get_if<ApiError>(&r);
    ASSERT_NE(err, nullptr);
    EXPECT_EQ(err->status(), c.status) << err->message;
    EXPECT_EQ(err->param, c.param) << err->message;
    EXPECT_EQ(err->code(), c.code) << err->message;
    const nlohmann::json body = err->body();
    EXPECT_EQ(body["error"]["type"], "invalid_request_error");
    EXPECT_EQ(body["error"]["message"], err->message);
    EXPECT_FALSE(err->message.empty());
    EXPECT_EQ(body["error"]["param"], c.param.empty() ? nlohmann::json() : nlohmann::json(c.param));
    EXPECT_EQ(body["error"]["code"], c.code.empty() ? nlohmann::json() : nlohmann::json(c.code));
  }
}

TEST(OpenAiParse, CompletionDefaultsAndTextPrompt) {
  const GenerationRequest r = parse_ok(kCmpl, R"({"prompt": "hello world", "unknown": [1]})");
  const model::Tokenizer& tok = tiny_tokenizer();
  EXPECT_EQ(r.endpoint, kCmpl);
  EXPECT_EQ(r.model, "tiny");
  ASSERT_FALSE(r.prompt_tokens.empty());
  EXPECT_EQ(r.prompt_tokens.front(), tok.specials().bos);  // MODEL.md §11: bos prepended
  EXPECT_EQ(tok.decode(r.prompt_tokens, true), "hello world");
  EXPECT_EQ(r.prompt_text, "hello world");
  EXPECT_EQ(r.params.max_tokens, 16);  // OpenAI's completions default
  EXPECT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_EQ(r.params.sampling.top_p, 1.0f);
  EXPECT_EQ(r.params.sampling.top_k, 0);
  EXPECT_EQ(r.params.sampling.min_p, 0.0f);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_EQ(r.n, 1);
  EXPECT_FALSE(r.logprobs.has_value());
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.include_usage);
  EXPECT_TRUE(r.params.stop.empty());
  EXPECT_FALSE(r.params.ignore_eos);
}

TEST(OpenAiParse, CompletionEveryField) {
  const GenerationRequest r = parse_ok(kCmpl, R"({
    "model": "tiny", "prompt": [[0, 7, 9]], "max_tokens": 20.0, "temperature": 0.5,
    "top_p": 0.9, "top_k": -1, "min_p": 0.05, "seed": -1, "stop": "END",
    "stop_token_ids": [1, 2], "n": 3, "logprobs": 2, "stream": true,
    "stream_options": {"include_usage": true}, "user": "u1", "ignore_eos": true,
    "include_stop_str_in_output": true, "skip_special_tokens": false, "echo": null})");
  EXPECT_EQ(r.prompt_tokens, (std::vector<int32_t>{0, 7, 9}));
  EXPECT_TRUE(r.prompt_text.empty());
  EXPECT_EQ(r.params.max_tokens, 20);
  EXPECT_EQ(r.params.sampling.temperature, 0.5f);
  EXPECT_EQ(r.params.sampling.top_p, 0.9f);
  EXPECT_EQ(r.params.sampling.top_k, 0);  // -1 means off, as vLLM
  EXPECT_EQ(r.params.sampling.min_p, 0.05f);
  ASSERT_TRUE(r.seed.has_value());
  EXPECT_EQ(*r.seed, ~uint64_t(0));  // -1 wraps
  EXPECT_EQ(r.params.sampling.seed, ~uint64_t(0));
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"END"}));
  EXPECT_EQ(r.params.stop_token_ids, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.user, "u1");
  EXPECT_TRUE(r.params.ignore_eos);
  EXPECT_TRUE(r.params.include_stop_str_in_output);
  EXPECT_FALSE(r.params.skip_special_tokens);
}

TEST(OpenAiParse, NullMeansNotGiven) {
  const GenerationRequest r =
      parse_ok(kCmpl, R"({"model": null, "prompt": [5], "max_tokens": null, "temperature": null,
                 "stop": null, "seed": null, "n": null, "stream_options": null})");
  EXPECT_EQ(r.params.max_tokens, 16);
  EXPECT_EQ(r.params.sampling.temperature, 1.0f);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_EQ(r.n, 1);
}

TEST(OpenAiParse, MaxTokensAgainstTheContext) {
  // max_model_len 64; a 60-token prompt leaves 4.
  std::string ids = "[0";
  for (int i = 1; i < 60; ++i) ids += ", 10";
  ids += "]";
  EXPECT_EQ(parse_ok(kCmpl, "{\"prompt\": " + ids + "}").params.max_tokens, 4);  // 16 cut to 4
  EXPECT_EQ(parse_ok(kCmpl, "{\"prompt\": " + ids + ", \"max_tokens\": 4}").params.max_tokens, 4);
  const ParseResult over = parse(kCmpl, "{\"prompt\": " + ids + ", \"max_tokens\": 5}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(over));
  EXPECT_EQ(std::get<ApiError>(over).kind, ErrorKind::ContextLength);
  // A 64-token prompt leaves no room at all.
  std::string full = "[0";
  for (int i = 1; i < 64; ++i) full += ", 10";
  const ParseResult none = parse(kCmpl, "{\"prompt\": " + full + "]}");
  ASSERT_TRUE(std::holds_alternative<ApiError>(none));
  EXPECT_EQ(std::get<ApiError>(none).param, "prompt");
}

TEST(OpenAiParse, ChatRendersTheTemplate) {
  const model::Tokenizer& tok = tiny_tokenizer();
  const GenerationRequest r = parse_ok(kChat, R"({"model": "tiny", "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "text", "text": "!"}]},
      {"role": "assistant", "content": null},
      {"role": "user", "content": "2+2?"}]})");
  const std::string B = "<｜begin▁of▁sentence｜>", E = "<｜end▁of▁sentence｜>", U = "<｜User｜>",
                    A = "<｜Assistant｜>";
  EXPECT_EQ(r.prompt_text, B + "Be brief." + U + "Hi!" + A + E + U + "2+2?" + A);
  EXPECT_EQ(r.prompt_tokens, tok.encode(r.prompt_text, false));
  EXPECT_EQ(r.prompt_tokens.front(), tok.specials().bos);  // exactly one bos
  EXPECT_NE(r.prompt_tokens[1], tok.specials().bos);
  EXPECT_EQ(r.prompt_tokens.back(), tok.specials().assistant);
  // Chat's default budget: the rest of the context.
  EXPECT_EQ(r.params.max_tokens, 64 - int64_t(r.prompt_tokens.size()));
}

TEST(OpenAiParse, ChatMaxCompletionTokensWinsAndLogprobs) {
  const GenerationRequest r = parse_ok(kChat, R"({"messages": [{"role": "user", "content": "x"}],
      "max_tokens": 3, "max_completion_tokens": 7, "logprobs": true, "top_logprobs": 4})");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.logprobs, 4);
  const GenerationRequest plain =
      parse_ok(kChat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                          "logprobs": false, "add_generation_prompt": false})");
  EXPECT_EQ(plain.params.max_tokens, 3);
  EXPECT_FALSE(plain.logprobs.has_value());
  EXPECT_NE(plain.prompt_tokens.back(), tiny_tokenizer().specials().assistant);
  const GenerationRequest lp0 =
      parse_ok(kChat, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})");
  EXPECT_EQ(lp0.logprobs, 0);
}

TEST(OpenAiParse, BodySizeModelAndApiKeyChecks) {
  EXPECT_FALSE(check_body_size(4096, info()).has_value());
  const auto too_big = check_body_size(4097, info());
  ASSERT_TRUE(too_big.has_value());
  EXPECT_EQ(too_big->status(), 413);

  EXPECT_FALSE(check_model(std::nullopt, info()).has_value());
  EXPECT_FALSE(check_model("tiny", info()).has_value());
  ASSERT_TRUE(check_model("Tiny", info()).has_value());
  EXPECT_EQ(check_model("Tiny", info())->status(), 404);

  EXPECT_FALSE(check_api_key("", "").has_value());  // no key configured
  EXPECT_FALSE(check_api_key("Bearer s3cret", "s3cret").has_value());
  for (const char* header : {"", "Bearer wrong", "s3cret", "Bearer s3cret2", "bearer s3cret"}) {
    const auto err = check_api_key(header, "s3cret");
    ASSERT_TRUE(err.has_value()) << header;
    EXPECT_EQ(err->status(), 401);
    EXPECT_EQ(err->body()["error"]["code"], "invalid_api_key");
  }
}

TEST(OpenAiErrors, StatusAndTypeMapping) {
  struct Case {
    ErrorKind kind;
    int status;
    std::string type;
  };
  const std::vector<Case> cases = {
      {ErrorKind::InvalidRequest, 400, "invalid_request_error"},
      {ErrorKind::ContextLength, 400, "invalid_request_error"},
      {ErrorKind::Unauthorized, 401, "invalid_request_error"},
      {ErrorKind::ModelNotFound, 404, "invalid_request_error"},
      {ErrorKind::NotFound, 404, "invalid_request_error"},
      {ErrorKind::MethodNotAllowed, 405, "invalid_request_error"},
      {ErrorKind::RequestTimeout, 408, "invalid_request_error"},
      {ErrorKind::PayloadTooLarge, 413, "invalid_request_error"},
      {ErrorKind::HeadersTooLarge, 431, "invalid_request_error"},
      {ErrorKind::Unavailable, 503, "server_error"},
      {ErrorKind::Internal, 500, "server_error"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(http_status(c.kind), c.status);
    EXPECT_EQ(error_type(c.kind), c.type);
  }
  const ApiError e{ErrorKind::ModelNotFound, "no such model", "model"};
  EXPECT_EQ(e.body().dump(),
            R"({"error":{"code":"model_not_found","message":"no such model","param":"model",)"
            R"("type":"invalid_request_error"}})");
}

}  // namespace
}  // namespace troupe::net::openai
