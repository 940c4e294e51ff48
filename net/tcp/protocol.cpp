#include "net/tcp/protocol.h"

#include <array>
#include <optional>
#include <string>

namespace troupe::net::tcp {
namespace {

// Fields a submit passes on to the /v1/completions checks unchanged.
constexpr std::array<const char*, 9> kSamplingFields = {
    "max_tokens", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "ignore_eos",
    "logprobs"};

bool valid_id(const json& id) { return id.is_number_integer() || id.is_string(); }

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool valid_utf8(std::string_view s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const auto* end = p + s.size();
  while (p < end) {
    const unsigned char c = *p;
    if (c < 0x80) {
      ++p;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return false;
    }
    if (size_t(end - p) < len || p[1] < lo || p[1] > hi) return false;
    for (size_t i = 2; i < len; ++i)
      if ((p[i] & 0xC0) != 0x80) return false;
    p += len;
  }
  return true;
}

// At most `n` bytes of valid UTF-8 `s`, cut at a character boundary, "..." when cut.
std::string cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

// The first string (or map key) of `v` that is not valid UTF-8, as a message naming where
// it is ("'prompt'", "'stop[1]'", "a field name in 'x'"); nullopt when all are valid.
// msgpack's str type is UTF-8 by its spec, and everything downstream (the tokenizer,
// stop strings, JSON logs and error bodies) relies on it.
std::optional<std::string> invalid_utf8(const json& v, const std::string& path) {
  // Numbers and the like hold no text: no path is built for them (a token list is long).
  const auto holds_text = [](const json& e) { return e.is_string() || e.is_structured(); };
  switch (v.type()) {
    case json::value_t::string:
      if (valid_utf8(v.get_ref<const std::string&>())) return std::nullopt;
      return "'" + path + "' is not valid UTF-8";
    case json::value_t::array:
      for (size_t i = 0; i < v.size(); ++i)
        if (holds_text(v[i]))
          if (auto bad = invalid_utf8(v[i], path + "[" + std::to_string(i) + "]")) return bad;
      return std::nullopt;
    case json::value_t::object:
      for (const auto& [k, e] : v.items()) {
        if (!valid_utf8(k))
          return path.empty() ? std::string("a field name is not valid UTF-8")
                              : "a field name in '" + path + "' is not valid UTF-8";
        if (holds_text(e))
          if (auto bad = invalid_utf8(e, (path.empty() ? "" : path + ".") + cut(k, 64))) return bad;
      }
      return std::nullopt;
    default:
      return std::nullopt;
  }
}

// How an unexpected "type" reads in a message: short, and never throwing.
std::string describe_type(const json& type) {
  if (!type.is_string()) return type.type_name();
  return json(cut(type.get<std::string>(), 64)).dump(-1, ' ', false, json::error_handler_t::replace);
}

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
                     const model::TextTokenizer& tok, std::string_view api_key) {
  if (!api_key.empty()) {
    const json* key = frame.contains("api_key") ? &frame["api_key"] : nullptr;
    if (!key || !key->is_string() || key->get<std::string>() != api_key)
      return CommandError{id, "missing or wrong 'api_key'"};
  }
  auto body = completion_body(frame);
  if (auto* err = std::get_if<std::string>(&body)) return CommandError{id, *err};
  // Handed over as a value, not as JSON text: a dump would turn NaN and +-Inf into null
  // (the defaults) instead of the 400 they get.
  openai::ParseResult parsed =
      openai::parse_generation_body(openai::Endpoint::Completions, std::get<json>(body), info, tok);
  if (auto* err = std::get_if<openai::ApiError>(&parsed)) return CommandError{id, err->message};
  return SubmitCommand{id, std::move(std::get<openai::GenerationRequest>(parsed))};
}

}  // namespace

json usable_id(const json& frame) {
  const auto it = frame.find("id");
  if (it == frame.end() || !valid_id(*it)) return nullptr;
  if (it->is_string() && !valid_utf8(it->get_ref<const std::string&>())) return nullptr;
  return *it;
}

Command parse_command(const json& frame, const openai::ServingInfo& info,
                      const model::TextTokenizer& tok, std::string_view api_key) {
  const json id = frame.contains("id") ? frame["id"] : json(nullptr);
  if (!valid_id(id)) return CommandError{nullptr, "'id' must be an integer or a string"};
  if (id.is_string() && !valid_utf8(id.get_ref<const std::string&>()))
    return CommandError{nullptr, "'id' is not valid UTF-8"};
  if (auto bad = invalid_utf8(frame, "")) return CommandError{id, *bad};
  const json type = frame.contains("type") ? frame["type"] : json(nullptr);
  if (type == "submit") return parse_submit(frame, id, info, tok, api_key);
  if (type == "abort") return AbortCommand{id};
  return CommandError{id, "unknown frame type " + describe_type(type) + "; use \"submit\" or \"abort\""};
}

// Not a JSON dump: keys of distinct ids differ, and no byte of an id can make it throw.
std::string id_key(const json& id) {
  if (id.is_string()) return "s" + id.get<std::string>();
  return "n" + id.dump();  // a number: always dumps
}

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
