// Makes a UcxCommunicator on a thread of its own, for an owner that must not block (an
// actor): the constructor's all-gather goes through the owner's control plane. The thread
// makes the UCP worker and hands its address to on_address; the owner gets every rank's
// address from its group's leader and passes them to deliver(); the thread connects to
// every peer and exchanges the hello (ucx_communicator.h), then on_done says the group is
// connected (error empty: take() it) or why not. Both callbacks run on that thread.
//
//   UcxGroupForming f(rank, size, {}, [&](Bytes mine) { join_leader(mine); },
//                     [&](std::string error) { tell_owner(error); });
//   f.deliver(all);  ...  auto comm = f.take();
//
// The destructor gives up a forming that has not finished (the hello wait sees the cancel
// flag, the all-gather wait wakes) and joins the thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/dep/ucx/ucx_communicator.h"

namespace troupe::runtime {

class UcxGroupForming {
 public:
  using AddressFn = std::function<void(Bytes mine)>;
  using DoneFn = std::function<void(std::string error)>;

  UcxGroupForming(int rank, int size, UcxOptions options, AddressFn on_address, DoneFn on_done);
  ~UcxGroupForming();
  UcxGroupForming(const UcxGroupForming&) = delete;
  UcxGroupForming& operator=(const UcxGroupForming&) = delete;

  // Every rank's address, [size] in rank order (this one's included), from the leader.
  void deliver(std::vector<Bytes> all);
  // The connected communicator, once on_done("") ran; null before (and after a take).
  std::shared_ptr<UcxCommunicator> take();

 private:
  std::vector<Bytes> wait_for_addresses();

  std::atomic<bool> cancel_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::vector<Bytes>> all_;    // under mu_
  std::shared_ptr<UcxCommunicator> comm_;    // under mu_
  std::thread thread_;                       // last: it uses the members above
};

}  // namespace troupe::runtime
