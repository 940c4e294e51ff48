#include "runtime/workload/random_tokens.h"

#include <cstddef>

namespace troupe::runtime {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::vector<int32_t> draw_tokens(uint64_t& state, int64_t n, int32_t lo, int32_t hi) {
  const uint64_t range = uint64_t(int64_t(hi) - lo);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) t = static_cast<int32_t>(lo + int64_t(splitmix64(state) % range));
  return out;
}

}  // namespace troupe::runtime
