#include "net/openai/request_parse.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/check.h"
#include "model/tokenizer.h"
#include "net/openai/json_fields.h"
#include "net/openai/kv_requests.h"
#include "net/openai/prompt.h"

namespace troupe::net::openai {

namespace {

[[noreturn]] void bad(std::string message, std::string param) {
  throw_api_error(ErrorKind::InvalidRequest, std::move(message), std::move(param));
}

std::string str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Where a JSON text holds a number too large for a double ("1e999"): the field's path
// ("temperature", "prompt[3]", "messages[0].content"), its top-level key and the token.
// Run only on a body that failed to parse, so good bodies pay nothing for it.
struct NumberOverflow {
  std::string path, param, token;
};

// At most `n` bytes of valid UTF-8 `s`, cut at a character boundary, "..." when cut.
std::string cut(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n) + "...";
}

class OverflowLocator : public nlohmann::json_sax<json> {
 public:
  std::optional<NumberOverflow> found;

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& k) override {
    stack_.back().key = k;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string& token, const nlohmann::detail::exception& ex) override {
    if (ex.id != 406) return false;  // out_of_range.406: number overflow
    NumberOverflow o;
    o.token = cut(token, 40);  // a number token: ASCII
    for (const Level& l : stack_) {
      if (l.array) {
        o.path += "[" + std::to_string(l.next) + "]";
      } else {
        o.path += (o.path.empty() ? "" : ".") + cut(l.key, 64);
        if (o.param.empty()) o.param = cut(l.key, 64);
      }
    }
    found = std::move(o);
    return false;
  }

 private:
  struct Level {
    bool array = false;
    std::string key;  // objects: the key whose value is being read
    size_t next = 0;  // arrays: the index of the element being read
  };
  bool value() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().next;
    return true;
  }
  bool open(bool array) {
    stack_.push_back({array, "", 0});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return value();  // the nested value is done: the parent array moves on
  }
  std::vector<Level> stack_;
};

std::optional<NumberOverflow> find_number_overflow(std::string_view body) {
  OverflowLocator locator;
  json::sax_parse(body, &locator);
  return locator.found;
}

EncodedPrompt read_prompt(Endpoint endpoint, const json& body, const model::TextTokenizer& tok) {
  if (endpoint == Endpoint::Completions) return encode_completion_prompt(body, tok);
  const bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
  return encode_chat_prompt(parse_messages(body), tok, add_generation_prompt);
}

void read_sampling(const json& body, GenerationRequest& req) {
  kernels::SamplingParams& s = req.params.sampling;
  const double temperature = get_number(body, "temperature").value_or(1.0);
  s.temperature = float(temperature);
  if (!std::isfinite(s.temperature) || s.temperature < 0.0f)
    bad("'temperature' must be >= 0 (and fit a float), got " + str(temperature), "temperature");
  s.top_p = float(get_number(body, "top_p").value_or(1.0));
  if (!(s.top_p > 0.0f && s.top_p <= 1.0f))
    bad("'top_p' must be in (0, 1], got " + str(s.top_p), "top_p");
  const int64_t top_k = get_int(body, "top_k").value_or(0);
  if (top_k < -1 || top_k > std::numeric_limits<int32_t>::max())
    bad("'top_k' must be -1 or 0 (off) or a positive integer, got " + std::to_string(top_k),
        "top_k");
  s.top_k = int32_t(std::max<int64_t>(top_k, 0));
  s.min_p = float(get_number(body, "min_p").value_or(0.0));
  if (!(s.min_p >= 0.0f && s.min_p <= 1.0f))
    bad("'min_p' must be in [0, 1], got " + str(s.min_p), "min_p");
  if (auto seed = get_int(body, "seed")) req.seed = uint64_t(*seed);
  s.seed = req.seed.value_or(0);
}

// Output token budget; the prompt must leave room for at least one output token.
int64_t read_max_tokens(Endpoint endpoint, const json& body, int64_t prompt_len,
                        const ServingInfo& info) {
  const int64_t room = info.max_model_len - prompt_len;
  const std::string prompt_param = endpoint == Endpoint::Completions ? "prompt" : "messages";
  if (room < 1)
    throw_api_error(ErrorKind::ContextLength,
                    "This model's maximum context length is " + std::to_string(info.max_model_len) +
                        " tokens. However, your request has " + std::to_string(prompt_len) +
                        " input tokens, which leaves no room for output.",
                    prompt_param);
  std::string param = "max_tokens";
  std::optional<int64_t> given = get_int(body, param);
  if (endpoint == Endpoint::ChatCompletions) {
    if (auto mct = get_int(body, "max_completion_tokens")) {
      given = mct;
      param = "max_completion_tokens";
    }
  }
  if (!given) return endpoint == Endpoint::Completions ? std::min<int64_t>(16, room) : room;
  if (*given < 1) bad("'" + param + "' must be at least 1, got " + std::to_string(*given), param);
  if (*given > room)
    throw_api_error(ErrorKind::ContextLength,
                    "'" + param + "' is too large: " + std::to_string(*given) +
                        ". This model's maximum context length is " +
                        std::to_string(info.max_model_len) + " tokens and your request has " +
                        std::to_string(prompt_len) + " input tokens (" + std::to_string(room) +
                        " left for output).",
                    param);
  return *given;
}

void read_stops(const json& body, const model::TextTokenizer& tok, runtime::RequestParams& p) {
  p.stop = get_string_list(body, "stop");
  for (const std::string& s : p.stop)
    if (s.empty()) bad("'stop' strings must not be empty", "stop");
  if (const json* ids = find_field(body, "stop_token_ids"))
    p.stop_token_ids = as_token_ids(*ids, "stop_token_ids", tok.vocab_size());
  p.ignore_eos = get_bool(body, "ignore_eos").value_or(false);
  p.include_stop_str_in_output = get_bool(body, "include_stop_str_in_output").value_or(false);
  p.skip_special_tokens = get_bool(body, "skip_special_tokens").value_or(true);
}

int32_t checked_logprobs(int64_t k, const std::string& param, const ServingInfo& info) {
  if (k < 0 || k > info.max_logprobs)
    bad("'" + param + "' must be in [0, " + std::to_string(info.max_logprobs) + "], got " +
            std::to_string(k),
        param);
  return int32_t(k);
}

// Completions: "logprobs": k. Chat: "logprobs": true plus "top_logprobs": k.
std::optional<int32_t> read_logprobs(Endpoint endpoint, const json& body, const ServingInfo& info) {
  if (endpoint == Endpoint::Completions) {
    if (auto k = get_int(body, "logprobs")) return checked_logprobs(*k, "logprobs", info);
    return std::nullopt;
  }
  const bool wanted = get_bool(body, "logprobs").value_or(false);
  const std::optional<int64_t> top = get_int(body, "top_logprobs");
  if (top && !wanted) bad("'top_logprobs' needs 'logprobs' set to true", "top_logprobs");
  if (!wanted) return std::nullopt;
  return checked_logprobs(top.value_or(0), "top_logprobs", info);
}

void read_options(const json& body, const ServingInfo& info, GenerationRequest& req) {
  const int64_t n = get_int(body, "n").value_or(1);
  if (n < 1 || n > info.max_n)
    bad("'n' must be in [1, " + std::to_string(info.max_n) + "], got " + std::to_string(n), "n");
  req.n = int32_t(n);
  req.stream = get_bool(body, "stream").value_or(false);
  if (const json* opts = find_field(body, "stream_options")) {
    if (!opts->is_object()) bad("'stream_options' must be an object", "stream_options");
    if (!req.stream) bad("'stream_options' is only allowed with 'stream': true", "stream_options");
    req.include_usage = get_bool(*opts, "include_usage").value_or(false);
  }
  req.user = get_string(body, "user").value_or("");
  req.return_token_ids = get_bool(body, "return_token_ids").value_or(false);
  if (auto id = get_string(body, "kv_restore")) req.params.kv_restore = checked_kv_name(*id, "kv_restore");
}

GenerationRequest parse_or_throw(Endpoint endpoint, const json& body, const ServingInfo& info,
                                 const model::TextTokenizer& tok) {
  if (auto err = check_model(get_string(body, "model"), info)) throw ApiException{*err};
  GenerationRequest req;
  req.endpoint = endpoint;
  req.model = info.model_name;
  if (info.faults && info.faults->next_tokenize())  // stands for a tokenizer that throws
    throw std::runtime_error("injected fault: tokenize-fail");
  EncodedPrompt prompt = read_prompt(endpoint, body, tok);
  req.prompt_tokens = std::move(prompt.tokens);
  req.prompt_text = std::move(prompt.text);
  read_sampling(body, req);
  req.params.max_tokens = read_max_tokens(endpoint, body, int64_t(req.prompt_tokens.size()), info);
  read_stops(body, tok, req.params);
  req.logprobs = read_logprobs(endpoint, body, info);
  req.params.num_logprobs = req.logprobs.value_or(-1);
  read_options(body, info, req);
  try {
    req.params.validate();  // the engine's own rules; the reads above should cover them
  } catch (const Error& e) {
    bad(e.what(), "");
  }
  return req;
}

}  // namespace

ParseResult parse_generation_request(Endpoint endpoint, std::string_view body,
                                     const ServingInfo& info, const model::TextTokenizer& tok) {
  try {
    return parse_or_throw(endpoint, parse_json_object(body, info), info, tok);
  } catch (const ApiException& e) {
    return e.error;
  }
}

ParseResult parse_generation_body(Endpoint endpoint, const json& body, const ServingInfo& info,
                                  const model::TextTokenizer& tok) {
  try {
    if (!body.is_object()) bad("the request body must be a JSON object", "");
    return parse_or_throw(endpoint, body, info, tok);
  } catch (const ApiException& e) {
    return e.error;
  } catch (const std::exception& e) {  // a tokenizer or allocation failure: the server's fault
    return ApiError{ErrorKind::Internal, std::string("cannot process the request: ") + e.what(),
                    ""};
  }
}

json parse_json_object(std::string_view body, const ServingInfo& info) {
  if (auto err = check_body_size(body.size(), info)) throw ApiException{*err};
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    // A number beyond the double range (1e999) is well-formed JSON that nlohmann refuses;
    // say which field held it, as for any other out-of-range number.
    if (auto overflow = find_number_overflow(body))
      bad("'" + overflow->path + "' must be a finite number, got " + overflow->token +
              " (outside the double range)",
          overflow->param);
    bad("the request body is not valid JSON", "");
  }
  if (!parsed.is_object()) bad("the request body must be a JSON object", "");
  return parsed;
}

std::optional<ApiError> check_body_size(size_t size, const ServingInfo& info) {
  if (size <= info.max_body_bytes) return std::nullopt;
  return ApiError{ErrorKind::PayloadTooLarge,
                  "the request body has " + std::to_string(size) +
                      " bytes, more than the limit of " + std::to_string(info.max_body_bytes),
                  ""};
}

std::optional<ApiError> check_model(const std::optional<std::string>& model,
                                    const ServingInfo& info) {
  if (!model || *model == info.model_name) return std::nullopt;
  return ApiError{
      ErrorKind::ModelNotFound,
      "The model `" + *model + "` does not exist. This server serves `" + info.model_name + "`.",
      "model"};
}

std::optional<ApiError> check_api_key(std::string_view authorization, std::string_view api_key) {
  if (api_key.empty()) return std::nullopt;
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization.starts_with(kBearer) && authorization.substr(kBearer.size()) == api_key)
    return std::nullopt;
  return ApiError{ErrorKind::Unauthorized,
                  authorization.empty() ? "missing API key: send 'Authorization: Bearer <key>'"
                                        : "incorrect API key",
                  ""};
}

}  // namespace troupe::net::openai
