// Helpers shared by the KV cache tests: token sequences and a full snapshot of the
// manager's observable state (to assert that a refused call changed nothing).
#pragma once

#include <cstdint>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "runtime/kv_cache/kv_cache_manager.h"

namespace troupe::runtime::test {

// first, first + 1, ..., first + n - 1
inline std::vector<int32_t> iota_tokens(int32_t first, int64_t n) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

inline std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

inline std::vector<int32_t> to_vector(std::span<const int32_t> s) {
  return {s.begin(), s.end()};
}

// Finds the cached prefix and admits in one go, as the scheduler does.
inline std::optional<Admission> admit(KvCacheManager& kv, RequestId id,
                                      std::span<const int32_t> tokens, int64_t total,
                                      bool has_window = false) {
  return kv.admit(id, kv.find_cached_prefix(tokens, has_window), total);
}

struct Snapshot {
  std::map<RequestId, std::vector<int32_t>> tables;
  std::vector<int32_t> lru, refs;
  int64_t free = 0, cached = 0, used = 0, slots = 0, admissions = 0, evictions = 0;
  bool operator==(const Snapshot&) const = default;
};

inline Snapshot snapshot(const KvCacheManager& kv, std::span<const RequestId> ids) {
  Snapshot s;
  for (RequestId id : ids)
    if (kv.contains(id)) s.tables[id] = to_vector(kv.block_table(id));
  s.lru = kv.pool().lru_order();
  for (int32_t b = 0; b < kv.pool().num_blocks(); ++b) s.refs.push_back(kv.pool().ref_count(b));
  s.free = kv.num_free_blocks(), s.cached = kv.num_cached_blocks(), s.used = kv.num_used_blocks();
  s.slots = kv.num_free_swa_slots();
  s.admissions = kv.stats().admissions, s.evictions = kv.stats().evictions;
  return s;
}

}  // namespace troupe::runtime::test
