// NcclCommunicator on one GPU: a communicator of one rank sends its blocks to itself
// (sizes, empty blocks and a large block), and abort() makes later exchanges throw.
#if defined(TROUPE_HAVE_NCCL)
#include "runtime/dep/nccl/nccl_communicator.h"

#include "kernels/check.h"
#include "tests/cuda/check.h"

namespace troupe::cuda_check {

void check_nccl(DeviceContext& dev, Report& rep) {
  rep.begin_case("nccl all_to_all, one rank (NCCL " +
                 std::to_string(runtime::NcclCommunicator::nccl_version()) + ")");
  runtime::NcclCommunicator comm(runtime::NcclCommunicator::unique_id(), 1, 0, dev);
  for (size_t bytes : {size_t(0), size_t(1), size_t(1000), size_t(3) << 20}) {
    runtime::Bytes block(bytes);
    for (size_t i = 0; i < bytes; ++i) block[i] = std::byte(i * 31 + 7);
    comm.begin_step();
    const std::vector<runtime::Bytes> got = comm.all_to_all({block});
    rep.check(got.size() == 1 && got[0] == block, "block of " + std::to_string(bytes) + " bytes");
  }
  comm.abort("test abort");
  bool threw = false;
  try {
    comm.all_to_all({runtime::Bytes(4)});
  } catch (const Error& e) {
    threw = std::string(e.what()).find("test abort") != std::string::npos;
  }
  rep.check(threw, "all_to_all after abort throws with the reason");
  rep.end_case();
}

}  // namespace troupe::cuda_check
#endif
