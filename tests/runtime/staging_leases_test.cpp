#include "runtime/kv_transfer/staging_leases.h"

#include <gtest/gtest.h>

#include <algorithm>

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
  RegionBytes* m = leases.memory(r.id);
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

TEST(StagingLeases, IdsAreUniqueAcrossOwners) {
  StagingLeases a(1 << 20), b(1 << 20);  // two incarnations' agents
  const Clock::time_point t0 = Clock::now();
  const auto x = a.reserve(10, t0), y = b.reserve(10, t0);
  ASSERT_NE(x.id, 0u);
  ASSERT_NE(y.id, 0u);
  EXPECT_NE(x.id, y.id);
  EXPECT_FALSE(b.take(x.id).has_value());  // a's lease is not b's
}

TEST(StagingLeases, AReleasedLeaseIsQuarantinedForALease) {
  StagingLeases leases(1 << 20);
  const Clock::time_point t0 = Clock::now();
  const auto r = leases.reserve(500, t0);
  EXPECT_TRUE(leases.release(r.id, t0));
  EXPECT_FALSE(leases.release(r.id, t0));  // once
  EXPECT_FALSE(leases.take(r.id).has_value());
  EXPECT_EQ(leases.reserved_bytes(), 500u);
  EXPECT_EQ(leases.next_deadline(), t0 + kv_transfer_lease(500));
  EXPECT_TRUE(leases.expire(t0 + kv_transfer_lease(500)).empty());  // freed, not withdrawn
  EXPECT_TRUE(leases.empty());
}

TEST(StagingLeases, SurrenderedMemoryIsKeptUntilItsTime) {
  StagingLeases leases(1 << 20);
  const Clock::time_point t0 = Clock::now();
  leases.reserve(100, t0);
  auto regions = leases.surrender();
  EXPECT_TRUE(leases.empty());
  EXPECT_EQ(leases.reserved_bytes(), 0u);
  ASSERT_EQ(regions.size(), 1u);
  const auto until = regions[0].first;
  EXPECT_EQ(until, t0 + 3 * kv_transfer_lease(100));  // its lease (2) plus one
  StagingQuarantine::sweep(until - std::chrono::milliseconds(1));  // whatever others left
  const size_t before = StagingQuarantine::held();
  StagingQuarantine::keep(std::move(regions));
  StagingQuarantine::sweep(until - std::chrono::milliseconds(1));
  EXPECT_EQ(StagingQuarantine::held(), before + 1);
  StagingQuarantine::sweep(until);
  EXPECT_LE(StagingQuarantine::held(), before);
}

}  // namespace
}  // namespace troupe::runtime

namespace troupe::runtime {
namespace {

// Regions come zeroed without a memset (region_bytes.h): a lease taken after another of
// the same size was filled and freed shows zeros, never the earlier lease's bytes, for
// calloc'd (small) and mmapped (a MiB and more) regions alike.
TEST(StagingLeases, AFreshRegionIsZeroNeverAnEarlierLeasesBytes) {
  for (const uint64_t bytes : {uint64_t(4096), uint64_t(3) << 20}) {
    StagingLeases leases(uint64_t(64) << 20);
    const Clock::time_point t0 = Clock::now();
    for (int round = 0; round < 3; ++round) {
      const auto r = leases.reserve(bytes, t0);
      ASSERT_NE(r.id, 0u) << r.why;
      RegionBytes& m = *leases.memory(r.id);
      ASSERT_EQ(m.size(), bytes);
      EXPECT_TRUE(std::all_of(m.begin(), m.end(), [](uint8_t b) { return b == 0; }))
          << bytes << " bytes, round " << round;
      std::fill(m.begin(), m.end(), uint8_t(0xab));  // what a put writes
      leases.take(r.id);                              // freed here
    }
  }
}

TEST(StagingLeases, ItsSenderGivesUpOneLeaseAfterTheReserve) {
  StagingLeases leases(1 << 20);
  const Clock::time_point t0 = Clock::now();
  const auto r = leases.reserve(100'000, t0);
  ASSERT_NE(r.id, 0u);
  ASSERT_TRUE(leases.sender_gives_up(r.id).has_value());
  EXPECT_EQ(*leases.sender_gives_up(r.id), t0 + kv_transfer_lease(100'000));
  leases.release(r.id, t0);
  EXPECT_FALSE(leases.sender_gives_up(r.id).has_value());  // quarantined: not open
}

}  // namespace
}  // namespace troupe::runtime
