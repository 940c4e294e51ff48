// Chat templates: messages -> prompt text, which is then encoded with special tokens
// matched literally (Tokenizer::encode with add_bos false: the text carries its own bos).
//
// DeepSeekV3 is MODEL.md §11's (DeepSeek-V3's public template), used for V4.1 models:
//   bos + system contents joined by "\n\n" (wherever they appear in the list)
//       + per turn in order: user -> <｜User｜>content
//                            assistant -> <｜Assistant｜>content<｜end▁of▁sentence｜>
//       + <｜Assistant｜> when add_generation_prompt
//
// GGUF files store their template as Jinja text (tokenizer.chat_template). troupe does
// not run Jinja: it recognises the family the text belongs to by its marker tokens, as
// llama.cpp does by default, and renders that family's public format:
//   ChatML   (<|im_start|>; Qwen2, many fine-tunes): per message
//            "<|im_start|>" role "\n" content "<|im_end|>\n"; prompt "<|im_start|>assistant\n"
//            (no default system message is added)
//   Llama3   (<|start_header_id|>): bos, per message "<|start_header_id|>" role
//            "<|end_header_id|>\n\n" trim(content) "<|eot_id|>"; prompt
//            "<|start_header_id|>assistant<|end_header_id|>\n\n"
//   Llama2   ([INST] with <<SYS>>): per user turn bos "[INST] " user " [/INST]", the
//            system text folded into the first user turn as "<<SYS>>\n" system
//            "\n<</SYS>>\n\n"; per assistant turn " " content " " eos; contents trimmed
//   Mistral  ([INST] without <<SYS>>): bos, per user turn "[INST] " user " [/INST]", per
//            assistant turn content eos; a system text goes before the first user
//            turn's text, joined by "\n\n"
// A file without a template, or with one of no known family, has ChatFormat::None: a
// chat request then gets a clear error (vLLM does the same when a model has no template).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace troupe::model {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

enum class ChatFormat { None, DeepSeekV3, ChatML, Llama3, Llama2, Mistral };

// The literal bos and eos texts the formats write (the tokenizer's own spellings).
struct ChatSpecials {
  std::string bos;
  std::string eos;
};

const char* chat_format_name(ChatFormat f);

// The family of a Jinja chat template, None when no known family's markers are in it.
ChatFormat detect_chat_format(std::string_view jinja_template);

// Throws troupe::Error naming the role for any role other than system, user and
// assistant (an API maps this to HTTP 400), and for ChatFormat::None.
std::string render_chat(ChatFormat format, const ChatSpecials& specials,
                        const std::vector<ChatMessage>& messages, bool add_generation_prompt);

class Tokenizer;

// The model's format (Tokenizer::chat_format) with its bos/eos texts.
std::string render_chat(const Tokenizer& tok, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt);

// MODEL.md §11's DeepSeekV3 format with its own special tokens.
std::string render_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt);

}  // namespace troupe::model
