#include "runtime/dep/slot_weights.h"

#include <cstring>
#include <new>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

constexpr std::align_val_t kAlign{64};  // a cache line: the GEMM kernels stream rows

}  // namespace

void SlotWeights::AlignedFree::operator()(std::byte* p) const { ::operator delete[](p, kAlign); }

SlotWeights::SlotWeights(const model::ModelWeights& model, const eplb::ExpertPlacement& placement,
                         int rank, int ranks) {
  TROUPE_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "slot weights: rank ", rank, " of ", ranks);
  TROUPE_CHECK(placement.num_physical % ranks == 0, "slot weights: ", placement.num_physical,
               " slots do not split over ", ranks, " ranks");
  TROUPE_CHECK(placement.num_layers == static_cast<int64_t>(model.layers.size()),
               "slot weights: the placement has ", placement.num_layers, " layers, the model ",
               model.layers.size());
  slots_ = placement.num_physical / ranks;
  views_.reserve(placement.num_layers * slots_);
  for (int64_t l = 0; l < placement.num_layers; ++l) {
    const model::MoeWeights& moe = model.layers[l].ffn;
    TROUPE_CHECK(static_cast<int64_t>(moe.experts.size()) == placement.num_logical,
                 "slot weights: layer ", l, " has ", moe.experts.size(), " experts, the placement ",
                 placement.num_logical);
    source_.push_back(&moe);
    for (int64_t s = 0; s < slots_; ++s) {
      const kernels::ExpertWeights& e = moe.experts[placement.logical_of(l, rank * slots_ + s)];
      views_.push_back({copy_view(e.w1), copy_view(e.w3), copy_view(e.w2)});
    }
  }
}

// The view's codes and scales in one buffer of this object's (codes first, scales after,
// each 64-byte aligned).
kernels::WeightView SlotWeights::copy_view(const kernels::WeightView& w) {
  const int64_t data = kernels::data_bytes(w), scale = kernels::scale_bytes(w);
  if (data == 0) return w;
  TROUPE_CHECK(w.data != nullptr && (scale == 0 || w.scale != nullptr),
               "slot weights: a ", kernels::to_string(w.format), " weight without its bytes");
  const int64_t scale_at = (data + 63) / 64 * 64;
  const auto size = static_cast<size_t>(scale_at + scale);
  std::unique_ptr<std::byte, AlignedFree> buf(static_cast<std::byte*>(::operator new[](size, kAlign)));
  std::memcpy(buf.get(), w.data, static_cast<size_t>(data));
  kernels::WeightView c = w;
  c.data = buf.get();
  if (scale > 0) {
    std::memcpy(buf.get() + scale_at, w.scale, static_cast<size_t>(scale));
    c.scale = reinterpret_cast<const uint8_t*>(buf.get() + scale_at);
  }
  bytes_ += data + scale;
  buffers_.push_back(std::move(buf));
  return c;
}

}  // namespace troupe::runtime
