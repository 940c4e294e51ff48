#include "net/openai/tokenize.h"

#include "model/tokenizer.h"
#include "net/openai/json_fields.h"
#include "net/openai/prompt.h"

namespace troupe::net::openai {

namespace {

json tokenize_or_throw(std::string_view body_text, const ServingInfo& info,
                       const model::TextTokenizer& tok) {
  const json body = parse_json_object(body_text, info);
  if (auto err = check_model(get_string(body, "model"), info)) throw ApiException{*err};
  EncodedPrompt prompt;
  if (find_field(body, "messages")) {
    const bool add_generation_prompt = get_bool(body, "add_generation_prompt").value_or(true);
    prompt = encode_chat_prompt(parse_messages(body), tok, add_generation_prompt);
  } else {
    const bool add_special = get_bool(body, "add_special_tokens").value_or(true);
    prompt = encode_completion_prompt(body, tok, add_special);
  }
  json token_strs = nullptr;
  if (get_bool(body, "return_token_strs").value_or(false)) {
    token_strs = json::array();
    for (int32_t id : prompt.tokens) token_strs.push_back(tok.id_to_token(id).value_or(""));
  }
  return {{"count", prompt.tokens.size()},
          {"max_model_len", info.max_model_len},
          {"tokens", prompt.tokens},
          {"token_strs", std::move(token_strs)}};
}

json detokenize_or_throw(std::string_view body_text, const ServingInfo& info,
                         const model::TextTokenizer& tok) {
  const json body = parse_json_object(body_text, info);
  if (auto err = check_model(get_string(body, "model"), info)) throw ApiException{*err};
  const json* tokens = find_field(body, "tokens");
  if (!tokens) throw_api_error(ErrorKind::InvalidRequest, "'tokens' is required", "tokens");
  const std::vector<int32_t> ids = as_token_ids(*tokens, "tokens", tok.vocab_size());
  return {{"prompt", tok.decode(ids)}};
}

template <class F>
JsonResult catching(F&& f) {
  try {
    return f();
  } catch (const ApiException& e) {
    return e.error;
  }
}

}  // namespace

JsonResult tokenize(std::string_view body, const ServingInfo& info, const model::TextTokenizer& tok) {
  return catching([&] { return tokenize_or_throw(body, info, tok); });
}

JsonResult detokenize(std::string_view body, const ServingInfo& info, const model::TextTokenizer& tok) {
  return catching([&] { return detokenize_or_throw(body, info, tok); });
}

}  // namespace troupe::net::openai
