// `troupe make-tiny-model`: a deterministic tiny checkpoint following MODEL.md §10:
// config.json (the v41-tiny preset), model.safetensors holding every tensor of §2
// quantized as the real checkpoint is (FP8 dense, FP4 experts, ROWFP8 Engram, BF16
// norms/embeddings), and a trained byte-level BPE tokenizer.json. Same seed, same bytes.
#pragma once

#include <cstdint>
#include <string>

#include "model/config.h"

namespace troupe::model {

void write_tiny_checkpoint(const std::string& dir, uint64_t seed);
void write_checkpoint(const std::string& dir, const ModelConfig& config, uint64_t seed);

// The built-in tiny model: $TROUPE_CACHE (or $XDG_CACHE_HOME/troupe, or ~/.cache/troupe)
// /v41-tiny-seed<seed>, written on first use; returns the folder.
std::string builtin_tiny_model_dir(uint64_t seed = 7);

}  // namespace troupe::model
