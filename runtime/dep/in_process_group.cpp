#include "runtime/dep/in_process_group.h"

#include <utility>

#include "kernels/check.h"

namespace troupe::runtime {

class InProcessGroup::Rank : public Communicator {
 public:
  Rank(InProcessGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size_; }

  std::vector<Bytes> all_to_all(std::vector<Bytes> send) override {
    TROUPE_CHECK(static_cast<int>(send.size()) == group_.size_, "all_to_all: ", send.size(),
                 " buffers for ", group_.size_, " ranks");
    {
      std::lock_guard lock(group_.mu_);
      for (int r = 0; r < group_.size_; ++r) group_.slots_[rank_][r] = std::move(send[r]);
    }
    group_.arrive_and_wait();  // every buffer for us is deposited
    std::vector<Bytes> recv(group_.size_);
    {
      std::lock_guard lock(group_.mu_);
      for (int r = 0; r < group_.size_; ++r) recv[r] = std::move(group_.slots_[r][rank_]);
    }
    group_.arrive_and_wait();  // everyone collected: the slots may be refilled
    return recv;
  }

  void abort(const std::string& why) override {
    std::lock_guard lock(group_.mu_);
    if (group_.abort_why_.empty())
      group_.abort_why_ = "rank " + std::to_string(rank_) + " failed: " + why;
    group_.cv_.notify_all();
  }

 private:
  InProcessGroup& group_;
  int rank_;
};

InProcessGroup::InProcessGroup(int size)
    : size_(size), slots_(size, std::vector<Bytes>(size)) {
  TROUPE_CHECK(size >= 1, "InProcessGroup: size ", size);
  for (int r = 0; r < size; ++r) ranks_.push_back(std::make_unique<Rank>(*this, r));
}

InProcessGroup::~InProcessGroup() = default;

Communicator& InProcessGroup::communicator(int rank) {
  TROUPE_CHECK(rank >= 0 && rank < size_, "InProcessGroup: no rank ", rank);
  return *ranks_[rank];
}

void InProcessGroup::arrive_and_wait() {
  std::unique_lock lock(mu_);
  if (!abort_why_.empty()) TROUPE_FAIL(abort_why_);
  const uint64_t phase = phase_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++phase_;
    cv_.notify_all();
    return;
  }
  cv_.wait(lock, [&] { return phase_ != phase || !abort_why_.empty(); });
  if (phase_ == phase) TROUPE_FAIL(abort_why_);  // aborted before everyone arrived
}

void InProcessGroup::reset() {
  std::lock_guard lock(mu_);
  abort_why_.clear();
  arrived_ = 0;
  for (auto& row : slots_)
    for (Bytes& b : row) b.clear();
}

bool InProcessGroup::aborted() const {
  std::lock_guard lock(mu_);
  return !abort_why_.empty();
}

}  // namespace troupe::runtime
