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

namespace troupe::runtime {

// How long a hand-off of `bytes` may take from its export to the receiver's answer: a
// second, plus the bytes at 50 MB/s (a slow link, not a lost message). The sender's
// whole move runs under it; the receiver's lease on a staging region is twice it.
std::chrono::milliseconds kv_transfer_lease(uint64_t bytes);

class StagingLeases {
 public:
  using Clock = std::chrono::steady_clock;

  // At most max_bytes reserved at once (quarantined regions count until freed).
  explicit StagingLeases(uint64_t max_bytes) : max_bytes_(max_bytes) {}

  struct Reserved {
    uint64_t id = 0;  // 0: refused, `why` says why
    std::string why;
  };
  // A region of `bytes` (> 0), leased until now + 2 * kv_transfer_lease(bytes).
  Reserved reserve(uint64_t bytes, Clock::time_point now);
  // The memory of an open lease, for the transport to expose; null when not open.
  std::vector<uint8_t>* memory(uint64_t id);
  // Ends an open lease and hands its memory over; nullopt when unknown or expired.
  std::optional<std::vector<uint8_t>> take(uint64_t id);

  // Leases past their deadline: each one's id, to withdraw from the transport (its
  // memory stays until one more lease has passed); quarantined memory past that is freed.
  std::vector<uint64_t> expire(Clock::time_point now);

  bool empty() const { return leases_.empty(); }  // nothing open, nothing quarantined
  size_t open() const;
  uint64_t reserved_bytes() const { return reserved_; }

 private:
  struct Lease {
    std::vector<uint8_t> memory;
    Clock::time_point expires;
    bool quarantined = false;
  };
  uint64_t max_bytes_;
  uint64_t reserved_ = 0;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Lease> leases_;
};

}  // namespace troupe::runtime
