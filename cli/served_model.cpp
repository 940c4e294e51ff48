#include "cli/served_model.h"

#include "kernels/check.h"

namespace troupe::cli {

const model::BatchForward& ServedModel::forward() const {
  if (llama) return *llama->forward;
  return *v41->forward;
}

const model::TextTokenizer* ServedModel::tokenizer() const {
  if (llama) return llama->tokenizer.get();
  return v41->tokenizer.get();
}

int64_t ServedModel::max_positions() const { return forward().shape().max_positions; }

LoadedModel& ServedModel::v41_only(const std::string& feature) const {
  if (!v41)
    TROUPE_FAIL(feature << " needs a DeepSeek-V4.1 checkpoint; " << path
                        << " is a LLaMA-family model");
  return *v41;
}

std::unique_ptr<ServedModel> load_served_model(const std::string& path, bool need_tokenizer,
                                               model::ForwardOptions options) {
  auto m = std::make_unique<ServedModel>();
  m->path = path;
  if (model::is_llama_family_path(path)) {
    check_forward_options(path, options);
    m->llama = model::LlamaModel::load(path, need_tokenizer);
  } else {
    m->v41 = load_model(path, need_tokenizer, options);
    m->path = m->v41->dir;  // the built-in tiny model's folder when path is empty
  }
  return m;
}

}  // namespace troupe::cli
