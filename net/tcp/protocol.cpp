#include "net/tcp/protocol.h"

#include <array>

namespace troupe::net::tcp {
namespace {

// Fields a submit passes on to the /v1/completions checks unchanged.
constexpr std::array<const char*, 9> kSamplingFields = {
    "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "ignore_eos",
    "logprobs"};

bool valid_id(const json& id) { return id.is_number_integer() || id.is_string(); }

// The submit as a /v1/completions body: "tokens" becomes a token-id prompt.
std::variant<json, std::string> completion_body(const json& frame) {
  const bool has_prompt = frame.contains("prompt");
  const bool has_tokens = frame.contains("tokens");
  if (has_prompt == has_tokens) return std::string("submit needs exactly one of 'prompt' or 'tokens'");
  json body = json::object();
  if (has_prompt) {
    if (!frame["prompt"].is_string()) return std::string("'prompt' must be a string");
    body["prompt"] = frame["prompt"];
  } else {
    const json& t = frame["tokens"];
    if (!t.is_array() || t.empty()) return std::string("'tokens' must be a non-empty list of token ids");
    for (const json& e : t)
      if (!e.is_number_integer()) return std::string("'tokens' must be a non-empty list of token ids");
    body["prompt"] = t;
  }
  for (const char* f : kSamplingFields)
    if (frame.contains(f)) body[f] = frame[f];
  return body;
}

Command parse_submit(const json& frame, const json& id, const openai::ServingInfo& info,
                     const model::Tokenizer& tok, std::string_view api_key) {
  if (!api_key.empty()) {
    const json* key = frame.contains("api_key") ? &frame["api_key"] : nullptr;
    if (!key || !key->is_string() || key->get<std::string>() != api_key)
      return CommandError{id, "missing or wrong 'api_key'"};
  }
  auto body = completion_body(frame);
  if (auto* err = std::get_if<std::string>(&body)) return CommandError{id, *err};
  openai::ParseResult parsed = openai::parse_generation_request(
      openai::Endpoint::Completions, std::get<json>(body).dump(), info, tok);
  if (auto* err = std::get_if<openai::ApiError>(&parsed)) return CommandError{id, err->message};
  return SubmitCommand{id, std::move(std::get<openai::GenerationRequest>(parsed))};
}

}  // namespace

Command parse_command(const json& frame, const openai::ServingInfo& info,
                      const model::Tokenizer& tok, std::string_view api_key) {
  const json id = frame.contains("id") ? frame["id"] : json(nullptr);
  if (!valid_id(id)) return CommandError{nullptr, "'id' must be an integer or a string"};
  const json type = frame.contains("type") ? frame["type"] : json(nullptr);
  if (type == "submit") return parse_submit(frame, id, info, tok, api_key);
  if (type == "abort") return AbortCommand{id};
  return CommandError{id, "unknown frame type " + type.dump() + "; use \"submit\" or \"abort\""};
}

std::string id_key(const json& id) { return id.dump(); }

// [{"logprob", "top": [[id, logprob], ...]}] per token, as token ids (the TCP API's unit).
json logprobs_message(const std::vector<runtime::SampleLogprobs>& logprobs) {
  json list = json::array();
  for (const runtime::SampleLogprobs& lp : logprobs) {
    json top = json::array();
    for (const runtime::Logprob& alt : lp.top) top.push_back({alt.token, alt.logprob});
    list.push_back({{"logprob", lp.sampled.logprob}, {"top", std::move(top)}});
  }
  return list;
}

json tokens_message(const json& id, const runtime::RequestOutput& out) {
  json m = {{"type", "tokens"}, {"id", id}, {"tokens", out.new_tokens}, {"text", out.new_text}};
  if (!out.new_logprobs.empty()) m["logprobs"] = logprobs_message(out.new_logprobs);
  return m;
}

json done_message(const json& id, const runtime::RequestOutput& last, int64_t prompt_tokens,
                  int64_t completion_tokens) {
  json m = {{"type", "done"},
            {"id", id},
            {"finish_reason", std::string(last.finish_reason())},
            {"usage",
             {{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens},
              {"cached_tokens", last.num_cached_tokens}}}};
  if (!last.error.empty()) m["message"] = last.error;
  return m;
}

json error_message(const json& id, std::string_view message) {
  return {{"type", "error"}, {"id", id}, {"message", std::string(message)}};
}

}  // namespace troupe::net::tcp
