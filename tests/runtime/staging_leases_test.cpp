#include "runtime/kv_transfer/staging_leases.h"

#include <gtest/gtest.h>

namespace troupe::runtime {
namespace {

using Clock = StagingLeases::Clock;

TEST(StagingLeases, LeaseScalesWithTheBytes) {
  EXPECT_EQ(kv_transfer_lease(0).count(), 1000);
  EXPECT_EQ(kv_transfer_lease(50'000'000).count(), 2000);  // 50 MB: one more second
}

TEST(StagingLeases, ATakenRegionEndsItsLeaseWithItsBytes) {
  StagingLeases leases(1 << 20);
  const Clock::time_point t0 = Clock::now();
  const auto r = leases.reserve(100, t0);
  ASSERT_NE(r.id, 0u) << r.why;
  std::vector<uint8_t>* m = leases.memory(r.id);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->size(), 100u);
  (*m)[7] = 42;  // what a put writes
  EXPECT_EQ(leases.reserved_bytes(), 100u);
  const auto taken = leases.take(r.id);
  ASSERT_TRUE(taken.has_value());
  EXPECT_EQ((*taken)[7], 42);
  EXPECT_EQ(leases.reserved_bytes(), 0u);
  EXPECT_TRUE(leases.empty());
  EXPECT_FALSE(leases.take(r.id).has_value());  // once only
}

TEST(StagingLeases, RefusesPastItsCapAndEmptyRegions) {
  StagingLeases leases(1000);
  const Clock::time_point t0 = Clock::now();
  EXPECT_EQ(leases.reserve(0, t0).id, 0u);
  const auto a = leases.reserve(600, t0);
  ASSERT_NE(a.id, 0u);
  const auto b = leases.reserve(600, t0);
  EXPECT_EQ(b.id, 0u);
  EXPECT_NE(b.why.find("staging memory is full"), std::string::npos) << b.why;
  EXPECT_NE(leases.reserve(400, t0).id, 0u);  // exactly to the cap
}

TEST(StagingLeases, AnExpiredLeaseIsWithdrawnThenFreedALeaseLater) {
  StagingLeases leases(1 << 20);
  const Clock::time_point t0 = Clock::now();
  const auto r = leases.reserve(1000, t0);
  const auto lease = kv_transfer_lease(1000);
  EXPECT_TRUE(leases.expire(t0 + 2 * lease - std::chrono::milliseconds(1)).empty());
  EXPECT_EQ(leases.open(), 1u);
  const auto withdrawn = leases.expire(t0 + 2 * lease);
  ASSERT_EQ(withdrawn.size(), 1u);
  EXPECT_EQ(withdrawn[0], r.id);
  // Quarantined: not open, not takable (a late commit is refused), still counted.
  EXPECT_EQ(leases.open(), 0u);
  EXPECT_EQ(leases.memory(r.id), nullptr);
  EXPECT_FALSE(leases.take(r.id).has_value());
  EXPECT_EQ(leases.reserved_bytes(), 1000u);
  EXPECT_FALSE(leases.empty());
  EXPECT_TRUE(leases.expire(t0 + 3 * lease - std::chrono::milliseconds(1)).empty());
  EXPECT_EQ(leases.reserved_bytes(), 1000u);
  EXPECT_TRUE(leases.expire(t0 + 3 * lease).empty());  // freed, not withdrawn again
  EXPECT_EQ(leases.reserved_bytes(), 0u);
  EXPECT_TRUE(leases.empty());
}

}  // namespace
}  // namespace troupe::runtime
