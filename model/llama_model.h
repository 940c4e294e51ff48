// A LLaMA-family model loaded from one .gguf file: its metadata, config, weights and
// forward, kept together so the references between them stay valid (not movable).
#pragma once

#include <memory>
#include <string>

#include "model/gguf.h"
#include "model/llama_config.h"
#include "model/llama_forward.h"
#include "model/llama_weights.h"

namespace troupe::model {

struct LlamaModel {
  GgufFile file;
  LlamaConfig config;
  LlamaWeights weights;
  std::unique_ptr<LlamaForward> forward;

  // Opens, validates and binds; errors name the file and what is wrong.
  static std::unique_ptr<LlamaModel> load(const std::string& path);
};

// True for a path naming a GGUF file (by its .gguf extension): commands pick the loader.
bool is_gguf_path(const std::string& path);

}  // namespace troupe::model
