#include "model/chat_template.h"

#include "kernels/check.h"
#include "model/tokenizer.h"

namespace troupe::model {
namespace {

void check_roles(const std::vector<ChatMessage>& messages) {
  for (const ChatMessage& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant")
      TROUPE_FAIL("unsupported chat message role '" << m.role
                                                    << "' (expected system, user or assistant)");
  }
}

// Jinja's trim: leading and trailing whitespace removed.
std::string trimmed(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t b = s.find_first_not_of(kSpace);
  if (b == s.npos) return {};
  return std::string(s.substr(b, s.find_last_not_of(kSpace) - b + 1));
}

// All system texts joined by "\n\n", in order (the DeepSeek and Mistral forms take them
// wherever they appear).
std::string joined_system(const std::vector<ChatMessage>& messages, bool* any = nullptr) {
  std::string system;
  bool has = false;
  for (const ChatMessage& m : messages) {
    if (m.role != "system") continue;
    if (has) system += "\n\n";
    system += m.content;
    has = true;
  }
  if (any) *any = has;
  return system;
}

std::string deepseek_v3(const ChatSpecials& s, const std::vector<ChatMessage>& messages, bool gen) {
  std::string prompt = s.bos + joined_system(messages);
  for (const ChatMessage& m : messages) {
    if (m.role == "user") prompt.append(kUserToken).append(m.content);
    if (m.role == "assistant") prompt.append(kAssistantToken).append(m.content).append(s.eos);
  }
  if (gen) prompt += kAssistantToken;
  return prompt;
}

std::string chatml(const std::vector<ChatMessage>& messages, bool gen) {
  std::string prompt;
  for (const ChatMessage& m : messages)
    prompt += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) prompt += "<|im_start|>assistant\n";
  return prompt;
}

std::string llama3(const ChatSpecials& s, const std::vector<ChatMessage>& messages, bool gen) {
  std::string prompt = s.bos;
  for (const ChatMessage& m : messages)
    prompt += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trimmed(m.content) + "<|eot_id|>";
  if (gen) prompt += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return prompt;
}

// Llama2 and Mistral: user turns in [INST] brackets; the system text goes into the first
// user turn (Llama2: inside <<SYS>>; Mistral: before it). add_generation_prompt changes
// nothing: the prompt already ends after " [/INST]".
std::string inst_format(ChatFormat f, const ChatSpecials& s, const std::vector<ChatMessage>& messages) {
  const bool llama2 = f == ChatFormat::Llama2;
  bool has_system = false;
  const std::string system = joined_system(messages, &has_system);
  std::string prompt = llama2 ? "" : s.bos;
  bool first_user = true;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      std::string text = llama2 ? trimmed(m.content) : m.content;
      if (first_user && has_system)
        text = llama2 ? "<<SYS>>\n" + system + "\n<</SYS>>\n\n" + text : system + "\n\n" + text;
      first_user = false;
      prompt += (llama2 ? s.bos : "") + "[INST] " + text + " [/INST]";
    } else if (m.role == "assistant") {
      prompt += llama2 ? " " + trimmed(m.content) + " " + s.eos : m.content + s.eos;
    }
  }
  return prompt;
}

}  // namespace

const char* chat_format_name(ChatFormat f) {
  switch (f) {
    case ChatFormat::DeepSeekV3: return "deepseek-v3";
    case ChatFormat::ChatML: return "chatml";
    case ChatFormat::Llama3: return "llama3";
    case ChatFormat::Llama2: return "llama2";
    case ChatFormat::Mistral: return "mistral";
    case ChatFormat::None: break;
  }
  return "none";
}

ChatFormat detect_chat_format(std::string_view t) {
  auto has = [&](std::string_view marker) { return t.find(marker) != t.npos; };
  if (has("<|im_start|>")) return ChatFormat::ChatML;
  if (has("<|start_header_id|>") && has("<|end_header_id|>")) return ChatFormat::Llama3;
  if (has("[INST]")) return has("<<SYS>>") ? ChatFormat::Llama2 : ChatFormat::Mistral;
  if (has(kUserToken) && has(kAssistantToken)) return ChatFormat::DeepSeekV3;
  return ChatFormat::None;
}

std::string render_chat(ChatFormat format, const ChatSpecials& specials,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  check_roles(messages);
  switch (format) {
    case ChatFormat::DeepSeekV3: return deepseek_v3(specials, messages, add_generation_prompt);
    case ChatFormat::ChatML: return chatml(messages, add_generation_prompt);
    case ChatFormat::Llama3: return llama3(specials, messages, add_generation_prompt);
    case ChatFormat::Llama2:
    case ChatFormat::Mistral: return inst_format(format, specials, messages);
    case ChatFormat::None: break;
  }
  TROUPE_FAIL("this model has no chat template troupe can render (its file has none, or one "
              "of a family troupe does not know: chatml, llama3, llama2, mistral, deepseek-v3); "
              "use /v1/completions with a prompt you format yourself");
}

std::string render_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt) {
  return render_chat(tok.chat_format(), tok.chat_specials(), messages, add_generation_prompt);
}

std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  return render_chat(ChatFormat::DeepSeekV3, {std::string(kBosToken), std::string(kEosToken)},
                     messages, add_generation_prompt);
}

}  // namespace troupe::model
