#include "runtime/dep/expert_parallel.h"

#include <chrono>
#include <cstring>
#include <string>
#include <utility>

#include "kernels/check.h"
#include "runtime/eplb/dispatch.h"

namespace troupe::runtime {
namespace {

template <class T>
void append(Bytes& b, const T* values, size_t count) {
  if (count == 0) return;  // values may be null (an empty batch): memcpy must not see it
  const size_t at = b.size();
  b.resize(at + count * sizeof(T));
  std::memcpy(b.data() + at, values, count * sizeof(T));
}

// The rows other ranks sent here, as one batch for this rank's experts.
struct Arrived {
  std::vector<float> x;        // [n, H]
  std::vector<int32_t> slot;   // [n] local slot
  std::vector<int64_t> count;  // [R] rows from each rank, in rank order
};

Arrived unpack_dispatch(const std::vector<Bytes>& recv, int64_t H, int64_t slots_per_rank) {
  Arrived a;
  const size_t row_bytes = sizeof(int32_t) + H * sizeof(float);
  for (const Bytes& b : recv) {
    TROUPE_CHECK(b.size() % row_bytes == 0, "dispatch: a buffer of ", b.size(),
                 " bytes is not whole rows of ", row_bytes);
    const int64_t n = static_cast<int64_t>(b.size() / row_bytes);
    a.count.push_back(n);
    for (int64_t i = 0; i < n; ++i) {
      const std::byte* row = b.data() + i * row_bytes;
      int32_t slot;
      std::memcpy(&slot, row, sizeof slot);
      TROUPE_CHECK(slot >= 0 && slot < slots_per_rank, "dispatch: slot ", slot, " out of range");
      a.slot.push_back(slot);
      const size_t at = a.x.size();
      a.x.resize(at + H);
      std::memcpy(&a.x[at], row + sizeof slot, H * sizeof(float));
    }
  }
  return a;
}

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point& t) {
  const Clock::time_point now = Clock::now();
  const double s = std::chrono::duration<double>(now - t).count();
  t = now;
  return s;
}

}  // namespace

ExpertParallel::ExpertParallel(Communicator& comm,
                               std::shared_ptr<const eplb::ExpertPlacement> placement,
                               MoeLayers layers)
    : comm_(comm), layers_(std::move(layers)) {
  TROUPE_CHECK(placement != nullptr, "expert parallel: no placement");
  std::shared_ptr<const SlotWeights> weights;
  if (!layers_.empty())
    weights = std::make_shared<const SlotWeights>(layers_, *placement, comm_.rank(), comm_.size());
  set_placement(std::move(placement), std::move(weights));
}

void ExpertParallel::set_placement(std::shared_ptr<const eplb::ExpertPlacement> placement,
                                   std::shared_ptr<const SlotWeights> weights) {
  TROUPE_CHECK(placement && placement->num_physical % comm_.size() == 0, "the placement's ",
               placement ? placement->num_physical : 0, " slots do not split over ", comm_.size(),
               " ranks");
  TROUPE_CHECK(layers_.empty() || (weights && weights->slots_per_rank() * comm_.size() ==
                                          placement->num_physical),
               "expert parallel: a placement without this rank's copy of its slots' weights");
  slots_per_rank_ = placement->num_physical / comm_.size();
  counts_.resize(placement->num_layers * placement->num_logical, 0);
  placement_ = std::move(placement);
  weights_ = std::move(weights);
}

void ExpertParallel::stage(int64_t epoch, std::shared_ptr<const eplb::ExpertPlacement> placement,
                           std::shared_ptr<const SlotWeights> weights) {
  TROUPE_CHECK(epoch > epoch_, "expert parallel: placement ", epoch, " is not newer than ", epoch_,
               " in use");
  TROUPE_CHECK(placement != nullptr, "expert parallel: no placement");
  TROUPE_CHECK(layers_.empty() || weights, "expert parallel: placement ", epoch,
               " staged without this rank's copy of its slots' weights");
  staged_ = std::move(placement);
  staged_weights_ = std::move(weights);
  staged_epoch_ = epoch;
}

void ExpertParallel::use(int64_t epoch) {
  if (epoch == epoch_) return;
  TROUPE_CHECK(staged_ && epoch == staged_epoch_, "expert parallel: placement ", epoch,
               " asked for, but ", epoch_, " is in use and ",
               staged_ ? std::to_string(staged_epoch_) : std::string("none"), " staged");
  set_placement(std::move(staged_), std::move(staged_weights_));
  epoch_ = epoch;
  staged_ = nullptr;
}

std::vector<int64_t> ExpertParallel::take_counts() {
  std::vector<int64_t> out(counts_.size(), 0);
  out.swap(counts_);
  return out;
}

void ExpertParallel::run(const model::RoutedBatch& b) {
  const eplb::ExpertPlacement& pl = *placement_;
  const int R = comm_.size(), me = comm_.rank();
  const int64_t H = b.hidden, S = slots_per_rank_;
  TROUPE_CHECK(b.experts != nullptr && H > 0 && b.inter > 0, "expert parallel: layer ", b.layer,
               "'s batch has no experts or widths");
  TROUPE_CHECK(b.layer < pl.num_layers, "no placement for MoE layer ", b.layer);
  TROUPE_CHECK(static_cast<int64_t>(b.experts->size()) == pl.num_logical, "the placement has ",
               pl.num_logical, " experts, the layer ", b.experts->size());

  auto t = Clock::now();
  // Route: each (token, k) entry to a slot and the slot's rank.
  std::vector<Bytes> dispatch(R);
  std::vector<std::vector<int64_t>> sent(R);  // entries sent to each rank, in order
  for (int64_t t = 0; t < b.rows; ++t)
    for (int64_t k = 0; k < b.top_k; ++k) {
      const int64_t entry = t * b.top_k + k;
      const int32_t e = b.pick[entry];
      if (e < 0) continue;
      counts_[b.layer * pl.num_logical + e] += 1;
      const int64_t slot = eplb::choose_replica(pl, b.layer, e, t, me, S);
      const int dst = static_cast<int>(slot / S);
      const int32_t local = static_cast<int32_t>(slot - dst * S);
      append(dispatch[dst], &local, 1);
      append(dispatch[dst], b.x + t * H, static_cast<size_t>(H));
      sent[dst].push_back(entry);
      (dst == me ? times_.rows_kept : times_.rows_sent) += 1;
    }
  times_.route_s += seconds_since(t);

  // Experts: this rank's slots on every row that arrived.
  const std::vector<Bytes> arrived = comm_.all_to_all(std::move(dispatch));
  times_.dispatch_s += seconds_since(t);
  const Arrived in = unpack_dispatch(arrived, H, S);
  const int64_t n = static_cast<int64_t>(in.slot.size());
  // This rank's own copy of its slots' experts where it has one of this layer, else the
  // batch's weights in place.
  const bool own = weights_ && weights_->copies(b.layer, b.experts);
  std::vector<kernels::ExpertWeights> slots(S);
  for (int64_t s = 0; s < S; ++s)
    slots[s] = own ? weights_->slot(b.layer, s) : (*b.experts)[pl.logical_of(b.layer, me * S + s)];
  std::vector<float> y(n * H);
  kernels::MoeExpertRowsParams p;
  p.x = in.x.data();
  p.pick = in.slot.data();
  p.experts = slots.data();
  p.y = y.data();
  p.n = n;
  p.hidden = H;
  p.inter = b.inter;
  p.experts_count = S;
  p.swiglu_limit = b.swiglu_limit;
  p.precision = b.precision;
  kernels::moe_expert_rows(p);
  times_.experts_s += seconds_since(t);

  // Combine: results go home, in the order their rows came; home sums in slot order.
  std::vector<Bytes> results(R);
  for (int r = 0, row = 0; r < R; row += static_cast<int>(in.count[r]), ++r)
    append(results[r], y.data() + int64_t(row) * H, static_cast<size_t>(in.count[r] * H));
  const std::vector<Bytes> back = comm_.all_to_all(std::move(results));
  std::vector<float> ys;
  std::vector<int64_t> row_of(b.rows * b.top_k, -1);
  for (int r = 0; r < R; ++r) {
    TROUPE_CHECK(back[r].size() == sent[r].size() * H * sizeof(float), "combine: rank ", r,
                 " sent ", back[r].size(), " bytes for ", sent[r].size(), " rows");
    for (size_t i = 0; i < sent[r].size(); ++i)
      row_of[sent[r][i]] = static_cast<int64_t>(ys.size() / H) + static_cast<int64_t>(i);
    const size_t at = ys.size();
    ys.resize(at + sent[r].size() * H);
    if (!sent[r].empty()) std::memcpy(&ys[at], back[r].data(), back[r].size());
  }
  kernels::MoeCombineParams c;
  c.out = b.out;
  c.y = ys.data();
  c.row_of = row_of.data();
  c.weight = b.weight;
  c.m = b.rows;
  c.top_k = b.top_k;
  c.hidden = H;
  kernels::moe_combine(c);
  times_.combine_s += seconds_since(t);
}

}  // namespace troupe::runtime
