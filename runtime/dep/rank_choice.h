// Which rank of a DEP-R instance takes a new request (DP load balance, DESIGN.md): the
// one with the fewest running + waiting requests, since a decode step's time barely
// depends on context (the seeds measured it); among the ranks within `margin` of the
// least loaded, the one whose prefix cache holds the longest prefix of the prompt, so a
// follow-up turn lands where its conversation's KV is (in its primary pool or its host
// or disk tier: each rank owns its tiers). A request that names a saved prefix (KV save
// by name) goes to the rank holding it, whatever the loads: no other rank has it. Pure:
// DepEngine and the instance's supervisor both call it.
#pragma once

#include <cstdint>
#include <span>

namespace troupe::runtime {

struct RankLoad {
  int64_t requests = 0;       // running + waiting
  int64_t cached_tokens = 0;  // prompt tokens its prefix cache holds, in any tier
  bool pinned = false;        // it holds the saved prefix the request names

  bool operator==(const RankLoad&) const = default;
};

// The chosen rank: the first one holding the named saved prefix; else the longest cached
// prefix among the near-least loaded, then the lighter load, then the lower rank. loads
// must not be empty.
int choose_rank(std::span<const RankLoad> loads, int64_t margin);

}  // namespace troupe::runtime
