// Seeded random token ids for synthetic workloads and benchmarks. splitmix64, because its
// sequence is the same on every standard library (std::uniform_int_distribution's is
// not), so a seed names one workload everywhere.
#pragma once

#include <cstdint>
#include <vector>

namespace troupe::runtime {

// The next splitmix64 value; advances state.
uint64_t splitmix64(uint64_t& state);

// [n] ids in [lo, hi) (lo < hi), x % (hi - lo) + lo for successive values x; advances state.
std::vector<int32_t> draw_tokens(uint64_t& state, int64_t n, int32_t lo, int32_t hi);

}  // namespace troupe::runtime
