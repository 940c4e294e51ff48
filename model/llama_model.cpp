#include "model/llama_model.h"

#include <filesystem>

#include "kernels/check.h"

namespace troupe::model {

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, bool need_tokenizer) {
  GgufFile f = GgufFile::open(path);
  LlamaConfig c = llama_config_from_gguf(f);
  LlamaWeights w = load_llama_weights(f, c);
  auto m = std::unique_ptr<LlamaModel>(new LlamaModel{std::move(f), c, std::move(w), nullptr, nullptr});
  m->forward = std::make_unique<LlamaForward>(m->config, m->weights);
  const GgufValue* kind = m->file.find("tokenizer.ggml.model");
  const bool spm = kind && std::get_if<std::string>(&kind->value) &&
                   std::get<std::string>(kind->value) == "llama";
  if (spm || need_tokenizer) {
    if (!kind) TROUPE_FAIL(path << ": the file has no tokenizer (tokenizer.ggml.model is missing)");
    m->tokenizer = std::make_unique<SpmTokenizer>(SpmTokenizer::from_gguf(m->file));
    if (m->tokenizer->size() != m->config.vocab_size)
      TROUPE_FAIL(path << ": the tokenizer has " << m->tokenizer->size() << " tokens, the model "
                       << m->config.vocab_size);
  }
  return m;
}

bool is_gguf_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".gguf";
}

}  // namespace troupe::model
