#include "runtime/kv_transfer/staging_leases.h"

#include <new>

namespace troupe::runtime {

std::chrono::milliseconds kv_transfer_lease(uint64_t bytes) {
  return std::chrono::milliseconds(1000 + static_cast<int64_t>(bytes / 50'000));
}

StagingLeases::Reserved StagingLeases::reserve(uint64_t bytes, Clock::time_point now) {
  if (bytes == 0) return {0, "an empty region"};
  if (bytes > max_bytes_ - std::min(max_bytes_, reserved_))
    return {0, "the staging memory is full (" + std::to_string(reserved_) + " of " +
                   std::to_string(max_bytes_) + " bytes reserved, " + std::to_string(bytes) +
                   " asked)"};
  Lease l;
  try {
    l.memory.resize(bytes);  // zeroed: a region never shows another request's bytes
  } catch (const std::bad_alloc&) {
    return {0, "cannot allocate " + std::to_string(bytes) + " bytes"};
  }
  l.expires = now + 2 * kv_transfer_lease(bytes);
  const uint64_t id = next_id_++;
  leases_.emplace(id, std::move(l));
  reserved_ += bytes;
  return {id, {}};
}

std::vector<uint8_t>* StagingLeases::memory(uint64_t id) {
  const auto it = leases_.find(id);
  return it == leases_.end() || it->second.quarantined ? nullptr : &it->second.memory;
}

std::optional<std::vector<uint8_t>> StagingLeases::take(uint64_t id) {
  const auto it = leases_.find(id);
  if (it == leases_.end() || it->second.quarantined) return std::nullopt;
  std::vector<uint8_t> out = std::move(it->second.memory);
  reserved_ -= out.size();
  leases_.erase(it);
  return out;
}

std::vector<uint64_t> StagingLeases::expire(Clock::time_point now) {
  std::vector<uint64_t> withdrawn;
  for (auto it = leases_.begin(); it != leases_.end();) {
    Lease& l = it->second;
    if (now < l.expires) {
      ++it;
      continue;
    }
    if (!l.quarantined) {
      l.quarantined = true;
      l.expires = now + kv_transfer_lease(l.memory.size());
      withdrawn.push_back(it->first);
      ++it;
    } else {
      reserved_ -= l.memory.size();
      it = leases_.erase(it);
    }
  }
  return withdrawn;
}

size_t StagingLeases::open() const {
  size_t n = 0;
  for (const auto& [id, l] : leases_) n += !l.quarantined;
  return n;
}

}  // namespace troupe::runtime
