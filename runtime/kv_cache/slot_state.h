// A ring slot's whole state as bytes (PagedKvStorage::save_slot_state), for a KV
// hand-off (runtime/kv_transfer/kv_handoff.h): unlike a window snapshot, which is taken
// at a block boundary, it may sit anywhere, so it carries the open compressor groups and
// the DSpark feature ring too.
//
//   rings      [L, W, window row bytes]
//   positions  [L, W] int64
//   carry      per layer: carry_v count (u64), floats, carry_s count (u64), floats
//   features   present (u64 0/1); when 1: width H (u64), rows [W, H] float, positions [W] int64
//
// Every number is host byte order: both sides of a hand-off run the same build.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/serving_shape.h"
#include "runtime/kv_cache/region_bytes.h"

namespace troupe::runtime {

// The slot state's pieces, pointing into the bytes parse_slot_state read.
struct SlotStateView {
  std::span<const uint8_t> rings;
  std::span<const uint8_t> positions;
  std::vector<std::span<const uint8_t>> carry_v, carry_s;  // [L] float bytes
  bool has_features = false;
  std::span<const uint8_t> feature_rows, feature_positions;
};

// Splits `in` into its pieces for a model of config m and checks every length: ring
// and position sizes, each layer's open group (whole rows of head_dim, fewer than its
// compress ratio, carry_s as long as carry_v), the feature ring's width and size, and
// that nothing trails. Returns why not, or an empty string. Never throws.
std::string parse_slot_state(std::span<const uint8_t> in, const model::ServingShape& m,
                             SlotStateView& out);

// Appends a u64 count and then `values`' bytes (a carry vector, in the layout above).
void append_counted(RegionBytes& out, std::span<const float> values);
template <typename T>
void append_bytes(RegionBytes& out, std::span<const T> values) {
  const auto* p = reinterpret_cast<const uint8_t*>(values.data());
  out.insert(out.end(), p, p + values.size_bytes());
}

}  // namespace troupe::runtime
