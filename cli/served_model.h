// The model an engine command serves: a DeepSeek-V4.1 folder (or the built-in tiny model)
// or a LLaMA-family model (a .gguf file or an HF folder whose config.json names a LLaMA,
// Mistral, Mixtral, Qwen2 or Qwen2-MoE class), chosen by the path
// (model::is_llama_family_path). The engine and
// the APIs see only what both provide: a BatchForward, a TextTokenizer and the positions.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cli/loaded_model.h"
#include "model/batch_forward.h"
#include "model/llama_model.h"
#include "model/text_tokenizer.h"

namespace troupe::cli {

struct ServedModel {
  std::string path;                          // as given ("" for the built-in tiny model)
  std::unique_ptr<LoadedModel> v41;          // a V4.1 folder, else null
  std::unique_ptr<model::LlamaModel> llama;  // a LLaMA-family model, else null

  const model::BatchForward& forward() const;
  const model::TextTokenizer* tokenizer() const;  // null when the model has none
  int64_t max_positions() const;
  // What a V4.1-only feature (speculative decoding, Engram, expert parallelism) says for a
  // .gguf model: throws troupe::Error naming `feature` there, returns the V4.1 model else.
  LoadedModel& v41_only(const std::string& feature) const;
};

// options: a V4.1 model's (model::ForwardOptions); a .gguf model refuses any but the
// defaults, naming the option.
std::unique_ptr<ServedModel> load_served_model(const std::string& path, bool need_tokenizer,
                                               model::ForwardOptions options = {});

}  // namespace troupe::cli
