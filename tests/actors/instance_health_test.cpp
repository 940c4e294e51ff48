// InstanceHealth, what /health reads: a fresh one is not ready (a daemon's HTTP server
// answers before the supervisor or the cluster router has run; a 200 then let requests
// reach a router with no engine dialed, ServeGgufRanks' 503s), and it says what its writer
// last said.
#include "actors/instance_health.h"

#include <gtest/gtest.h>

namespace troupe::actors {
namespace {

TEST(InstanceHealth, AFreshOneIsStartingNotReady) {
  const InstanceHealth h;
  ASSERT_TRUE(h.problem().has_value());
  EXPECT_EQ(h.problem()->rfind("starting: ", 0), 0u) << *h.problem();
}

TEST(InstanceHealth, SaysWhatItsWriterLastSaid) {
  InstanceHealth h;
  h.set_ready();
  EXPECT_FALSE(h.problem().has_value());
  h.set_unavailable("1 of 2 engines not up: e1");
  EXPECT_EQ(h.problem(), "1 of 2 engines not up: e1");
  h.set_restarting("rank 0 died");
  EXPECT_EQ(h.problem(), "restarting: rank 0 died");
  h.set_down("restarted 3 times");
  EXPECT_EQ(h.problem(), "down: restarted 3 times");
  h.set_starting();
  EXPECT_EQ(h.problem()->rfind("starting: ", 0), 0u);
  h.set_ready();
  EXPECT_FALSE(h.problem().has_value());
}

}  // namespace
}  // namespace troupe::actors
