// A LLaMA-family model loaded from one .gguf file or an HF folder (config.json,
// *.safetensors, tokenizer.json): its file(s), config, weights and forward, kept together
// so the references between them stay valid (not movable).
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/llama_forward.h"
#include "model/llama_weights.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"

namespace troupe::model {

struct LlamaModel {
  std::optional<GgufFile> file;          // a .gguf file, else empty
  std::optional<Checkpoint> checkpoint;  // an HF folder's safetensors, else empty
  LlamaConfig config;
  LlamaWeights weights;
  std::unique_ptr<LlamaForward> forward;
  std::unique_ptr<Tokenizer> tokenizer;  // the model's vocabulary; null when it has none troupe reads

  // Opens, validates and binds a .gguf file or an HF folder (is_hf_llama_dir); errors
  // name the file and what is wrong. A missing or unreadable vocabulary is not an error
  // here (token ids still work); need_tokenizer makes it one.
  static std::unique_ptr<LlamaModel> load(const std::string& path, bool need_tokenizer = false);
};

// True for a path naming a GGUF file (by its .gguf extension): commands pick the loader.
bool is_gguf_path(const std::string& path);
// A .gguf file or an HF folder of a LLaMA-family model (config.json's architectures).
bool is_llama_family_path(const std::string& path);

}  // namespace troupe::model
