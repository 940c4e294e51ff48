// Seeded normal samples for kernel and block tests; no GTest, so the device check
// (tests/cuda) shares it too.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace troupe::testing_support {

inline std::vector<float> random_normal(size_t n, uint32_t seed, float stddev = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, stddev);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace troupe::testing_support
