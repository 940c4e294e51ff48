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
  try {
    if (!m->file.find("tokenizer.ggml.model"))
      TROUPE_FAIL(path << ": the file has no tokenizer (tokenizer.ggml.model is missing)");
    m->tokenizer = std::make_unique<Tokenizer>(Tokenizer::from_gguf(m->file));
    if (m->tokenizer->vocab_size() != m->config.vocab_size)
      TROUPE_FAIL(path << ": the tokenizer has " << m->tokenizer->vocab_size() << " tokens, the model "
                       << m->config.vocab_size);
  } catch (const Error&) {
    if (need_tokenizer) throw;
    m->tokenizer.reset();
  }
  return m;
}

bool is_gguf_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".gguf";
}

}  // namespace troupe::model
