#include "model/llama_model.h"

#include <filesystem>

#include "kernels/check.h"
#include "model/hf_llama_config.h"

namespace troupe::model {
namespace {

// The vocabulary of the model at path (its GGUF metadata, or the folder's tokenizer.json
// with tokenizer_config.json), checked against the model's size.
std::unique_ptr<Tokenizer> tokenizer_of(const LlamaModel& m, const std::string& path) {
  std::unique_ptr<Tokenizer> t;
  if (m.file) {
    if (!m.file->find("tokenizer.ggml.model"))
      TROUPE_FAIL(path << ": the file has no tokenizer (tokenizer.ggml.model is missing)");
    t = std::make_unique<Tokenizer>(Tokenizer::from_gguf(*m.file));
  } else {
    const std::filesystem::path json = std::filesystem::path(path) / "tokenizer.json";
    if (!std::filesystem::exists(json)) TROUPE_FAIL("model folder '" << path << "' has no tokenizer.json");
    t = std::make_unique<Tokenizer>(Tokenizer::load(json.string()));
  }
  // HF checkpoints pad the embedding past the tokenizer's ids (Qwen2: 151936 rows for
  // 151665 tokens), so there a smaller vocabulary is fine; a GGUF file's is exact.
  const bool fits = m.file ? t->vocab_size() == m.config.vocab_size : t->vocab_size() <= m.config.vocab_size;
  if (!fits)
    TROUPE_FAIL(path << ": the tokenizer has " << t->vocab_size() << " tokens, the model "
                     << m.config.vocab_size);
  return t;
}

}  // namespace

std::unique_ptr<LlamaModel> LlamaModel::load(const std::string& path, bool need_tokenizer) {
  auto m = std::unique_ptr<LlamaModel>(new LlamaModel{});
  if (is_gguf_path(path)) {
    m->file.emplace(GgufFile::open(path));
    m->config = llama_config_from_gguf(*m->file);
    m->weights = load_llama_weights(*m->file, m->config);
  } else {
    m->config = llama_config_from_hf(path);
    m->checkpoint.emplace(Checkpoint::open(path));
    try {
      m->weights = load_llama_weights(*m->checkpoint, m->config);
    } catch (const Error& e) {  // the tensor names alone do not say which folder
      TROUPE_FAIL(path << ": " << e.what());
    }
  }
  m->forward = std::make_unique<LlamaForward>(m->config, m->weights);
  try {
    m->tokenizer = tokenizer_of(*m, path);
  } catch (const Error&) {
    if (need_tokenizer) throw;
  }
  return m;
}

bool is_gguf_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".gguf";
}

bool is_llama_family_path(const std::string& path) {
  return is_gguf_path(path) || is_hf_llama_dir(path);
}

}  // namespace troupe::model
