// Shared access to the golden tiny checkpoints for model tests, each loaded once per test
// binary, plus helpers to compare logits the way MODEL.md §5 defines acceptance (relative
// L2 per position, argmax agreement):
//   Golden::kSeed7     tests/data/v41-tiny-seed7      §10's init (norm weights 1, hc bases
//                                                     0, sinks 0, identity token map); f32
//   Golden::kSeed11Aux tests/data/v41-tiny-seed11-aux those parameters random; f64 values
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdint>
#include <fstream>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/sampling.h"
#include "model/config.h"
#include "model/dspark_draft.h"
#include "model/forward.h"
#include "model/safetensors.h"
#include "model/tokenizer.h"
#include "model/weights.h"
#include "support/test_paths.h"

namespace troupe::testing {

enum class Golden { kSeed7, kSeed11Aux };

inline std::string golden_dir(Golden set = Golden::kSeed7) {
  return std::string(TROUPE_TEST_DATA) +
         (set == Golden::kSeed7 ? "/v41-tiny-seed7" : "/v41-tiny-seed11-aux");
}

struct GoldenModel {
  model::ModelConfig config;
  model::Checkpoint ckpt;
  model::ModelWeights weights;
  std::unique_ptr<model::Forward> forward;
};

// One T per golden set, made by make(set) on first use and kept for the test binary.
template <class T>
const T& once_per_set(Golden set, T* (*make)(Golden)) {
  static T* made[2] = {nullptr, nullptr};
  static std::once_flag flags[2];
  const int i = set == Golden::kSeed7 ? 0 : 1;
  std::call_once(flags[i], [&] { made[i] = make(set); });
  return *made[i];
}

inline GoldenModel* load_golden_model(Golden set) {
  const std::string dir = golden_dir(set);
  auto* g = new GoldenModel{model::load_config(dir + "/config.json"), model::Checkpoint::open(dir),
                            {}, nullptr};
  g->weights = model::bind_weights(g->ckpt, g->config);
  g->forward = std::make_unique<model::Forward>(g->config, g->weights);
  return g;
}

inline const GoldenModel& golden_model(Golden set = Golden::kSeed7) {
  return once_per_set(set, load_golden_model);
}

// A golden checkpoint's DSpark draft (MODEL.md §8): its mtp.* weights, a target forward
// able to fill feature rings, and the draft network.
struct GoldenDraft {
  model::DsparkWeights weights;
  std::unique_ptr<model::Forward> forward;
  std::unique_ptr<model::DsparkDraft> draft;
};

inline GoldenDraft* load_golden_draft(Golden set) {
  const GoldenModel& g = golden_model(set);
  auto* d = new GoldenDraft{model::bind_dspark_weights(g.ckpt, g.config), nullptr, nullptr};
  d->forward = std::make_unique<model::Forward>(g.config, g.weights, &d->weights);
  d->draft = std::make_unique<model::DsparkDraft>(g.config, g.weights, d->weights);
  return d;
}

inline const GoldenDraft& golden_draft(Golden set = Golden::kSeed7) {
  return once_per_set(set, load_golden_draft);
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

// How an engine's logits of every position [T, V] agree with reference rows [T][V].
struct LogitsAgreement {
  std::vector<double> errors;  // [T] relative L2 per position
  int64_t within = 0;          // positions with error <= 1e-2
  int64_t agree = 0;           // positions with the same argmax (ties -> lowest id)
  double mean = 0, worst = 0;
  int64_t worst_position = -1;

  int64_t positions() const { return static_cast<int64_t>(errors.size()); }
  std::string summary() const {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "mean relative L2 %.3g, worst %.3g at position %lld, %lld/%lld positions within "
                  "1e-2, argmax agree %lld/%lld",
                  mean, worst, static_cast<long long>(worst_position), static_cast<long long>(within),
                  static_cast<long long>(positions()), static_cast<long long>(agree),
                  static_cast<long long>(positions()));
    return buf;
  }
};

inline LogitsAgreement compare_logits(const std::vector<float>& got,
                                      const std::vector<std::vector<double>>& want, int64_t V) {
  LogitsAgreement a;
  for (size_t p = 0; p < want.size(); ++p) {
    const float* row = &got[p * V];
    const double err = relative_l2(row, want[p]);
    a.errors.push_back(err);
    a.within += err <= 1e-2;
    a.agree += kernels::argmax(row, V) == argmax_of(want[p]);
    a.mean += err / static_cast<double>(want.size());
    if (err > a.worst || a.worst_position < 0) a.worst = err, a.worst_position = static_cast<int64_t>(p);
  }
  return a;
}

}  // namespace troupe::testing
