// Shared access to the golden tiny checkpoint (tests/data/v41-tiny-seed7) for model
// tests: loaded once per test binary, plus helpers to compare logits the way
// MODEL.md §5 defines acceptance (relative L2 per position, argmax agreement).
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/sampling.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"

namespace troupe::testing {

inline std::string golden_dir() { return std::string(TROUPE_TEST_DATA) + "/v41-tiny-seed7"; }

struct GoldenModel {
  model::ModelConfig config;
  model::Checkpoint ckpt;
  model::ModelWeights weights;
  std::unique_ptr<model::Forward> forward;
};

inline const GoldenModel& golden_model() {
  static GoldenModel* m = [] {
    auto* g = new GoldenModel{model::load_config(golden_dir() + "/config.json"),
                              model::Checkpoint::open(golden_dir()), {}, nullptr};
    g->weights = model::bind_weights(g->ckpt, g->config);
    g->forward = std::make_unique<model::Forward>(g->config, g->weights);
    return g;
  }();
  return *m;
}

// The golden checkpoint's tokenizer, loaded once.
inline const model::Tokenizer& golden_tokenizer() {
  static const model::Tokenizer tok = model::Tokenizer::load(golden_dir() + "/tokenizer.json");
  return tok;
}

inline nlohmann::json read_json(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f);
}

// [n] token ids in [5, 4094] (ordinary tokens of the tiny vocab), from a fixed seed.
inline std::vector<int32_t> random_tokens(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> d(5, 4094);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = d(rng);
  return t;
}

inline double relative_l2(const float* got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    num += (got[i] - want[i]) * (got[i] - want[i]);
    den += want[i] * want[i];
  }
  return std::sqrt(num / den);
}

inline int64_t argmax_of(const std::vector<double>& v) {
  int64_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = static_cast<int64_t>(i);
  return best;
}

}  // namespace troupe::testing
