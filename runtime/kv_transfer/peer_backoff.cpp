#include "runtime/kv_transfer/peer_backoff.h"

#include <algorithm>

namespace troupe::runtime {

bool PeerBackoff::avoid(const Peer& peer, Clock::time_point now) const {
  const auto it = peers_.find(peer);
  return it != peers_.end() && now < it->second.until;
}

void PeerBackoff::timed_out(const Peer& peer, Clock::time_point now) {
  // Peers whose back-off ran out a cap ago are gone or fine (a restarted receiver has a
  // new address): forgotten, so the map stays as small as the peers that hang now.
  std::erase_if(peers_, [&](const auto& p) { return p.second.until + cap_ < now; });
  Entry& e = peers_[peer];
  if (now < e.until) return;  // backed off already: a put started before that timing out too
  e.last = e.last == Clock::duration{} ? first_ : std::min(cap_, 2 * e.last);
  e.until = now + e.last;
}

}  // namespace troupe::runtime
