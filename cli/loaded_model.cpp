#include "cli/loaded_model.h"

#include <cstdio>
#include <filesystem>
#include <mutex>

#include "kernels/check.h"
#include "model/llama_model.h"
#include "model/row_groups_copy.h"
#include "model/tensor_spec.h"
#include "model/tiny_checkpoint.h"

namespace troupe::cli {

void warn_random_weights() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "troupe: no --model given, so this runs the built-in tiny model: its weights are "
                 "random (it checks the engine, not language), so its text is gibberish. Give "
                 "--model a V4.1 HF folder or a LLaMA-family .gguf file (README: Models).\n");
  });
}

model::ForwardOptions forward_options(const Args& a) {
  model::ForwardOptions o;
  const std::string p = a.get_or("expert-precision", "f32");
  if (p == "int8") o.expert_precision = kernels::GemmPrecision::Int8;
  else if (p != "f32") TROUPE_FAIL("--expert-precision must be f32 or int8, got '" << p << "'");
  check_forward_options(a.get_or("model", ""), o);
  return o;
}

void check_forward_options(const std::string& path, const model::ForwardOptions& options) {
  if (model::is_llama_family_path(path) && options.expert_precision != kernels::GemmPrecision::F32)
    TROUPE_FAIL("expert-precision int8 is for a DeepSeek-V4.1 checkpoint's FP4 experts; "
                << path << " is a LLaMA-family model (its q8_0 / q4_0 weights run on int8 anyway)");
}

std::unique_ptr<LoadedModel> load_model(const std::string& dir_arg, bool need_tokenizer,
                                        model::ForwardOptions options) {
  std::string dir = dir_arg;
  if (dir.empty()) {
    dir = model::builtin_tiny_model_dir();
    warn_random_weights();
  }
  namespace fs = std::filesystem;
  if (model::is_llama_family_path(dir))
    TROUPE_FAIL("this command runs a DeepSeek-V4.1 checkpoint; "
                << dir
                << " is a LLaMA-family model (generate, logits, serve and bench peer, engine, "
                   "replay, serve and soak take one)");
  if (!fs::is_directory(dir)) TROUPE_FAIL("model folder '" << dir << "' does not exist");
  auto m = std::unique_ptr<LoadedModel>(new LoadedModel{
      dir, model::load_config((fs::path(dir) / "config.json").string()),
      model::Checkpoint::open(dir), {}, nullptr, nullptr});
  model::validate_checkpoint(m->checkpoint, m->config);
  m->weights = model::bind_weights(m->checkpoint, m->config);
  // The experts held once: their checkpoint bytes go back once their row groups exist.
  if (options.expert_precision == kernels::GemmPrecision::Int8)
    model::add_expert_row_groups(m->weights, &m->checkpoint);
  m->forward = std::make_unique<model::Forward>(m->config, m->weights, nullptr, options);
  const fs::path tok = fs::path(dir) / "tokenizer.json";
  if (fs::exists(tok)) {
    m->tokenizer = std::make_unique<model::Tokenizer>(model::Tokenizer::load(tok.string()));
  } else if (need_tokenizer) {
    TROUPE_FAIL("model folder '" << dir << "' has no tokenizer.json");
  }
  return m;
}

std::unique_ptr<DraftModel> load_draft(LoadedModel& m) {
  auto d = std::make_unique<DraftModel>();
  try {
    d->weights = model::bind_dspark_weights(m.checkpoint, m.config);
  } catch (const Error& e) {
    TROUPE_FAIL("speculative-config: method \"dspark\" needs the checkpoint's DSpark draft "
                "(mtp.* tensors, MODEL.md 8): " << e.what());
  }
  const model::ForwardOptions& options = m.forward->options();
  // Its experts held once too (their checkpoint bytes are the draft's alone).
  if (options.expert_precision == kernels::GemmPrecision::Int8)
    model::add_expert_row_groups(d->weights, &m.checkpoint);
  d->forward = std::make_unique<model::Forward>(m.config, m.weights, &d->weights, options);
  d->draft = std::make_unique<model::DsparkDraft>(m.config, m.weights, d->weights, options.expert_precision);
  d->drafter = std::make_unique<runtime::DsparkDrafter>(*d->draft);
  return d;
}

}  // namespace troupe::cli
