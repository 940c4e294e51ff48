#include "runtime/eplb/dispatch.h"

#include "kernels/check.h"

namespace troupe::runtime::eplb {

int64_t choose_replica(const ExpertPlacement& p, int64_t layer, int64_t expert, int64_t token_index,
                       int64_t local_gpu, int64_t slots_per_gpu) {
  TROUPE_CHECK(layer >= 0 && layer < p.num_layers, "layer ", layer, " is not in [0, ", p.num_layers,
               ")");
  TROUPE_CHECK(expert >= 0 && expert < p.num_logical, "expert ", expert, " is not in [0, ",
               p.num_logical, ")");
  TROUPE_CHECK(token_index >= 0, "token_index must be >= 0, got ", token_index);
  TROUPE_CHECK(slots_per_gpu >= 1 && p.num_physical % slots_per_gpu == 0, "slots_per_gpu ",
               slots_per_gpu, " does not divide the ", p.num_physical, " physical slots");
  const int64_t count = p.replica_count(layer, expert);
  if (local_gpu >= 0)
    for (int64_t r = 0; r < count; ++r) {
      const int64_t slot = p.slot_of(layer, expert, r);
      if (slot / slots_per_gpu == local_gpu) return slot;  // lowest replica rank on this GPU
    }
  return p.slot_of(layer, expert, token_index % count);
}

}  // namespace troupe::runtime::eplb
