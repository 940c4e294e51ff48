// NcclCommunicator: runtime/dep/nccl/nccl_communicator.h.
#include "runtime/dep/nccl/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>

#include "kernels/check.h"
#include "kernels/cuda/device_context.h"
#include "runtime/dep/nccl/packing.h"

#define NCCL_OK(expr)                                                                    \
  do {                                                                                   \
    const ncclResult_t r_ = (expr);                                                      \
    TROUPE_CHECK(r_ == ncclSuccess, #expr, ": ", ncclGetErrorString(r_));                \
  } while (0)

namespace troupe::runtime {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclCommunicator::UniqueId));

struct NcclCommunicator::State {
  ncclComm_t comm = nullptr;
};

NcclCommunicator::UniqueId NcclCommunicator::unique_id() {
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id));
  UniqueId out;
  std::memcpy(out.data(), &id, sizeof id);
  return out;
}

int NcclCommunicator::nccl_version() {
  int v = 0;
  NCCL_OK(ncclGetVersion(&v));
  return v;
}

NcclCommunicator::NcclCommunicator(const UniqueId& id, int size, int rank,
                                   kernels::cuda::DeviceContext& dev)
    : size_(size), rank_(rank), dev_(dev), state_(std::make_unique<State>()) {
  TROUPE_CHECK(size >= 1 && rank >= 0 && rank < size, "NcclCommunicator: rank ", rank,
               " of size ", size);
  ncclUniqueId nid;
  std::memcpy(&nid, id.data(), sizeof nid);
  TROUPE_CHECK(cudaSetDevice(dev.device()) == cudaSuccess, "NcclCommunicator: cudaSetDevice(",
               dev.device(), ")");
  NCCL_OK(ncclCommInitRank(&state_->comm, size, nid, rank));
}

NcclCommunicator::~NcclCommunicator() {
  if (state_->comm && aborted_.empty()) ncclCommDestroy(state_->comm);
}

std::vector<Bytes> NcclCommunicator::all_to_all(std::vector<Bytes> send) {
  TROUPE_CHECK(aborted_.empty(), "NcclCommunicator aborted: ", aborted_);
  TROUPE_CHECK(static_cast<int>(send.size()) == size_, "all_to_all: ", send.size(),
               " blocks for ", size_, " ranks");
  cudaStream_t stream = dev_.stream();
  TROUPE_CHECK(cudaSetDevice(dev_.device()) == cudaSuccess, "all_to_all: cudaSetDevice");
  const nccl_detail::Packed out = nccl_detail::pack(send);

  // 1. Block sizes: one int64 to and from every rank (this one included).
  kernels::cuda::DeviceBuffer<int64_t> send_counts(dev_, size_), recv_counts(dev_, size_);
  dev_.upload(send_counts.get(), out.counts.data(), size_ * sizeof(int64_t));
  NCCL_OK(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    NCCL_OK(ncclSend(send_counts.get() + peer, 1, ncclInt64, peer, state_->comm, stream));
    NCCL_OK(ncclRecv(recv_counts.get() + peer, 1, ncclInt64, peer, state_->comm, stream));
  }
  NCCL_OK(ncclGroupEnd());
  std::vector<int64_t> in_counts(size_);
  dev_.download(in_counts.data(), recv_counts.get(), size_ * sizeof(int64_t));
  dev_.synchronize();
  const std::vector<int64_t> in_displs = nccl_detail::displacements(in_counts);
  const int64_t in_total = in_displs.back() + in_counts.back();

  // 2. The payload through device staging buffers.
  kernels::cuda::DeviceBuffer<std::byte> sbuf(dev_, out.buffer.size()), rbuf(dev_, in_total);
  dev_.upload(sbuf.get(), out.buffer.data(), out.buffer.size());
  NCCL_OK(ncclGroupStart());
  for (int peer = 0; peer < size_; ++peer) {
    if (out.counts[peer] > 0)
      NCCL_OK(ncclSend(sbuf.get() + out.displs[peer], out.counts[peer], ncclChar, peer,
                       state_->comm, stream));
    if (in_counts[peer] > 0)
      NCCL_OK(ncclRecv(rbuf.get() + in_displs[peer], in_counts[peer], ncclChar, peer,
                       state_->comm, stream));
  }
  NCCL_OK(ncclGroupEnd());
  Bytes in(in_total);
  dev_.download(in.data(), rbuf.get(), in.size());
  dev_.synchronize();
  return nccl_detail::unpack(in, in_counts);
}

void NcclCommunicator::abort(const std::string& why) {
  if (!aborted_.empty()) return;
  aborted_ = why.empty() ? "aborted" : why;
  if (state_->comm) ncclCommAbort(state_->comm);
}

}  // namespace troupe::runtime
