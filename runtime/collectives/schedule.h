// All-reduce schedules as data: for one rank of R, the ordered list of what it does with
// its running value `acc` in one all-reduce. An AllReduceRank (all_reduce.h) executes the
// list, sending and blocking on receives; the schedule itself knows no values, threads or
// sockets, so it is tested and counted directly.
//
// Recursive doubling with the fold for any R (P = largest power of two <= R, E = R - P,
// d = log2 P). Example R = 6 (P = 4, E = 2, d = 2):
//
//   round 0 (fold in)    4 -> 0, 5 -> 1            rank j < E combines rank P + j's value
//   round 1 (exchange)   0 <-> 1, 2 <-> 3          partner = rank xor 1
//   round 2 (exchange)   0 <-> 2, 1 <-> 3          partner = rank xor 2
//   round 3 (fold out)   0 -> 4, 1 -> 5            the result goes back to the extra ranks
//
// Messages per step: a rank j < E sends and receives d + 1, a rank in [E, P) d, an extra
// rank 1 each way (it sits out the exchanges). R = 2^k has no fold rounds.
//
// Gather then broadcast (the baseline): round 0 every rank r > 0 sends its value to rank 0,
// which combines them in rank order; round 1 rank 0 sends the result to every other rank.
// Rank 0 handles 2 (R - 1) messages one after another, the others 1 each way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::runtime::collectives {

struct ScheduleAction {
  enum class Kind {
    Send,     // send acc to peer
    Combine,  // wait for peer's value of this round, acc = reduce(lower rank's, higher rank's)
    Take,     // wait for peer's value of this round, acc = it (the finished result)
  };
  Kind kind;
  int32_t peer;   // the other rank
  int32_t round;  // the schedule round the message belongs to (on every message)

  bool operator==(const ScheduleAction&) const = default;
};

struct CollectiveSchedule {
  std::string name;                    // "recursive-doubling" or "gather-broadcast"
  int32_t rank = 0;                    // this rank, in [0, size)
  int32_t size = 1;                    // R, the participants
  std::vector<ScheduleAction> actions;  // in order; after the last one acc is the result

  int64_t sends() const;
  int64_t receives() const;  // Combine + Take
  // True when the schedule expects a message (from, round) from peer `from` at all.
  bool expects(int32_t from, int32_t round) const;
};

// The largest power of two <= n (n >= 1).
int32_t largest_power_of_two(int32_t n);

// Throw troupe::Error unless 0 <= rank < size and size >= 1.
CollectiveSchedule recursive_doubling_schedule(int32_t rank, int32_t size);
CollectiveSchedule gather_broadcast_schedule(int32_t rank, int32_t size);

}  // namespace troupe::runtime::collectives
