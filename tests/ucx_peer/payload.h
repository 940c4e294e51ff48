// The all_to_all payloads of the UCX tests (tests/runtime/ucx_communicator_test.cpp and
// the peer processes it starts, tests/ucx_peer/): a pure function of (seed, step,
// exchange, sender, receiver), so the test knows what every rank must have received
// without asking it. Sizes cover empty, eager and rendezvous-sized buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace troupe::testing {

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline uint64_t payload_key(uint64_t seed, int64_t step, int64_t exchange, int from, int to) {
  return splitmix64(seed ^ splitmix64(uint64_t(step) * 1000003 + uint64_t(exchange) * 1009 +
                                      uint64_t(from) * 31 + uint64_t(to)));
}

inline std::vector<std::byte> payload(uint64_t seed, int64_t step, int64_t exchange, int from, int to) {
  const uint64_t h = payload_key(seed, step, exchange, from, to);
  size_t n = 0;
  switch (h % 8) {
    case 0: n = 0; break;                                  // empty
    case 6: n = 20000 + (h >> 8) % 100000; break;          // past the eager limit
    case 7: n = 300000 + (h >> 8) % 300000; break;         // rendezvous
    default: n = (h >> 8) % 4000; break;                   // eager
  }
  std::vector<std::byte> out(n);
  uint64_t x = h;
  for (size_t i = 0; i < n; ++i) {
    if (i % 8 == 0) x = splitmix64(x);
    out[i] = static_cast<std::byte>(x >> (8 * (i % 8)));
  }
  return out;
}

// FNV-1a over the bytes: one line per received buffer in the peers' result files.
inline uint64_t digest(const std::vector<std::byte>& b) {
  uint64_t h = 1469598103934665603ull;
  for (std::byte c : b) h = (h ^ uint64_t(c)) * 1099511628211ull;
  return h;
}

inline std::string receipt(int64_t step, int64_t exchange, int from, const std::vector<std::byte>& b) {
  char line[128];
  std::snprintf(line, sizeof(line), "step %lld exchange %lld from %d: %zu bytes %016llx\n",
                static_cast<long long>(step), static_cast<long long>(exchange), from, b.size(),
                static_cast<unsigned long long>(digest(b)));
  return line;
}

}  // namespace troupe::testing
