// A LLaMA-family model loaded from one .gguf file: its metadata, config, weights and
// forward, kept together so the references between them stay valid (not movable).
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/gguf_tokenizer.h"
#include "model/llama_config.h"
#include "model/llama_forward.h"
#include "model/llama_weights.h"

namespace troupe::model {

struct LlamaModel {
  GgufFile file;
  LlamaConfig config;
  LlamaWeights weights;
  std::unique_ptr<LlamaForward> forward;
  std::unique_ptr<SpmTokenizer> tokenizer;  // null unless tokenizer.ggml.model is "llama"

  // Opens, validates and binds; errors name the file and what is wrong. A vocabulary of
  // another kind is not an error here (token ids still work); need_tokenizer makes it one.
  static std::unique_ptr<LlamaModel> load(const std::string& path, bool need_tokenizer = false);
};

// True for a path naming a GGUF file (by its .gguf extension): commands pick the loader.
bool is_gguf_path(const std::string& path);

}  // namespace troupe::model
