// The greedy tokens of a LLaMA-family model (a .gguf file or an HF folder) after a
// prompt, from LlamaForward's own one-sequence run on its contiguous state: the reference
// the serve tests compare a daemon's tokens with (the daemon runs the engine's paged
// path, its batching, and for R ranks its exchange).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/sampling.h"
#include "model/llama_model.h"

namespace troupe::testing {

inline std::vector<int32_t> llama_greedy(const std::string& path, const std::vector<int32_t>& prompt,
                                         int64_t n) {
  const auto m = model::LlamaModel::load(path);
  model::LlamaState s = model::LlamaState::empty(m->config);
  std::vector<float> logits = m->forward->run(s, prompt, false);
  std::vector<int32_t> out;
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(int32_t(kernels::argmax(logits.data(), m->config.vocab_size)));
    if (i + 1 < n) logits = m->forward->run(s, std::vector<int32_t>{out.back()}, false);
  }
  return out;
}

}  // namespace troupe::testing
