#include "model/llama_model.h"

#include <filesystem>

namespace troupe::model {

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path) {
  GgufFile f = GgufFile::open(path);
  LlamaConfig c = llama_config_from_gguf(f);
  LlamaWeights w = load_llama_weights(f, c);
  auto m = std::unique_ptr<LlamaModel>(new LlamaModel{std::move(f), c, std::move(w), nullptr});
  m->forward = std::make_unique<LlamaForward>(m->config, m->weights);
  return m;
}

bool is_gguf_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".gguf";
}

}  // namespace troupe::model
