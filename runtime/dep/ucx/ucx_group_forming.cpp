#include "runtime/dep/ucx/ucx_group_forming.h"

#include "kernels/check.h"

namespace troupe::runtime {

UcxGroupForming::UcxGroupForming(int rank, int size, UcxOptions options, AddressFn on_address,
                                 DoneFn on_done) {
  options.cancel = &cancel_;
  thread_ = std::thread([this, rank, size, options, on_address = std::move(on_address),
                         on_done = std::move(on_done)] {
    std::string error;
    try {
      auto comm = std::make_shared<UcxCommunicator>(
          rank, size,
          [&](const Bytes& mine) {
            on_address(mine);
            return wait_for_addresses();
          },
          options);
      std::lock_guard lock(mu_);
      comm_ = std::move(comm);
    } catch (const std::exception& e) {  // incl. bad_alloc: the owner forms the group again
      error = e.what();
      if (error.empty()) error = "forming the UCX group failed";
    }
    if (!cancel_.load()) on_done(std::move(error));
  });
}

UcxGroupForming::~UcxGroupForming() {
  {
    std::lock_guard lock(mu_);
    cancel_.store(true);
  }
  cv_.notify_all();
  thread_.join();
}

std::vector<Bytes> UcxGroupForming::wait_for_addresses() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return all_.has_value() || cancel_.load(); });
  if (!all_) TROUPE_FAIL("the group's forming was given up before every rank had joined");
  return std::move(*all_);
}

void UcxGroupForming::deliver(std::vector<Bytes> all) {
  {
    std::lock_guard lock(mu_);
    all_ = std::move(all);
  }
  cv_.notify_all();
}

std::shared_ptr<UcxCommunicator> UcxGroupForming::take() {
  std::lock_guard lock(mu_);
  return std::move(comm_);
}

}  // namespace troupe::runtime
