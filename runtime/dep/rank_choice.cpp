#include "runtime/dep/rank_choice.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime {

int choose_rank(std::span<const RankLoad> loads, int64_t margin) {
  TROUPE_CHECK(!loads.empty(), "choose_rank: no ranks");
  for (int r = 0; r < static_cast<int>(loads.size()); ++r)
    if (loads[r].pinned) return r;
  int64_t least = loads[0].requests;
  for (const RankLoad& l : loads) least = std::min(least, l.requests);
  int best = -1;
  for (int r = 0; r < static_cast<int>(loads.size()); ++r) {
    const RankLoad& l = loads[r];
    if (l.requests > least + margin) continue;
    if (best < 0 || l.cached_tokens > loads[best].cached_tokens ||
        (l.cached_tokens == loads[best].cached_tokens && l.requests < loads[best].requests))
      best = r;
  }
  return best;
}

}  // namespace troupe::runtime
