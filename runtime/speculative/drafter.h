// Where a speculating decode's draft tokens come from. The executor asks once per
// speculating chunk, before the batched verify forward.
//
//   chunk:  [bonus] at position start (the token sampled last step, not in the KV yet)
//   anchor: start - 1, the last position in the KV (its F row is in the feature ring)
//   drafts: d_1..d_k' for positions start + 1 .. start + k' (k' <= k)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/feature_ring.h"
#include "model/routed_experts.h"
#include "runtime/request.h"

namespace troupe::runtime {

using model::MoeLayers;

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
  // Every speculating chunk of a step at once (one rank, no expert parallelism), as
  // propose() would draft each: appends query i's drafts to *out[i]. The default drafts
  // them one by one; a network drafter runs them as one batch, so they share its weight
  // reads.
  virtual void propose_all(std::span<const DraftQuery> queries,
                           std::span<std::vector<int32_t>* const> out) const;
  // Whether the target forward must fill the requests' feature rings (DSpark's F).
  virtual bool needs_features() const = 0;

  // The draft network's MoE layers, which an expert-parallel rank shards (DEP-R: the
  // draft's own placement, on the rank's communicator); empty: it has none.
  virtual MoeLayers moe_layers() const { return {}; }
  // Every speculating chunk of a rank's step at once (drafters with moe_layers() only),
  // the draft's routed experts through `routed`: every rank of the group calls it in
  // every step whose DP sync says some rank drafts, with no queries if it has none, so the
  // exchanges stay matched. Appends query i's drafts to *out[i], as propose() would.
  virtual void propose_batch(std::span<const DraftQuery> queries,
                             std::span<std::vector<int32_t>* const> out,
                             model::RoutedExperts& routed) const;
};

}  // namespace troupe::runtime
