#include "net/openai/prompt.h"

#include "kernels/check.h"
#include "model/tokenizer.h"
#include "net/openai/errors.h"
#include "net/openai/json_fields.h"

namespace troupe::net::openai {

namespace {

[[noreturn]] void bad(std::string message, std::string param) {
  throw_api_error(ErrorKind::InvalidRequest, std::move(message), std::move(param));
}

// A one-element list ["text"] or [[ids]] is one prompt; a longer list of strings or of
// lists is a batch, which this server does not take.
const json& unwrap_single_prompt(const json& prompt) {
  if (!prompt.is_array() || prompt.empty()) return prompt;
  const json& first = prompt.front();
  if (!first.is_string() && !first.is_array()) return prompt;  // a list of token ids
  if (prompt.size() > 1)
    bad("batched prompts are not supported: send one prompt per request", "prompt");
  return first;
}

std::string message_content(const json& message, const std::string& param) {
  const json* content = find_field(message, "content");
  if (!content) return {};
  if (content->is_string()) return content->get<std::string>();
  if (!content->is_array()) bad("'" + param + "' must be a string or a list of parts", param);
  std::string text;
  for (const json& part : *content) {
    const bool is_text = part.is_object() && part.contains("type") && part["type"] == "text" &&
                         part.contains("text") && part["text"].is_string();
    if (!is_text)
      bad("'" + param + "' parts must be {\"type\": \"text\", \"text\": string}", param);
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

EncodedPrompt encode_completion_prompt(const json& body, const model::TextTokenizer& tok,
                                       bool add_special_tokens) {
  const json* field = find_field(body, "prompt");
  if (!field) bad("'prompt' is required", "prompt");
  const json& prompt = unwrap_single_prompt(*field);
  EncodedPrompt out;
  if (prompt.is_string()) {
    out.text = prompt.get<std::string>();
    out.tokens = tok.encode(out.text, add_special_tokens);
  } else if (prompt.is_array()) {
    out.tokens = as_token_ids(prompt, "prompt", tok.vocab_size());
  } else {
    bad("'prompt' must be a string or a list of token ids", "prompt");
  }
  if (out.tokens.empty()) bad("'prompt' must not be empty", "prompt");
  return out;
}

std::vector<model::ChatMessage> parse_messages(const json& body) {
  const json* messages = find_field(body, "messages");
  if (!messages) bad("'messages' is required", "messages");
  if (!messages->is_array() || messages->empty())
    bad("'messages' must be a non-empty list", "messages");
  std::vector<model::ChatMessage> out;
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& m = (*messages)[i];
    const std::string at = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) bad("'" + at + "' must be an object", at);
    const json* role = find_field(m, "role");
    if (!role || !role->is_string()) bad("'" + at + ".role' must be a string", at + ".role");
    const std::string r = role->get<std::string>();
    if (r != "system" && r != "user" && r != "assistant")
      bad("unsupported role '" + r + "' in '" + at + ".role': expected system, user or assistant",
          at + ".role");
    out.push_back({r, message_content(m, at + ".content")});
  }
  return out;
}

EncodedPrompt encode_chat_prompt(const std::vector<model::ChatMessage>& messages,
                                 const model::TextTokenizer& tok, bool add_generation_prompt) {
  EncodedPrompt out;
  std::optional<std::string> text = tok.render_chat(messages, add_generation_prompt);
  if (!text)
    bad("this model has no chat template troupe can render (its file has none, or one of a "
        "family troupe does not know: chatml, llama3, llama2, mistral, deepseek-v3): use "
        "/v1/completions with a prompt you format yourself", "messages");
  out.text = std::move(*text);
  out.tokens = tok.encode(out.text, /*add_bos=*/false);  // the template starts with bos
  return out;
}

}  // namespace troupe::net::openai
