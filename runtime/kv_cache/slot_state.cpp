#include "runtime/kv_cache/slot_state.h"

#include <cstring>

#include "model/kv_store.h"

namespace troupe::runtime {
namespace {

// Takes bytes off the front of the input; every take is checked against what is left.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}

  bool take(uint64_t n, std::span<const uint8_t>& out) {
    if (n > in_.size() - at_) return false;
    out = in_.subspan(at_, size_t(n));
    at_ += size_t(n);
    return true;
  }
  bool take_u64(uint64_t& v) {
    std::span<const uint8_t> b;
    if (!take(sizeof v, b)) return false;
    std::memcpy(&v, b.data(), sizeof v);
    return true;
  }
  size_t left() const { return in_.size() - at_; }

 private:
  std::span<const uint8_t> in_;
  size_t at_ = 0;
};

}  // namespace

std::string parse_slot_state(std::span<const uint8_t> in, const model::ServingShape& m,
                             SlotStateView& out) {
  const uint64_t L = uint64_t(m.layers), W = uint64_t(m.window);
  const uint64_t row = uint64_t(m.rows.window.bytes());
  const uint64_t D = uint64_t(m.carry_width);
  Reader r(in);
  if (!r.take(L * W * row, out.rings) || !r.take(L * W * sizeof(int64_t), out.positions))
    return "the slot state is shorter than its rings (" + std::to_string(in.size()) + " bytes)";
  out.carry_v.assign(L, {});
  out.carry_s.assign(L, {});
  for (uint64_t l = 0; l < L; ++l) {
    uint64_t nv = 0, ns = 0;
    // A ratio-r layer's open group holds at most r - 1 rows of head_dim floats.
    const uint64_t r_l = uint64_t(std::max<int64_t>(1, m.ratio[l]));
    if (!r.take_u64(nv) || nv % D != 0 || nv / D >= r_l)
      return "layer " + std::to_string(l) + "'s compressor carry is malformed";
    if (!r.take(nv * sizeof(float), out.carry_v[l]) || !r.take_u64(ns) || ns != nv ||
        !r.take(ns * sizeof(float), out.carry_s[l]))
      return "layer " + std::to_string(l) + "'s compressor carry is malformed";
  }
  uint64_t present = 0;
  if (!r.take_u64(present) || present > 1) return "the slot state's feature flag is malformed";
  out.has_features = present == 1;
  if (out.has_features) {
    uint64_t H = 0;
    if (!r.take_u64(H) || H != uint64_t(m.feature_width))
      return "the slot state's feature ring is not " + std::to_string(m.feature_width) + " wide";
    if (!r.take(W * H * sizeof(float), out.feature_rows) ||
        !r.take(W * sizeof(int64_t), out.feature_positions))
      return "the slot state's feature ring is truncated";
  }
  if (r.left() != 0) return std::to_string(r.left()) + " bytes trail the slot state";
  return {};
}

void append_counted(RegionBytes& out, std::span<const float> values) {
  const uint64_t n = values.size();
  append_bytes(out, std::span<const uint64_t>(&n, 1));
  append_bytes(out, values);
}

}  // namespace troupe::runtime
