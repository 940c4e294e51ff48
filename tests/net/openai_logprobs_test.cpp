// logprobs / top_logprobs in the OpenAI layer and the TCP API: request fields -> the
// engine's num_logprobs (and the 400s), the engine's SampleLogprobs -> token texts and the
// completions / chat shapes (hand-written JSON), streamed chunks that join to the
// non-streamed list, n > 1.
#include <gtest/gtest.h>

#include <limits>

#include "model/tokenizer.h"
#include "net/http_test_client.h"
#include "net/openai/request_parse.h"
#include "net/openai/responses.h"
#include "net/openai/stream.h"
#include "net/tcp/protocol.h"
#include "support/golden.h"

namespace troupe::net::openai {
namespace {

using nlohmann::json;
using runtime::Logprob;
using runtime::RequestOutput;
using runtime::RequestStatus;
using runtime::SampleLogprobs;

const model::Tokenizer& tok() {
  return testing::golden_tokenizer();
}

// The id of a one-token text ("a", " the", ...).
int32_t id_of(const std::string& text) {
  const std::vector<int32_t> ids = tok().encode(text, false);
  EXPECT_EQ(ids.size(), 1u) << "'" << text << "' is not one token";
  return ids.empty() ? 0 : ids[0];
}

ServingInfo info() {
  ServingInfo i;
  i.model_name = "tiny";
  i.max_model_len = 64;
  return i;  // max_logprobs 20, as vLLM's default
}

ParseResult parse(Endpoint e, const std::string& body) {
  return parse_generation_request(e, body, info(), tok());
}

// --- request fields --------------------------------------------------------------------------

TEST(OpenAiLogprobs, RequestFieldsSetTheEngineParameter) {
  struct Case {
    Endpoint endpoint;
    std::string body;
    int32_t want;  // params.num_logprobs
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  const std::vector<Case> cases = {
      {Endpoint::Completions, R"({"prompt": "x"})", -1},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": null})", -1},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": 0})", 0},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": 20})", 20},
      {Endpoint::ChatCompletions, "{" + msgs + "}", -1},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": false})", -1},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": true})", 0},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": true, "top_logprobs": 20})", 20},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const ParseResult r = parse(c.endpoint, c.body);
    ASSERT_TRUE(std::holds_alternative<GenerationRequest>(r)) << std::get<ApiError>(r).message;
    const GenerationRequest& req = std::get<GenerationRequest>(r);
    EXPECT_EQ(req.params.num_logprobs, c.want);
    EXPECT_EQ(req.logprobs.value_or(-1), c.want);
  }
}

TEST(OpenAiLogprobs, BadFieldsAre400NamingTheParam) {
  struct Case {
    Endpoint endpoint;
    std::string body;
    std::string param;
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  const std::vector<Case> cases = {
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": 21})", "logprobs"},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": -1})", "logprobs"},
      {Endpoint::Completions, R"({"prompt": "x", "logprobs": true})", "logprobs"},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "top_logprobs": 2})", "top_logprobs"},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": false, "top_logprobs": 2})",
       "top_logprobs"},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": true, "top_logprobs": 21})",
       "top_logprobs"},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": true, "top_logprobs": -1})",
       "top_logprobs"},
      {Endpoint::ChatCompletions, "{" + msgs + R"(, "logprobs": 3})", "logprobs"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.body);
    const ParseResult r = parse(c.endpoint, c.body);
    ASSERT_TRUE(std::holds_alternative<ApiError>(r));
    const ApiError& err = std::get<ApiError>(r);
    EXPECT_EQ(err.status(), 400);
    EXPECT_EQ(err.param, c.param);
    EXPECT_NE(err.message.find(c.param), std::string::npos) << err.message;
  }
}

// --- token texts and shapes ----------------------------------------------------------------

TEST(OpenAiLogprobs, TokenTextsAreSingleIdDecodesAndMinusInfIsClamped) {
  const int32_t eos = tok().specials().eos, a = id_of("a");
  const SampleLogprobs lp{{eos, -std::numeric_limits<float>::infinity()}, {{a, -0.5f}}};
  const TokenLogprob t = token_logprob(lp, tok());
  EXPECT_EQ(t.token, model::kEosToken);  // special tokens keep their text, as vLLM's
  EXPECT_EQ(t.logprob, -9999.0f);
  ASSERT_EQ(t.top.size(), 1u);
  EXPECT_EQ(t.top[0], (std::pair<std::string, float>{"a", -0.5f}));
}

RequestOutput output(std::vector<int32_t> tokens, std::string text,
                     std::vector<SampleLogprobs> logprobs,
                     RequestStatus status = RequestStatus::Running) {
  RequestOutput o;
  o.new_tokens = std::move(tokens);
  o.new_text = std::move(text);
  o.new_logprobs = std::move(logprobs);
  o.status = status;
  return o;
}

GenerationRequest request(Endpoint e, int32_t n, std::optional<int32_t> logprobs) {
  GenerationRequest r;
  r.endpoint = e;
  r.prompt_tokens = {0, 10, 11};
  r.n = n;
  r.logprobs = logprobs;
  return r;
}

const ResponseMeta kMeta{"cmpl-1", 1700000000, "tiny"};

// Two tokens: "a" (sampled, the most likely) then "b" (sampled, not among the top 1).
std::vector<RequestOutput> two_token_outputs() {
  const int32_t a = id_of("a"), b = id_of("b"), c = id_of("c");
  return {output({a}, "a", {{{a, -0.25f}, {{a, -0.25f}}}}),
          output({b}, "b", {{{b, -2.0f}, {{c, -0.5f}}}}, RequestStatus::FinishedLength)};
}

TEST(OpenAiLogprobs, CompletionTopHoldsTheSampledToken) {
  ResponseCollector col(request(Endpoint::Completions, 1, 1), kMeta, &tok());
  for (const RequestOutput& o : two_token_outputs()) col.on_output(0, o);
  ASSERT_TRUE(col.done());
  EXPECT_EQ(col.response()["choices"][0]["logprobs"], json::parse(R"({
    "tokens": ["a", "b"], "token_logprobs": [-0.25, -2.0],
    "top_logprobs": [{"a": -0.25}, {"c": -0.5, "b": -2.0}], "text_offset": [0, 1]})"));
}

TEST(OpenAiLogprobs, ChatTopIsTheKMostLikely) {
  ResponseCollector col(request(Endpoint::ChatCompletions, 1, 1), kMeta, &tok());
  for (const RequestOutput& o : two_token_outputs()) col.on_output(0, o);
  EXPECT_EQ(col.response()["choices"][0]["logprobs"], json::parse(R"({"content": [
    {"token": "a", "logprob": -0.25, "bytes": [97],
     "top_logprobs": [{"token": "a", "logprob": -0.25, "bytes": [97]}]},
    {"token": "b", "logprob": -2.0, "bytes": [98],
     "top_logprobs": [{"token": "c", "logprob": -0.5, "bytes": [99]}]}]})"));
}

TEST(OpenAiLogprobs, NullUnlessAskedFor) {
  ResponseCollector col(request(Endpoint::Completions, 1, std::nullopt), kMeta, &tok());
  for (const RequestOutput& o : two_token_outputs()) col.on_output(0, o);
  EXPECT_EQ(col.response()["choices"][0]["logprobs"], nullptr);
}

TEST(OpenAiLogprobs, TextOffsetCountsCharacters) {
  const std::vector<TokenLogprob> lps = {{"\xC3\xA9t\xC3\xA9", -1.0f, {}}, {"!", -1.0f, {}}};
  EXPECT_EQ(logprobs_json(Endpoint::Completions, lps)["text_offset"], json::parse("[0, 3]"));
  EXPECT_EQ(logprobs_json(Endpoint::Completions, lps, 7)["text_offset"], json::parse("[7, 10]"));
  EXPECT_EQ(logprobs_text_length(lps), 4u);
}

// --- streamed == non-streamed -------------------------------------------------------------

// Three tokens per choice for two choices, interleaved; the middle token has no text yet
// (held back), so its logprobs go with the next chunk.
std::vector<std::pair<int32_t, RequestOutput>> interleaved_outputs() {
  const int32_t a = id_of("a"), b = id_of("b"), c = id_of("c"), the = id_of(" the");
  auto lp = [](int32_t t, float v, std::vector<Logprob> top) {
    return SampleLogprobs{{t, v}, top};
  };
  return {
      {0, output({a}, "a", {lp(a, -0.1f, {{a, -0.1f}, {b, -3.0f}})})},
      {1, output({the}, " the", {lp(the, -0.7f, {{a, -0.5f}, {the, -0.7f}})})},
      {0, output({b}, "", {lp(b, -1.5f, {{c, -1.0f}, {b, -1.5f}})})},
      {1, output({c}, "c", {lp(c, -0.2f, {{c, -0.2f}, {a, -2.5f}})})},
      {0, output({c}, "bc", {lp(c, -0.3f, {{c, -0.3f}, {a, -1.25f}})})},
      {1,
       output({a}, "a", {lp(a, -0.9f, {{b, -0.6f}, {a, -0.9f}})}, RequestStatus::FinishedStopped)},
      {0, output({}, "", {}, RequestStatus::FinishedLength)},
  };
}

// The logprobs of each choice joined over the stream's chunks.
std::vector<json> joined_stream_logprobs(Endpoint e, const std::string& wire, size_t n) {
  std::vector<json> joined(n, nullptr);
  for (const std::string& payload : testing::sse_payloads(wire)) {
    if (payload == "[DONE]") continue;
    const json chunk = json::parse(payload);
    for (const json& c : chunk["choices"]) {
      const json& lp = c["logprobs"];
      if (lp.is_null()) continue;
      json& into = joined[c["index"].get<size_t>()];
      if (into.is_null()) {
        into = lp;
        continue;
      }
      if (e == Endpoint::ChatCompletions) {
        for (const json& x : lp["content"]) into["content"].push_back(x);
      } else {
        for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
          for (const json& x : lp[key]) into[key].push_back(x);
      }
    }
  }
  return joined;
}

TEST(OpenAiLogprobs, StreamedChunksJoinToTheNonStreamedList) {
  for (Endpoint e : {Endpoint::Completions, Endpoint::ChatCompletions}) {
    SCOPED_TRACE(e == Endpoint::Completions ? "completions" : "chat");
    const GenerationRequest req = request(e, 2, 2);
    ResponseCollector col(req, kMeta, &tok());
    StreamEncoder enc(req, kMeta, &tok());
    std::string wire = enc.start();
    for (const auto& [index, out] : interleaved_outputs()) {
      col.on_output(index, out);
      wire += enc.on_output(index, out);
    }
    ASSERT_TRUE(col.done() && enc.done());
    wire += enc.finish();
    const json whole = col.response();
    const std::vector<json> joined = joined_stream_logprobs(e, wire, 2);
    for (size_t i = 0; i < 2; ++i) {
      const json& want = whole["choices"][i]["logprobs"];
      EXPECT_EQ(joined[i], want) << joined[i].dump() << "\n" << want.dump();
    }
    const json& first = whole["choices"][0]["logprobs"];
    const size_t tokens =
        e == Endpoint::Completions ? first["tokens"].size() : first["content"].size();
    EXPECT_EQ(tokens, 3u);
  }
  // Completions offsets run on across chunks: "a" "b" "c" -> 0 1 2; " the" "c" "a" -> 0 4 5.
  const GenerationRequest req = request(Endpoint::Completions, 2, 0);
  StreamEncoder enc(req, kMeta, &tok());
  std::string wire;
  for (const auto& [index, out] : interleaved_outputs()) wire += enc.on_output(index, out);
  const std::vector<json> joined = joined_stream_logprobs(Endpoint::Completions, wire, 2);
  EXPECT_EQ(joined[0]["text_offset"], json::parse("[0, 1, 2]"));
  EXPECT_EQ(joined[1]["text_offset"], json::parse("[0, 4, 5]"));
}

}  // namespace
}  // namespace troupe::net::openai

// --- TCP API ---------------------------------------------------------------------------------

namespace troupe::net::tcp {
namespace {

TEST(TcpLogprobs, SubmitPassesLogprobsAndTokensFramesCarryThem) {
  const openai::ServingInfo i = openai::info();
  const Command ok =
      parse_command(json{{"type", "submit"}, {"id", 1}, {"tokens", {5, 6}}, {"logprobs", 3}}, i,
                    openai::tok(), "");
  ASSERT_TRUE(std::holds_alternative<SubmitCommand>(ok));
  EXPECT_EQ(std::get<SubmitCommand>(ok).request.params.num_logprobs, 3);
  const Command bad =
      parse_command(json{{"type", "submit"}, {"id", 1}, {"tokens", {5, 6}}, {"logprobs", 21}}, i,
                    openai::tok(), "");
  ASSERT_TRUE(std::holds_alternative<CommandError>(bad));
  EXPECT_NE(std::get<CommandError>(bad).message.find("logprobs"), std::string::npos);

  runtime::RequestOutput out;
  out.new_tokens = {7};
  out.new_text = "x";
  EXPECT_FALSE(tokens_message(1, out).contains("logprobs"));
  out.new_logprobs = {{{7, -0.5f}, {{7, -0.5f}, {9, -1.0f}}}};
  EXPECT_EQ(tokens_message(1, out)["logprobs"],
            json::parse(R"([{"logprob": -0.5, "top": [[7, -0.5], [9, -1.0]]}])"));
}

}  // namespace
}  // namespace troupe::net::tcp
