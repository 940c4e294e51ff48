#include "runtime/kv_cache/slot_lru.h"

#include "kernels/check.h"

namespace troupe::runtime {

int64_t SlotLru::count_checked(const char* what) const {
  int64_t listed = 0;
  for (int32_t s = head_, p = -1; s != -1; p = s, s = next(s)) {
    TROUPE_CHECK(prev(s) == p, "broken ", what, " LRU link at slot ", s);
    TROUPE_CHECK(++listed <= int64_t(prev_.size()), "cycle in the ", what, " LRU list");
  }
  return listed;
}

}  // namespace troupe::runtime
