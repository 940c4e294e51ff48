#include "runtime/dep/in_process_group.h"

#include <utility>

#include "kernels/check.h"

namespace troupe::runtime {

class InProcessGroup::Rank : public Communicator {
 public:
  Rank(InProcessGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_.size_; }

  void begin_step() override {
    step_ += 1;
    exchange_ = 0;
  }

  std::vector<Bytes> all_to_all(std::vector<Bytes> send) override {
    TROUPE_CHECK(static_cast<int>(send.size()) == group_.size_, "all_to_all: ", send.size(),
                 " buffers for ", group_.size_, " ranks");
    const int64_t k = exchange_++;
    {
      std::lock_guard lock(group_.mu_);
      for (int r = 0; r < group_.size_; ++r) group_.slots_[rank_][r] = std::move(send[r]);
    }
    group_.arrive_and_wait({step_, k, 0});  // every buffer for us is deposited
    std::vector<Bytes> recv(group_.size_);
    {
      std::lock_guard lock(group_.mu_);
      for (int r = 0; r < group_.size_; ++r) recv[r] = std::move(group_.slots_[r][rank_]);
    }
    group_.arrive_and_wait({step_, k, 1});  // everyone collected: the slots may be refilled
    return recv;
  }

  void abort(const std::string& why) override {
    group_.fail_step(step_, "rank " + std::to_string(rank_) + " failed: " + why);
  }

 private:
  InProcessGroup& group_;
  int rank_;
  int64_t step_ = 0;      // only this rank's thread touches these
  int64_t exchange_ = 0;  // exchanges made in this step
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

void InProcessGroup::fail_step(int64_t step, const std::string& why) {
  std::lock_guard lock(mu_);
  failed_.emplace(step, why);  // the first failure of a step names it
  while (failed_.size() > 64) failed_.erase(failed_.begin());
  cv_.notify_all();
}

void InProcessGroup::close(const std::string& why) {
  std::lock_guard lock(mu_);
  if (closed_.empty()) closed_ = why.empty() ? "the group was closed" : why;
  cv_.notify_all();
}

void InProcessGroup::arrive_and_wait(const Key& key) {
  std::unique_lock lock(mu_);
  const int64_t step = std::get<0>(key);
  if (!closed_.empty()) TROUPE_FAIL(closed_);
  auto failed = failed_.find(step);
  if (failed != failed_.end()) TROUPE_FAIL(failed->second);  // arrives nowhere
  Point& p = points_[key];
  if (++p.arrived == size_) {
    p.open = true;
    cv_.notify_all();
  }
  cv_.wait(lock, [&] { return p.open || failed_.count(step) > 0 || !closed_.empty(); });
  const bool open = p.open;
  // The last rank out removes the point (after a failure, the ones that arrived).
  if (++p.left == p.arrived && (open || p.arrived < size_)) points_.erase(key);
  if (!open) TROUPE_FAIL((closed_.empty() ? failed_.at(step) : closed_));
}

}  // namespace troupe::runtime
