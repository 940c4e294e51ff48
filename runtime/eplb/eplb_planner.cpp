#include "runtime/eplb/eplb_planner.h"

#include <spdlog/fmt/fmt.h>

#include <utility>

#include "kernels/check.h"
#include "runtime/eplb/balance.h"
#include "runtime/eplb/rebalance.h"

namespace troupe::runtime::eplb {

namespace {

// Layer by layer the better of two placements of the same shape: the planner's packing is
// a heuristic, and on a layer the current placement already balances it can come out worse.
ExpertPlacement better_layers(const ExpertPlacement& fresh, const ExpertPlacement& current,
                              const std::vector<bool>& keep_current) {
  std::vector<int64_t> phy2log, rank;
  for (int64_t l = 0; l < fresh.num_layers; ++l) {
    const ExpertPlacement& p = keep_current[l] ? current : fresh;
    for (int64_t slot = 0; slot < p.num_physical; ++slot) {
      const int64_t e = p.logical_of(l, slot);
      int64_t r = 0;
      while (p.slot_of(l, e, r) != slot) ++r;
      phy2log.push_back(e);
      rank.push_back(r);
    }
  }
  return make_placement(fresh.num_layers, fresh.num_logical, fresh.num_physical, phy2log, rank);
}

}  // namespace

double mean_balance(const std::vector<double>& per_layer) {
  double s = 0;
  for (double x : per_layer) s += x;
  return per_layer.empty() ? 0.0 : s / double(per_layer.size());
}

std::string describe(const Rebalance& r) {
  return fmt::format("step {}: mean balance {:.3f} -> {:.3f} over {} layers", r.step,
                     mean_balance(r.balance_before), mean_balance(r.balance_after),
                     r.balance_before.size());
}

EplbPlanner::EplbPlanner(EplbConfig config, int64_t num_layers, int64_t num_logical,
                         int64_t num_physical, int64_t num_ranks)
    : config_(config),
      layers_(num_layers),
      logical_(num_logical),
      physical_(num_physical),
      ranks_(num_ranks),
      sum_(num_layers * num_logical, 0) {
  TROUPE_CHECK(config.window_size >= 1, "eplb window_size must be >= 1, got ", config.window_size);
  TROUPE_CHECK(config.step_interval >= 1, "eplb step_interval must be >= 1, got ",
               config.step_interval);
  EplbTopology t;
  t.num_physical = num_physical;
  t.num_gpus = num_ranks;
  t.validate(num_logical);
}

std::vector<float> EplbPlanner::window_loads() const {
  return std::vector<float>(sum_.begin(), sum_.end());
}

std::optional<Rebalance> EplbPlanner::record(std::span<const int64_t> counts,
                                             const ExpertPlacement& current) {
  TROUPE_CHECK(static_cast<int64_t>(counts.size()) == layers_ * logical_, "eplb: ", counts.size(),
               " counts for ", layers_, " layers x ", logical_, " experts");
  window_.emplace_back(counts.begin(), counts.end());
  for (size_t i = 0; i < counts.size(); ++i) sum_[i] += counts[i];
  if (static_cast<int64_t>(window_.size()) > config_.window_size) {
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] -= window_.front()[i];
    window_.pop_front();
  }
  steps_ += 1;
  if (steps_ % config_.step_interval != 0) return std::nullopt;
  int64_t tokens = 0;
  for (int64_t v : sum_) tokens += v;
  if (tokens == 0) return std::nullopt;  // nothing routed: nothing to balance
  const std::vector<float> loads = window_loads();
  EplbTopology t;
  t.num_physical = physical_;
  t.num_gpus = ranks_;
  Rebalance r;
  r.step = steps_;
  const ExpertPlacement fresh = rebalance_experts(loads, layers_, logical_, t);
  r.balance_before = layer_balances(current, loads, ranks_);
  const std::vector<double> fresh_balance = layer_balances(fresh, loads, ranks_);
  std::vector<bool> keep(layers_);
  bool better = false;
  for (int64_t l = 0; l < layers_; ++l) {
    keep[l] = fresh_balance[l] <= r.balance_before[l];
    better = better || !keep[l];
  }
  if (!better) return std::nullopt;  // no layer would gain: keep the placement in use
  r.placement = better_layers(fresh, current, keep);
  r.balance_after = layer_balances(r.placement, loads, ranks_);
  return r;
}

}  // namespace troupe::runtime::eplb
