#include "runtime/collectives/schedule.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime::collectives {
namespace {

using Kind = ScheduleAction::Kind;

void check_rank(int32_t rank, int32_t size) {
  TROUPE_CHECK(size >= 1, "all-reduce size must be >= 1, got ", size);
  TROUPE_CHECK(rank >= 0 && rank < size, "rank ", rank, " is not in [0, ", size, ")");
}

}  // namespace

int64_t CollectiveSchedule::sends() const {
  return std::count_if(actions.begin(), actions.end(),
                       [](const ScheduleAction& a) { return a.kind == Kind::Send; });
}

int64_t CollectiveSchedule::receives() const {
  return static_cast<int64_t>(actions.size()) - sends();
}

bool CollectiveSchedule::expects(int32_t from, int32_t round) const {
  return std::any_of(actions.begin(), actions.end(), [&](const ScheduleAction& a) {
    return a.kind != Kind::Send && a.peer == from && a.round == round;
  });
}

int32_t largest_power_of_two(int32_t n) {
  TROUPE_CHECK(n >= 1, "largest_power_of_two: n must be >= 1, got ", n);
  int32_t p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}

CollectiveSchedule recursive_doubling_schedule(int32_t rank, int32_t size) {
  check_rank(rank, size);
  CollectiveSchedule s{"recursive-doubling", rank, size, {}};
  const int32_t P = largest_power_of_two(size);
  const int32_t extra = size - P;
  int32_t depth = 0;
  while ((1 << depth) < P) ++depth;
  const int32_t fold_out_round = depth + 1;

  if (rank >= P) {  // an extra rank: hand its value to rank - P, get the result back
    s.actions.push_back({Kind::Send, rank - P, 0});
    s.actions.push_back({Kind::Take, rank - P, fold_out_round});
    return s;
  }
  if (rank < extra) s.actions.push_back({Kind::Combine, rank + P, 0});
  for (int32_t k = 0; k < depth; ++k) {
    const int32_t partner = rank ^ (1 << k);
    s.actions.push_back({Kind::Send, partner, k + 1});
    s.actions.push_back({Kind::Combine, partner, k + 1});
  }
  if (rank < extra) s.actions.push_back({Kind::Send, rank + P, fold_out_round});
  return s;
}

CollectiveSchedule gather_broadcast_schedule(int32_t rank, int32_t size) {
  check_rank(rank, size);
  CollectiveSchedule s{"gather-broadcast", rank, size, {}};
  if (rank > 0) {
    s.actions.push_back({Kind::Send, 0, 0});
    s.actions.push_back({Kind::Take, 0, 1});
    return s;
  }
  for (int32_t r = 1; r < size; ++r) s.actions.push_back({Kind::Combine, r, 0});
  for (int32_t r = 1; r < size; ++r) s.actions.push_back({Kind::Send, r, 1});
  return s;
}

}  // namespace troupe::runtime::collectives
