// The receiver's side of KV transfers by RMA (docs/pd.md "The transfer agent"): the
// staging regions it reserved for senders to put a hand-off's region into, each under a
// lease. A region is committed (taken, to be loaded), or its lease runs out: then it is
// withdrawn from the transport at once but its memory is kept one lease longer before it
// is freed, so even a put that was still on its way lands in memory nobody else uses.
// Pure bookkeeping: the caller (the transfer agent) exposes and withdraws the memory.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/kv_cache/region_bytes.h"

namespace troupe::runtime {

// How long a hand-off of `bytes` may take from its export to the receiver's answer: a
// second, plus the bytes at 50 MB/s (a slow link, not a lost message). The sender's
// whole move runs under it; the receiver's lease on a staging region is twice it.
std::chrono::milliseconds kv_transfer_lease(uint64_t bytes);

class StagingLeases {
 public:
  using Clock = std::chrono::steady_clock;

  // At most max_bytes reserved at once (quarantined regions count until freed). Ids are
  // unique in the process (every StagingLeases draws from one counter), so a commit
  // meant for an agent of an earlier incarnation never takes another request's region.
  explicit StagingLeases(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  struct Reserved {
    uint64_t id = 0;  // 0: refused, `why` says why
    std::string why;
  };
  // A region of `bytes` (> 0), leased until now + 2 * kv_transfer_lease(bytes).
  Reserved reserve(uint64_t bytes, Clock::time_point now);
  // The memory of an open lease, for the transport to expose; null when not open.
  RegionBytes* memory(uint64_t id);
  // When the sender of an open lease's put has given up on its move, at the latest: one
  // kv_transfer_lease from the reserve (its move's began before); nullopt when not open.
  std::optional<Clock::time_point> sender_gives_up(uint64_t id) const;
  // Ends an open lease and hands its memory over; nullopt when unknown or expired.
  std::optional<RegionBytes> take(uint64_t id);

  // The sender gave up on an open lease (its put failed or was abandoned: nothing more of
  // it is written): quarantined now, freed one lease later. False when not open.
  bool release(uint64_t id, Clock::time_point now);

  // Every region's memory with the time until which it must stay untouched (open ones:
  // their deadline plus a lease; quarantined: theirs), emptying this: for an owner that
  // goes away while senders may still be writing (StagingQuarantine).
  std::vector<std::pair<Clock::time_point, RegionBytes>> surrender();

  // Leases past their deadline: each one's id, to withdraw from the transport (its
  // memory stays until one more lease has passed); quarantined memory past that is freed.
  std::vector<uint64_t> expire(Clock::time_point now);

  bool empty() const { return leases_.empty(); }  // nothing open, nothing quarantined
  size_t open() const;
  uint64_t reserved_bytes() const { return reserved_; }
  // When the next lease or quarantine ends (max() when none).
  Clock::time_point next_deadline() const;

 private:
  struct Lease {
    RegionBytes memory;
    Clock::time_point expires;
    Clock::time_point reserved_at;
    bool quarantined = false;
  };
  uint64_t max_bytes_;
  uint64_t reserved_ = 0;
  std::map<uint64_t, Lease> leases_;
};

// Staging memory whose owner went away (an agent of an ended incarnation) while a sender
// may still write to it: kept until its time, freed by later sweeps. Process-wide and
// thread-safe.
class StagingQuarantine {
 public:
  static void keep(std::vector<std::pair<StagingLeases::Clock::time_point, RegionBytes>> regions);
  static void sweep(StagingLeases::Clock::time_point now);  // frees what is past its time
  static size_t held();  // regions kept, for tests
};

}  // namespace troupe::runtime
