// Which replica of a routed expert a token goes to (MODEL.md §9, CHOSEN): a replica on the
// token's own GPU when the expert has one there (no network hop), otherwise replica
// (token's global index mod logcnt), which spreads an expert's tokens evenly over its
// replicas without any shared state between GPUs.
#pragma once

#include <cstdint>

#include "runtime/eplb/expert_placement.h"

namespace troupe::runtime::eplb {

// Returns the physical slot for the token. local_gpu: the GPU the token is on, or -1 for
// none (then only the mod rule applies); slots_per_gpu: Nphy / num_gpus.
int64_t choose_replica(const ExpertPlacement& placement, int64_t layer, int64_t expert,
                       int64_t token_index, int64_t local_gpu, int64_t slots_per_gpu);

}  // namespace troupe::runtime::eplb
