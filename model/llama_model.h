// A LLaMA-family model loaded from one .gguf file: its metadata, config, weights and
// forward, kept together so the references between them stay valid (not movable).
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/llama_forward.h"
#include "model/llama_weights.h"
#include "model/tokenizer.h"

namespace troupe::model {

struct LlamaModel {
  GgufFile file;
  LlamaConfig config;
  LlamaWeights weights;
  std::unique_ptr<LlamaForward> forward;
  std::unique_ptr<Tokenizer> tokenizer;  // the file's vocabulary; null when it has none troupe reads

  // Opens, validates and binds; errors name the file and what is wrong. A missing or
  // unreadable vocabulary is not an error here (token ids still work); need_tokenizer
  // makes it one.
  static std::unique_ptr<LlamaModel> load(const std::string& path, bool need_tokenizer = false);
};

// True for a path naming a GGUF file (by its .gguf extension): commands pick the loader.
bool is_gguf_path(const std::string& path);

}  // namespace troupe::model
