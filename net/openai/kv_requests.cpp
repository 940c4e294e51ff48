#include "net/openai/kv_requests.h"

#include "net/openai/json_fields.h"
#include "runtime/kv_cache/pin_index.h"

namespace troupe::net::openai {

std::string checked_kv_name(const std::string& name, const std::string& param) {
  if (name.empty() || name.size() > runtime::kMaxPinNameBytes)
    throw_api_error(ErrorKind::InvalidRequest,
                    "'" + param + "' must be 1 to " + std::to_string(runtime::kMaxPinNameBytes) +
                        " bytes, got " + std::to_string(name.size()),
                    param);
  for (unsigned char c : name)
    if (c < 0x20 || c == 0x7f || c == '/')
      throw_api_error(ErrorKind::InvalidRequest,
                      "'" + param + "' must not hold control characters or '/'", param);
  return name;
}

namespace {

std::string conversation_of(const json& body) {
  const auto id = get_string(body, "conversation");
  if (!id) throw_api_error(ErrorKind::InvalidRequest, "'conversation' (the name to save under) is required", "conversation");
  return checked_kv_name(*id, "conversation");
}

}  // namespace

ParseResult parse_kv_save(std::string_view text, const ServingInfo& info,
                          const model::TextTokenizer& tok) {
  try {
    json body = parse_json_object(text, info);
    const std::string name = conversation_of(body);
    const json* tokens = find_field(body, "tokens");
    if (tokens && find_field(body, "prompt"))
      throw_api_error(ErrorKind::InvalidRequest, "give 'tokens' or 'prompt', not both", "tokens");
    if (!tokens && !find_field(body, "prompt"))
      throw_api_error(ErrorKind::InvalidRequest, "'tokens' (or 'prompt') is required", "tokens");
    if (tokens) body["prompt"] = *tokens;
    for (const char* f : {"tokens", "conversation", "n", "stream", "stream_options", "logprobs",
                          "stop", "stop_token_ids", "max_tokens", "temperature"})
      body.erase(f);
    // One greedy token: the prompt runs in full, its blocks and snapshot are what is kept.
    body["max_tokens"] = 1;
    body["temperature"] = 0;
    body["ignore_eos"] = true;
    ParseResult r = parse_generation_body(Endpoint::Completions, body, info, tok);
    if (auto* req = std::get_if<GenerationRequest>(&r)) req->params.kv_save = name;
    return r;
  } catch (const ApiException& e) {
    return e.error;
  } catch (const std::exception& e) {  // allocation: the server's fault, never a crash
    return ApiError{ErrorKind::Internal, std::string("cannot process the request: ") + e.what(), ""};
  }
}

ParseResult parse_kv_delete(std::string_view text, std::string_view path_id,
                            const ServingInfo& info) {
  try {
    std::string name;
    if (!path_id.empty()) name = checked_kv_name(std::string(path_id), "conversation");
    else name = conversation_of(parse_json_object(text, info));
    GenerationRequest req;
    req.model = info.model_name;
    req.prompt_tokens = {0};  // never run: the scheduler answers a delete itself
    req.params.max_tokens = 1;
    req.params.kv_delete = name;
    return req;
  } catch (const ApiException& e) {
    return e.error;
  }
}

nlohmann::json kv_saved_response(const GenerationRequest& req, const nlohmann::json& completion) {
  json out = {{"object", "kv.saved"}, {"conversation", req.params.kv_save}};
  const json* usage = find_field(completion, "usage");
  out["prompt_tokens"] = usage ? usage->value("prompt_tokens", int64_t{0}) : 0;
  int64_t cached = 0;
  if (const json* d = usage ? find_field(*usage, "prompt_tokens_details") : nullptr)
    cached = d->value("cached_tokens", int64_t{0});
  out["cached_tokens"] = cached;
  return out;
}

nlohmann::json kv_deleted_response(const GenerationRequest& req) {
  return {{"object", "kv.deleted"}, {"conversation", req.params.kv_delete}, {"deleted", true}};
}

}  // namespace troupe::net::openai
