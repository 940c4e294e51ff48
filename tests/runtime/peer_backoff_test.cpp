// PeerBackoff (runtime/kv_transfer/peer_backoff.h): a receiver whose put timed out gets
// its hand-offs in messages for a while, longer while it keeps timing out, and RMA again
// once a put lands.
#include "runtime/kv_transfer/peer_backoff.h"

#include <gtest/gtest.h>

namespace troupe::runtime {
namespace {

using std::chrono::seconds;
using Peer = PeerBackoff::Peer;

TEST(PeerBackoff, ATimedOutPeerIsAvoidedForAWhileLongerEachTimeUpToTheCap) {
  PeerBackoff b(seconds(10), seconds(35));
  const Peer peer{1, 2, 3}, other{4};
  const auto t0 = PeerBackoff::Clock::time_point{} + seconds(1000);
  EXPECT_FALSE(b.avoid(peer, t0));
  b.timed_out(peer, t0);
  struct Step {
    int at_s;      // seconds after t0
    bool timeout;  // a put to `peer` times out then (RMA was tried again)
    bool avoid;    // avoid(peer) right after
  };
  // 10 s, then 20 s, then 35 s (capped at 35 s, not 40 s).
  const Step steps[] = {{0, false, true},  {9, false, true},  {10, false, false},
                        {11, true, true},  {30, false, true}, {31, false, false},
                        {32, true, true},  {66, false, true}, {67, false, false},
                        {70, true, true},  {104, false, true}, {105, false, false}};
  for (const Step& s : steps) {
    const auto now = t0 + seconds(s.at_s);
    if (s.timeout) b.timed_out(peer, now);
    EXPECT_EQ(b.avoid(peer, now), s.avoid) << "at " << s.at_s << " s";
    EXPECT_FALSE(b.avoid(other, now));
  }
}

TEST(PeerBackoff, PutsThatTimeOutWhileBackedOffDoNotLengthenIt) {
  PeerBackoff b(seconds(10), seconds(300));
  const Peer peer{7};
  const auto t0 = PeerBackoff::Clock::time_point{} + seconds(1000);
  b.timed_out(peer, t0);
  b.timed_out(peer, t0 + seconds(1));  // started before the back-off: the same hang
  b.timed_out(peer, t0 + seconds(2));
  EXPECT_TRUE(b.avoid(peer, t0 + seconds(9)));
  EXPECT_FALSE(b.avoid(peer, t0 + seconds(10)));
}

TEST(PeerBackoff, ALandedPutStartsOverAndOldPeersAreForgotten) {
  PeerBackoff b(seconds(10), seconds(300));
  const Peer peer{7}, old{8};
  const auto t0 = PeerBackoff::Clock::time_point{} + seconds(1000);
  b.timed_out(old, t0);
  b.timed_out(peer, t0);
  b.timed_out(peer, t0 + seconds(10));  // tried again, hung again: 20 s
  b.landed(peer);
  EXPECT_FALSE(b.avoid(peer, t0 + seconds(11)));
  b.timed_out(peer, t0 + seconds(400));  // first while again; `old` ran out > a cap ago
  EXPECT_TRUE(b.avoid(peer, t0 + seconds(409)));
  EXPECT_FALSE(b.avoid(peer, t0 + seconds(410)));
  EXPECT_EQ(b.size(), 1u);
}

}  // namespace
}  // namespace troupe::runtime
