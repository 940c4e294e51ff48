// Where a speculating decode's draft tokens come from. The executor asks once per
// speculating chunk, before the batched verify forward.
//
//   chunk:  [bonus] at position start (the token sampled last step, not in the KV yet)
//   anchor: start - 1, the last position in the KV (its F row is in the feature ring)
//   drafts: d_1..d_k' for positions start + 1 .. start + k' (k' <= k)
#pragma once

#include <cstdint>
#include <vector>

#include "model/feature_ring.h"
#include "runtime/request.h"

namespace troupe::runtime {

struct DraftQuery {
  RequestId id = 0;
  int64_t anchor = 0;
  int32_t anchor_token = 0;
  int32_t bonus = 0;
  int64_t k = 0;
  const model::FeatureRing* features = nullptr;  // null unless the drafter needs them
};

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Appends d_1..d_k' (k' <= q.k) to `out` (the executor passes the chunk's tokens, so a
  // steady step allocates nothing for them).
  virtual void propose(const DraftQuery& q, std::vector<int32_t>& out) const = 0;
  std::vector<int32_t> propose(const DraftQuery& q) const {
    std::vector<int32_t> out;
    propose(q, out);
    return out;
  }
  // Whether the target forward must fill the requests' feature rings (DSpark's F).
  virtual bool needs_features() const = 0;
};

}  // namespace troupe::runtime
