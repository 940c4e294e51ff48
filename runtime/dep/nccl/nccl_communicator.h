// The Communicator (runtime/dep/communicator.h) between GPU ranks over NCCL: each rank
// holds one, on its own DeviceContext's device and stream. Built where CMake finds NCCL
// (cmake/Cuda.cmake: target troupe_nccl, TROUPE_HAVE_NCCL); unverified on a GPU so far
// (docs/cuda.md).
//
//   rank 0: id = NcclCommunicator::unique_id(); ship the bytes to every rank (TCP, CAF)
//   rank r: NcclCommunicator comm(id, size, r, gpu);   // collective: all ranks construct
//
// all_to_all moves host byte blocks (the interface's): block sizes first (one int64 per
// pair), then the payload, both as grouped ncclSend/ncclRecv through device staging
// buffers on the rank's stream. abort() aborts the NCCL communicator (ncclCommAbort),
// which wakes peers blocked in this step's exchange with an error; unlike the in-process
// group the communicator is then gone for good (NCCL cannot resume a communicator), so
// every later call throws `why` and the owner builds a new one.
#pragma once

#include <array>
#include <memory>
#include <string>

#include "runtime/dep/communicator.h"

namespace troupe::kernels::cuda { class DeviceContext; }

namespace troupe::runtime {

class NcclCommunicator : public Communicator {
 public:
  using UniqueId = std::array<char, 128>;  // ncclUniqueId's bytes
  static UniqueId unique_id();             // on one rank; works without a GPU
  static int nccl_version();               // e.g. 22809

  NcclCommunicator(const UniqueId& id, int size, int rank, kernels::cuda::DeviceContext& dev);
  ~NcclCommunicator() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void begin_step() override { ++step_; }
  std::vector<Bytes> all_to_all(std::vector<Bytes> send) override;
  void abort(const std::string& why) override;

 private:
  struct State;
  int size_, rank_;
  int64_t step_ = 0;
  kernels::cuda::DeviceContext& dev_;
  std::unique_ptr<State> state_;
  std::string aborted_;  // non-empty: abort() was called, why
};

}  // namespace troupe::runtime
