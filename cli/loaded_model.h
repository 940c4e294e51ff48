// A model ready to run from the CLI: --model DIR, or the built-in tiny model (made
// on first use into the cache folder) when no --model is given.
#pragma once

#include <memory>
#include <string>

#include "cli/args.h"
#include "model/config.h"
#include "model/dspark_draft.h"
#include "model/forward.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "runtime/speculative/dspark_drafter.h"

namespace troupe::cli {

struct LoadedModel {
  std::string dir;
  model::ModelConfig config;
  model::Checkpoint checkpoint;
  model::ModelWeights weights;
  std::unique_ptr<model::Forward> forward;
  std::unique_ptr<model::Tokenizer> tokenizer;  // null when the folder has no tokenizer.json
};

// Loads and validates; with an empty dir uses the built-in tiny model and says once on
// stderr that its weights are random (warn_random_weights).
std::unique_ptr<LoadedModel> load_model(const std::string& dir, bool need_tokenizer,
                                        model::ForwardOptions options = {});
// --expert-precision f32|int8 of a command's flags (model::ForwardOptions); a bad value,
// or int8 for a LLaMA-family --model, throws troupe::Error naming the flag.
model::ForwardOptions forward_options(const Args& a);
// Throws troupe::Error when `options` are not the defaults and `path` is a LLaMA-family
// model (.gguf or HF folder; the options are V4.1's).
void check_forward_options(const std::string& path, const model::ForwardOptions& options);
void warn_random_weights();  // once per process, on stderr

// The checkpoint's DSpark draft (MODEL.md §8) ready for the engine: a target Forward that
// fills the feature rings, the draft network and the drafter over it. Borrows the model's
// weights: `m` must outlive it.
struct DraftModel {
  model::DsparkWeights weights;
  std::unique_ptr<model::Forward> forward;  // the target, with the draft's feature taps
  std::unique_ptr<model::DsparkDraft> draft;
  std::unique_ptr<runtime::DsparkDrafter> drafter;
};

// Throws troupe::Error naming speculative-config when the checkpoint has no DSpark draft.
std::unique_ptr<DraftModel> load_draft(LoadedModel& m);

}  // namespace troupe::cli
