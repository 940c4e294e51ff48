// Shared pieces of the norm / rope / attention / indexer kernel tests: seeded
// random inputs, poisoned outputs, and the list of fast-path variants each test
// runs against the scalar reference (the dispatched Cpu backend, the portable
// fallback, and the AVX-512 kernels when this CPU has them).
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/dispatch.h"

namespace troupe::kernels::testing {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

inline std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// A fast-path variant under test: `run` calls the op on params it is given.
template <class Params>
struct Variant {
  std::string name;
  std::function<void(const Params&)> run;
};

// {"cpu" through dispatch, "portable", and "avx512" when the CPU has it}; the
// kernel set arguments are the family's cpu::*_kernels() pair.
template <class Params, class Kernels>
std::vector<Variant<Params>> fast_variants(void (*entry)(const Params&),
                                           void (*with)(const Params&, Kernels), Kernels portable,
                                           Kernels (*avx512)()) {
  std::vector<Variant<Params>> v;
  v.push_back({"cpu", [entry](const Params& p) {
                 ScopedBackend s(Backend::Cpu);
                 entry(p);
               }});
  v.push_back({"portable", [with, portable](const Params& p) { with(p, portable); }});
  if (cpu_features().has_avx512())
    v.push_back({"avx512", [with, avx512](const Params& p) { with(p, avx512()); }});
  return v;
}

// Runs the op under the scalar reference backend.
template <class Params>
void run_ref(void (*entry)(const Params&), const Params& p) {
  ScopedBackend s(Backend::Ref);
  entry(p);
}

// |got - want| <= abs_tol + rel_tol·|want|, with NaN and infinities required to match.
inline bool close(float got, float want, float abs_tol, float rel_tol) {
  if (std::isnan(want) || std::isinf(want)) return std::isnan(want) ? std::isnan(got) : got == want;
  return std::fabs(got - want) <= abs_tol + rel_tol * std::fabs(want);
}

}  // namespace troupe::kernels::testing
