// One-sided puts of a KV hand-off's region into memory its receiver registered (P/D,
// docs/pd.md "The transfer agent"): the receiver exposes a buffer and advertises where it
// is; the sender writes its region there with one put and learns when the bytes have
// landed. The interface keeps UCX out of the actors (runtime/dep/ucx/ucx_rma.h implements
// it; a build without UCX has none, and hand-offs then travel in messages).
//
// Single-threaded: every call comes from the one thread that drives the transport (the
// transfer agent's), which calls progress() while anything is in flight.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace troupe::runtime {

class RmaTransport {
 public:
  virtual ~RmaTransport() = default;

  // This side's address, for a sender's put (the receiver advertises it).
  virtual std::vector<uint8_t> address() const = 0;

  // Receiver: registers `memory` for remote puts under `region` (the caller's id, unique
  // while exposed); returns its remote key. The memory must outlive withdraw(region).
  struct Exposed {
    uint64_t remote_address = 0;
    std::vector<uint8_t> rkey;
  };
  virtual Exposed expose(uint64_t region, std::span<uint8_t> memory) = 0;
  // Deregisters it; a put that arrives later must not land there (the sender's deadline
  // is shorter than the receiver's lease: docs/pd.md).
  virtual void withdraw(uint64_t region) = 0;

  // Sender: starts writing `data` to [remote_address, + data.size()) of the peer at
  // `peer_address`, and a flush behind it; returns the put's id. `data` must stay
  // valid until the put is done, failed or abandoned. Throws troupe::Error when the peer
  // cannot be reached or its key is bad.
  virtual uint64_t put(const std::vector<uint8_t>& peer_address, const std::vector<uint8_t>& rkey,
                       uint64_t remote_address, std::span<const uint8_t> data) = 0;

  enum class PutState { InProgress, Done, Failed };
  // Done: the bytes are in the receiver's memory (the flush behind the put completed).
  // Failed: *error says why. Done and Failed forget the put.
  virtual PutState state(uint64_t put, std::string* error) = 0;
  // Past its deadline: cancel it and close its endpoint, so nothing more of it is
  // written (the next put to that peer connects again).
  virtual void abandon(uint64_t put) = 0;

  // One round of progress; true when anything happened.
  virtual bool progress() = 0;

  // The transports the endpoint to a peer uses ("cma/memory", "tcp/lo"), for logs.
  virtual std::string transports(const std::vector<uint8_t>& peer_address) const = 0;
};

}  // namespace troupe::runtime
