// The prompts of the cross-process MoE test: the same in the test and in each peer.
#pragma once

#include <vector>

#include "support/golden.h"

namespace troupe::testing {

inline std::vector<std::vector<int32_t>> peer_prompts() {
  return {random_tokens(37, 1), random_tokens(5, 2), random_tokens(70, 3)};
}

}  // namespace troupe::testing
