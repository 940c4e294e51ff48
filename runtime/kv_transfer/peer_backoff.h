// Receivers a sender could not write to by RMA (docs/pd.md "The transfer agent"). With
// UCX's error mode none a put to a peer it cannot reach does not fail: it hangs until the
// move's deadline, and so would every later put to that peer. So after a put times out,
// the peer (its worker address) gets its hand-offs in messages for a while, then RMA is
// tried again; each timeout in a row doubles the while, up to a cap, and a put that lands
// forgets the peer. Pure bookkeeping, times passed in.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <vector>

namespace troupe::runtime {

class PeerBackoff {
 public:
  using Clock = std::chrono::steady_clock;
  using Peer = std::vector<uint8_t>;  // the receiver's RMA address

  PeerBackoff(Clock::duration first, Clock::duration cap) : first_(first), cap_(cap) {}

  // True while `peer` is backed off: send its hand-offs in messages.
  bool avoid(const Peer& peer, Clock::time_point now) const;
  // A put to `peer` timed out at `now`: back off the first while, or twice the last one
  // when RMA was tried again after it and timed out again (at most the cap).
  void timed_out(const Peer& peer, Clock::time_point now);
  // A put to `peer` landed: RMA works again; the next timeout starts from the first while.
  void landed(const Peer& peer) { peers_.erase(peer); }

  size_t size() const { return peers_.size(); }

 private:
  struct Entry {
    Clock::time_point until;
    Clock::duration last{};
  };
  Clock::duration first_, cap_;
  std::map<Peer, Entry> peers_;
};

}  // namespace troupe::runtime
