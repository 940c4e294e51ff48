#include "runtime/kv_transfer/staging_leases.h"

#include <atomic>
#include <mutex>
#include <new>

namespace troupe::runtime {
namespace {

std::atomic<uint64_t> next_lease_id{1};

std::mutex quarantine_mutex;
std::vector<std::pair<StagingLeases::Clock::time_point, RegionBytes>> quarantined;

}  // namespace

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
    l.memory.resize(bytes);  // fresh zeroed pages, no memset (region_bytes.h): never another request's bytes
  } catch (const std::bad_alloc&) {
    return {0, "cannot allocate " + std::to_string(bytes) + " bytes"};
  }
  l.expires = now + 2 * kv_transfer_lease(bytes);
  l.reserved_at = now;
  const uint64_t id = next_lease_id.fetch_add(1);
  leases_.emplace(id, std::move(l));
  reserved_ += bytes;
  return {id, {}};
}

RegionBytes* StagingLeases::memory(uint64_t id) {
  const auto it = leases_.find(id);
  return it == leases_.end() || it->second.quarantined ? nullptr : &it->second.memory;
}

std::optional<StagingLeases::Clock::time_point> StagingLeases::sender_gives_up(uint64_t id) const {
  const auto it = leases_.find(id);
  if (it == leases_.end() || it->second.quarantined) return std::nullopt;
  return it->second.reserved_at + kv_transfer_lease(it->second.memory.size());
}

std::optional<RegionBytes> StagingLeases::take(uint64_t id) {
  const auto it = leases_.find(id);
  if (it == leases_.end() || it->second.quarantined) return std::nullopt;
  RegionBytes out = std::move(it->second.memory);
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

bool StagingLeases::release(uint64_t id, Clock::time_point now) {
  const auto it = leases_.find(id);
  if (it == leases_.end() || it->second.quarantined) return false;
  it->second.quarantined = true;
  it->second.expires = now + kv_transfer_lease(it->second.memory.size());
  return true;
}

std::vector<std::pair<StagingLeases::Clock::time_point, RegionBytes>> StagingLeases::surrender() {
  std::vector<std::pair<Clock::time_point, RegionBytes>> out;
  for (auto& [id, l] : leases_) {
    const auto until = l.quarantined ? l.expires : l.expires + kv_transfer_lease(l.memory.size());
    out.emplace_back(until, std::move(l.memory));
  }
  leases_.clear();
  reserved_ = 0;
  return out;
}

StagingLeases::Clock::time_point StagingLeases::next_deadline() const {
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [id, l] : leases_) next = std::min(next, l.expires);
  return next;
}

void StagingQuarantine::keep(std::vector<std::pair<StagingLeases::Clock::time_point, RegionBytes>> regions) {
  std::lock_guard<std::mutex> lock(quarantine_mutex);
  for (auto& r : regions) quarantined.push_back(std::move(r));
}

void StagingQuarantine::sweep(StagingLeases::Clock::time_point now) {
  std::vector<RegionBytes> freed;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(quarantine_mutex);
    for (size_t i = 0; i < quarantined.size();) {
      if (quarantined[i].first > now) {
        ++i;
        continue;
      }
      freed.push_back(std::move(quarantined[i].second));
      quarantined.erase(quarantined.begin() + static_cast<ptrdiff_t>(i));
    }
  }
}

size_t StagingQuarantine::held() {
  std::lock_guard<std::mutex> lock(quarantine_mutex);
  return quarantined.size();
}

size_t StagingLeases::open() const {
  size_t n = 0;
  for (const auto& [id, l] : leases_) n += !l.quarantined;
  return n;
}

}  // namespace troupe::runtime
