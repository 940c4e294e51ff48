#include "runtime/dep/slot_weights.h"

#include <new>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

constexpr std::align_val_t kAlign{64};  // a cache line: the GEMM kernels stream rows

}  // namespace

void SlotWeights::AlignedFree::operator()(std::byte* p) const { ::operator delete[](p, kAlign); }

SlotWeights::SlotWeights(const MoeLayers& layers, const eplb::ExpertPlacement& placement, int rank,
                         int ranks) {
  TROUPE_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "slot weights: rank ", rank, " of ", ranks);
  TROUPE_CHECK(placement.num_physical % ranks == 0, "slot weights: ", placement.num_physical,
               " slots do not split over ", ranks, " ranks");
  TROUPE_CHECK(placement.num_layers == static_cast<int64_t>(layers.size()),
               "slot weights: the placement has ", placement.num_layers, " layers, the model ",
               layers.size());
  slots_ = placement.num_physical / ranks;
  views_.reserve(placement.num_layers * slots_);
  for (int64_t l = 0; l < placement.num_layers; ++l) {
    const model::ExpertTable& moe = *layers[l];
    TROUPE_CHECK(static_cast<int64_t>(moe.size()) == placement.num_logical,
                 "slot weights: layer ", l, " has ", moe.size(), " experts, the placement ",
                 placement.num_logical);
    source_.push_back(&moe);
    for (int64_t s = 0; s < slots_; ++s) {
      const kernels::ExpertWeights& e = moe[placement.logical_of(l, rank * slots_ + s)];
      views_.push_back({copy_view(e.w1), copy_view(e.w3), copy_view(e.w2)});
    }
  }
}

// The view in a buffer of this object's own (kernels::copy_weight's layout).
kernels::WeightView SlotWeights::copy_view(const kernels::WeightView& w) {
  if (kernels::data_bytes(w) == 0) return w;
  const auto size = static_cast<size_t>(kernels::copied_bytes(w));
  std::unique_ptr<std::byte, AlignedFree> buf(static_cast<std::byte*>(::operator new[](size, kAlign)));
  const kernels::WeightView c = kernels::copy_weight(w, buf.get());
  bytes_ += kernels::data_bytes(w) + kernels::scale_bytes(w);
  buffers_.push_back(std::move(buf));
  return c;
}

}  // namespace troupe::runtime
