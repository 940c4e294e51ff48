// A simulated network for the all-reduce state machines (runtime/collectives): R ranks,
// one queue of pending events (messages in flight and "rank r starts step s"), delivered
// one at a time in a seeded random order. So any message can be delayed behind any other,
// and a rank that finished step s may start s + 1 (and send its messages) while others are
// still in s: every reordering the actors' mailboxes could produce, and more.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <utility>
#include <vector>

#include "runtime/collectives/all_reduce.h"

namespace troupe::runtime::collectives::testing {

using MakeSchedule = CollectiveSchedule (*)(int32_t rank, int32_t size);

template <typename T>
struct SimRun {
  std::vector<std::vector<T>> results;  // [rank][step index]
  std::vector<int64_t> sent;            // [rank] messages sent over all steps
  std::vector<int64_t> received;        // [rank]
  int64_t early = 0;     // messages that reached a rank before it started their step
  bool complete = true;  // false: the queue ran dry before every rank had every result
};

// Runs `steps` consecutive all-reduces (step ids first_step, first_step + 1, ...) among
// `ranks` ranks; value(rank, i) is rank's contribution to the i-th step.
template <typename T, typename Reduce>
SimRun<T> simulate(MakeSchedule make, int32_t ranks, int steps, uint64_t seed,
                   const std::function<T(int32_t rank, int step)>& value, Reduce reduce = {},
                   int64_t first_step = 1000) {
  struct Event {
    std::optional<CollectiveMessage<T>> message;  // empty: rank `starter` starts its next step
    int32_t starter = 0;
  };
  std::vector<AllReduceRank<T, Reduce>> rank;
  for (int32_t r = 0; r < ranks; ++r) rank.emplace_back(make(r, ranks), reduce);
  SimRun<T> run;
  run.results.resize(ranks);
  run.sent.assign(ranks, 0);
  run.received.assign(ranks, 0);
  std::vector<int> started(ranks, -1);  // the last step index each rank started

  std::vector<Event> queue;
  for (int32_t r = 0; r < ranks; ++r) queue.push_back({std::nullopt, r});
  std::mt19937_64 rng(seed);
  auto take = [&](int32_t r, Progress<T> p) {
    run.sent[r] += static_cast<int64_t>(p.send.size());
    for (auto& m : p.send) queue.push_back({std::move(m), 0});
    if (!p.result) return;
    run.results[r].push_back(std::move(*p.result));
    if (started[r] + 1 < steps) queue.push_back({std::nullopt, r});
  };
  while (!queue.empty()) {
    const size_t pick = std::uniform_int_distribution<size_t>(0, queue.size() - 1)(rng);
    Event e = std::move(queue[pick]);
    queue[pick] = std::move(queue.back());
    queue.pop_back();
    if (!e.message) {
      const int32_t r = e.starter;
      ++started[r];
      take(r, rank[r].start(first_step + started[r], value(r, started[r])));
      continue;
    }
    const int32_t to = e.message->to;
    ++run.received[to];
    if (e.message->step - first_step > started[to]) ++run.early;
    take(to, rank[to].receive(std::move(*e.message)));
  }
  for (int32_t r = 0; r < ranks; ++r)
    if (static_cast<int>(run.results[r].size()) != steps || rank[r].running() ||
        rank[r].buffered() != 0)
      run.complete = false;
  return run;
}

}  // namespace troupe::runtime::collectives::testing
