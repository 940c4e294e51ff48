// The DSpark target-feature ring of one sequence (MODEL.md §4, §8): F[p] [H] of the
// last W positions that ran every target layer, keyed by position like the SWA rings.
//
//   W slots, slot = p mod W, pos[slot] = the position held (-1 = empty)
//   the draft's context rows are F[p] for max(0, a-W+1) <= p <= a that are held
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace troupe::model {

struct FeatureRing {
  int64_t width = 0;         // H
  std::vector<float> rows;   // [W, H]
  std::vector<int64_t> pos;  // [W] position each slot holds, -1 = empty

  FeatureRing() = default;
  FeatureRing(int64_t W, int64_t H) : width(H), rows(W * H, 0.0f), pos(W, -1) {}

  int64_t slots() const { return static_cast<int64_t>(pos.size()); }
  // F[p], or null when the ring does not hold position p.
  const float* row(int64_t p) const {
    const int64_t slot = p % slots();
    return p >= 0 && pos[slot] == p ? &rows[slot * width] : nullptr;
  }
  void put(int64_t p, const float* f) {
    const int64_t slot = p % slots();
    std::copy_n(f, width, &rows[slot * width]);
    pos[slot] = p;
  }
  bool operator==(const FeatureRing&) const = default;
};

}  // namespace troupe::model
