#include "runtime/kv_cache/block_hash.h"

#include <bit>
#include <cstring>

namespace troupe::runtime {
namespace {

constexpr uint64_t kP1 = 0x9e3779b185ebca87ull;
constexpr uint64_t kP2 = 0xc2b2ae3d27d4eb4full;
constexpr uint64_t kP3 = 0x165667b19e3779f9ull;
constexpr uint64_t kP4 = 0x85ebca77c2b2ae63ull;

uint64_t load64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint64_t lane_round(uint64_t acc, uint64_t in) {
  return std::rotl(acc + in * kP2, 31) * kP1;
}
uint64_t merge(uint64_t h, uint64_t lane) {
  return (h ^ lane_round(0, lane)) * kP1 + kP4;
}

}  // namespace

uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens) {
  return hash_bytes(parent, std::as_bytes(tokens));
}

uint64_t hash_bytes(uint64_t seed, std::span<const std::byte> bytes) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t n = bytes.size();
  const uint64_t parent = seed;
  size_t i = 0;
  uint64_t h;
  if (n >= 32) {
    uint64_t a = parent + kP1 + kP2, b = parent + kP2, c = parent, d = parent - kP1;
    for (; i + 32 <= n; i += 32) {
      a = lane_round(a, load64(p + i)), b = lane_round(b, load64(p + i + 8));
      c = lane_round(c, load64(p + i + 16)), d = lane_round(d, load64(p + i + 24));
    }
    h = std::rotl(a, 1) + std::rotl(b, 7) + std::rotl(c, 12) + std::rotl(d, 18);
    h = merge(merge(merge(merge(h, a), b), c), d);
  } else {
    h = parent + kP3;
  }
  h += n;
  for (; i + 8 <= n; i += 8) h = std::rotl(h ^ lane_round(0, load64(p + i)), 27) * kP1 + kP4;
  if (i + 4 <= n) {  // one int32 left (all that is left of a token block)
    uint32_t v;
    std::memcpy(&v, p + i, 4);
    h = std::rotl(h ^ (uint64_t(v) * kP1), 23) * kP2 + kP3;
    i += 4;
  }
  for (; i < n; ++i) h = std::rotl(h ^ (uint64_t(p[i]) * kP4), 11) * kP1;  // byte tail
  h ^= h >> 33, h *= kP2, h ^= h >> 29, h *= kP3, h ^= h >> 32;
  return h;
}

}  // namespace troupe::runtime
