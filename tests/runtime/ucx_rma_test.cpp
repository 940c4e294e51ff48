// UcxRma (runtime/dep/ucx/ucx_rma.h): a region put by one worker lands in the memory
// another registered, byte for byte; a withdrawn region's id may be exposed again.
#ifdef TROUPE_HAVE_UCX

#include "runtime/dep/ucx/ucx_rma.h"

#include <gtest/gtest.h>

#include <chrono>
#include <numeric>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

// Progresses both sides until the put is no longer in progress (at most 10 s).
RmaTransport::PutState wait(UcxRma& sender, UcxRma& receiver, uint64_t put, std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    sender.progress();
    receiver.progress();
    const RmaTransport::PutState s = sender.state(put, error);
    if (s != RmaTransport::PutState::InProgress) return s;
  }
  return RmaTransport::PutState::InProgress;
}

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed + i * 31 + (i >> 9));
  return v;
}

TEST(UcxRma, APutLandsInTheRegisteredMemoryByteForByte) {
  UcxRma sender, receiver;
  for (const size_t n : {size_t(1), size_t(4097), size_t(3) << 20}) {  // eager to rendezvous
    std::vector<uint8_t> staging(n + 64, 0xAB);  // poison, and a tail the put must not touch
    const auto exposed = receiver.expose(n, std::span<uint8_t>(staging.data(), n));
    const std::vector<uint8_t> region = pattern(n, static_cast<uint8_t>(n));
    std::string error;
    const uint64_t put = sender.put(receiver.address(), exposed.rkey, exposed.remote_address, region);
    ASSERT_EQ(wait(sender, receiver, put, &error), RmaTransport::PutState::Done) << error;
    EXPECT_TRUE(std::equal(region.begin(), region.end(), staging.begin())) << n << " bytes";
    for (size_t i = n; i < staging.size(); ++i) ASSERT_EQ(staging[i], 0xAB) << "byte " << i;
    receiver.withdraw(n);
    EXPECT_EQ(sender.state(put, &error), RmaTransport::PutState::Failed);  // forgotten
  }
  EXPECT_NE(sender.transports(receiver.address()), "?");
}

TEST(UcxRma, SeveralPutsToOneReceiverShareItsEndpoint) {
  UcxRma sender, receiver;
  std::vector<std::vector<uint8_t>> staging, regions;
  std::vector<uint64_t> puts;
  for (uint8_t i = 0; i < 4; ++i) {
    staging.emplace_back(10000, 0);
    regions.push_back(pattern(10000, i));
  }
  for (uint64_t i = 0; i < 4; ++i) {
    const auto e = receiver.expose(i, staging[i]);
    puts.push_back(sender.put(receiver.address(), e.rkey, e.remote_address, regions[i]));
  }
  for (uint64_t i = 0; i < 4; ++i) {
    std::string error;
    ASSERT_EQ(wait(sender, receiver, puts[i], &error), RmaTransport::PutState::Done) << error;
    EXPECT_EQ(staging[i], regions[i]) << "region " << i;
  }
  EXPECT_THROW(receiver.expose(0, staging[0]), troupe::Error);  // still exposed
  receiver.withdraw(0);
  EXPECT_NO_THROW(receiver.expose(0, staging[0]));
}

TEST(UcxRma, AnAbandonedPutIsForgottenAndTheNextOneConnectsAgain) {
  UcxRma sender, receiver;
  std::vector<uint8_t> staging(1 << 20, 0);
  const auto e = receiver.expose(1, staging);
  const std::vector<uint8_t> region = pattern(staging.size(), 5);
  const uint64_t first = sender.put(receiver.address(), e.rkey, e.remote_address, region);
  sender.abandon(first);
  std::string error;
  EXPECT_EQ(sender.state(first, &error), RmaTransport::PutState::Failed);
  const uint64_t second = sender.put(receiver.address(), e.rkey, e.remote_address, region);
  ASSERT_EQ(wait(sender, receiver, second, &error), RmaTransport::PutState::Done) << error;
  EXPECT_EQ(staging, region);
}

}  // namespace
}  // namespace troupe::runtime

#endif  // TROUPE_HAVE_UCX
