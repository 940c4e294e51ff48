// One rank's all-reduce as a state machine over a CollectiveSchedule (schedule.h): pure
// values in, pure values out, no threads or sockets, so a scheduler actor can drive it by
// forwarding messages, and a test by shuffling them.
//
//   AllReduceRank<StepMetadata, StepMetadataReduce> dp(recursive_doubling_schedule(r, R));
//   Progress p = dp.start(step, mine);     // p.send: messages to deliver to their `to` ranks
//   p = dp.receive(message);               // on each message addressed to rank r
//   if (p.result) ...                       // the step's reduced value, on exactly one call
//
// Every message carries its step (the all-reduce's epoch) and its schedule round. Messages
// may arrive in any order: ones for a later round, or for the next step (a peer that has
// already finished this one and started the next), are kept until this rank gets there.
// Each (step, round, from) is delivered exactly once; a duplicate, a stale step or a
// message the schedule does not expect is a broken invariant (troupe::Error).
//
// Reduce: `T operator()(const T& lower, const T& higher) const`, associative and
// commutative (the schedules combine in different orders). The lower rank's value always
// goes first, so both partners of an exchange compute the same thing and every rank ends
// with the same value even where the functor is not commutative bit for bit.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/check.h"
#include "runtime/collectives/schedule.h"

namespace troupe::runtime::collectives {

template <typename T>
struct CollectiveMessage {
  int32_t from = 0;
  int32_t to = 0;
  int64_t step = 0;   // which all-reduce: one per step, increasing from step to step
  int32_t round = 0;  // the schedule round (schedule.h)
  T payload{};

  bool operator==(const CollectiveMessage&) const = default;
};

template <typename T>
struct Progress {
  std::vector<CollectiveMessage<T>> send;  // to deliver, each to its `to` rank, any order
  std::optional<T> result;                 // set by the one call that completes the step
};

template <typename T, typename Reduce>
class AllReduceRank {
 public:
  explicit AllReduceRank(CollectiveSchedule schedule, Reduce reduce = Reduce())
      : schedule_(std::move(schedule)), reduce_(std::move(reduce)) {}

  // Begins this rank's part of the all-reduce of `step` (after the previous step's result;
  // steps increase). Messages of that step buffered already are used at once.
  Progress<T> start(int64_t step, T value) {
    TROUPE_CHECK(!active_, "rank ", schedule_.rank, ": start(", step, ") while step ", step_,
                 " is still running");
    TROUPE_CHECK(!finished_ || step > step_, "rank ", schedule_.rank, ": start(", step,
                 ") after step ", step_, " (steps must increase)");
    step_ = step;
    active_ = true;
    next_ = 0;
    acc_ = std::move(value);
    return advance();
  }

  // A message addressed to this rank, for the running step or a later one.
  Progress<T> receive(CollectiveMessage<T> m) {
    check_incoming(m);
    const Key key{m.step, m.round, m.from};
    TROUPE_CHECK(!inbox_.count(key), "rank ", schedule_.rank, ": duplicate message from ", m.from,
                 ", step ", m.step, ", round ", m.round);
    inbox_.emplace(key, std::move(m.payload));
    if (!active_ || m.step != step_) return {};
    return advance();
  }

  const CollectiveSchedule& schedule() const { return schedule_; }
  bool running() const { return active_; }
  size_t buffered() const { return inbox_.size(); }  // received, not yet used

 private:
  using Key = std::tuple<int64_t, int32_t, int32_t>;  // step, round, from
  using Kind = ScheduleAction::Kind;

  void check_incoming(const CollectiveMessage<T>& m) const {
    const int32_t me = schedule_.rank;
    TROUPE_CHECK(m.to == me, "rank ", me, ": got a message addressed to rank ", m.to);
    TROUPE_CHECK(schedule_.expects(m.from, m.round), "rank ", me, ": the ", schedule_.name,
                 " schedule expects no message from rank ", m.from, " in round ", m.round);
    const bool stale = (active_ && m.step < step_) || (!active_ && finished_ && m.step <= step_);
    TROUPE_CHECK(!stale, "rank ", me, ": message from rank ", m.from, " for step ", m.step,
                 ", which this rank has finished");
    if (active_ && m.step == step_)
      for (size_t i = 0; i < next_; ++i) {
        const ScheduleAction& a = schedule_.actions[i];
        TROUPE_CHECK(a.kind == Kind::Send || a.peer != m.from || a.round != m.round, "rank ", me,
                     ": duplicate message from rank ", m.from, ", step ", m.step, ", round ",
                     m.round);
      }
  }

  // Runs the schedule from next_ until it needs a message that has not arrived, or ends.
  Progress<T> advance() {
    Progress<T> out;
    const int32_t me = schedule_.rank;
    for (; next_ < schedule_.actions.size(); ++next_) {
      const ScheduleAction& a = schedule_.actions[next_];
      if (a.kind == Kind::Send) {
        out.send.push_back({me, a.peer, step_, a.round, acc_});
        continue;
      }
      const auto it = inbox_.find(Key{step_, a.round, a.peer});
      if (it == inbox_.end()) return out;
      if (a.kind == Kind::Take)
        acc_ = std::move(it->second);
      else
        acc_ = a.peer < me ? reduce_(it->second, acc_) : reduce_(acc_, it->second);
      inbox_.erase(it);
    }
    active_ = false;
    finished_ = true;
    out.result = std::move(acc_);
    return out;
  }

  CollectiveSchedule schedule_;
  Reduce reduce_;
  std::map<Key, T> inbox_;  // arrived, not yet used: this step's later rounds, the next step
  T acc_{};
  int64_t step_ = 0;     // the running step, or the last finished one
  size_t next_ = 0;      // the next action of the running step
  bool active_ = false;  // a step is running
  bool finished_ = false;  // some step has finished (step_ is then the last one)
};

}  // namespace troupe::runtime::collectives
