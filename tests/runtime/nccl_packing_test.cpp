// The NCCL communicator's host side: packing blocks into one buffer and back, and (where
// NCCL is built in) that the library answers without a GPU. The exchange itself needs a
// GPU: troupe_cuda_check's "nccl" family (tests/cuda/check_nccl.cpp).
#include <gtest/gtest.h>

#include "runtime/dep/nccl/packing.h"
#if defined(TROUPE_HAVE_NCCL)
#include "runtime/dep/nccl/nccl_communicator.h"
#endif

namespace troupe::runtime {
namespace {

Bytes bytes(std::initializer_list<int> v) {
  Bytes b;
  for (int x : v) b.push_back(std::byte(x));
  return b;
}

TEST(NcclPacking, BlocksRoundTripWithCountsAndDisplacements) {
  const std::vector<Bytes> blocks = {bytes({1, 2, 3}), {}, bytes({4}), bytes({5, 6})};
  const nccl_detail::Packed p = nccl_detail::pack(blocks);
  EXPECT_EQ(p.counts, (std::vector<int64_t>{3, 0, 1, 2}));
  EXPECT_EQ(p.displs, (std::vector<int64_t>{0, 3, 3, 4}));
  EXPECT_EQ(p.buffer, bytes({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(nccl_detail::unpack(p.buffer, p.counts), blocks);
  EXPECT_TRUE(nccl_detail::pack({}).buffer.empty());
  EXPECT_EQ(nccl_detail::unpack({}, {0, 0}), (std::vector<Bytes>{{}, {}}));
}

#if defined(TROUPE_HAVE_NCCL)
TEST(NcclCommunicator, LibraryAnswersWithoutAGpu) {
  EXPECT_GE(NcclCommunicator::nccl_version(), 20000);
  const NcclCommunicator::UniqueId a = NcclCommunicator::unique_id();
  const NcclCommunicator::UniqueId b = NcclCommunicator::unique_id();
  EXPECT_NE(a, b);
}
#endif

}  // namespace
}  // namespace troupe::runtime
