// The OpenAI JSON bodies (net/openai): the first byte picks the endpoint (completions,
// chat, tokenize, detokenize, kv save, kv delete), the rest is the body. Contract: parse_generation_request, tokenize and detokenize never throw;
// every bad body is an ApiError value, whose JSON the server then writes.
#include "fuzz/targets.h"
#include "net/openai/kv_requests.h"
#include "net/openai/responses.h"
#include "net/openai/tokenize.h"

namespace troupe::fuzz {
namespace {

using namespace net::openai;

void render(const ApiError& err) {
  (void)dump_json(err.body());
}

void run_generation(Endpoint ep, std::string_view body) {
  ParseResult r = parse_generation_request(ep, body, tiny_serving_info(), tiny_tokenizer());
  if (const auto* err = std::get_if<ApiError>(&r)) render(*err);
}

void run_json(const JsonResult& r) {
  if (const auto* err = std::get_if<ApiError>(&r)) return render(*err);
  (void)dump_json(std::get<nlohmann::json>(r));
}

}  // namespace

void openai_body(const uint8_t* data, size_t size) {
  if (size == 0) return;
  const std::string_view body = as_text(data + 1, size - 1);
  switch (data[0] % 6) {
    case 4: {  // POST /v1/kv/save
      ParseResult r = parse_kv_save(body, tiny_serving_info(), tiny_tokenizer());
      if (const auto* err = std::get_if<ApiError>(&r)) render(*err);
      return;
    }
    case 5: {  // POST /v1/kv/delete, and the same bytes as DELETE /v1/kv/ID's path
      ParseResult r = parse_kv_delete(body, {}, tiny_serving_info());
      if (const auto* err = std::get_if<ApiError>(&r)) render(*err);
      r = parse_kv_delete({}, body.substr(0, 300), tiny_serving_info());
      if (const auto* err = std::get_if<ApiError>(&r)) render(*err);
      return;
    }
    case 0:
      return run_generation(Endpoint::Completions, body);
    case 1:
      return run_generation(Endpoint::ChatCompletions, body);
    case 2:
      return run_json(tokenize(body, tiny_serving_info(), tiny_tokenizer()));
    default:
      return run_json(detokenize(body, tiny_serving_info(), tiny_tokenizer()));
  }
}

}  // namespace troupe::fuzz

TROUPE_FUZZ_MAIN(troupe::fuzz::openai_body)
