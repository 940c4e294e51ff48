#include "runtime/eplb/balance.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime::eplb {

std::vector<double> gpu_loads(const ExpertPlacement& p, int64_t layer, std::span<const float> load,
                              int64_t num_gpus) {
  TROUPE_CHECK(num_gpus >= 1 && p.num_physical % num_gpus == 0, "num_gpus ", num_gpus,
               " does not divide the ", p.num_physical, " physical slots");
  TROUPE_CHECK(layer >= 0 && layer < p.num_layers, "layer ", layer, " is not in [0, ", p.num_layers,
               ")");
  TROUPE_CHECK(load.size() == static_cast<size_t>(p.num_logical), "load: expected ", p.num_logical,
               " values (one per logical expert), got ", load.size());
  const int64_t slots_per_gpu = p.num_physical / num_gpus;
  std::vector<double> out(static_cast<size_t>(num_gpus), 0.0);
  for (int64_t s = 0; s < p.num_physical; ++s) {
    const int64_t e = p.logical_of(layer, s);
    out[s / slots_per_gpu] += static_cast<double>(load[e]) / p.replica_count(layer, e);
  }
  return out;
}

double balance_of(std::span<const double> loads) {
  TROUPE_CHECK(!loads.empty(), "balance_of: loads must not be empty");
  double sum = 0, max = 0;
  for (const double x : loads) sum += x, max = std::max(max, x);
  return max > 0 ? sum / static_cast<double>(loads.size()) / max : 1.0;
}

std::vector<double> layer_balances(const ExpertPlacement& p, std::span<const float> loads,
                                   int64_t num_gpus) {
  TROUPE_CHECK(loads.size() == static_cast<size_t>(p.num_layers * p.num_logical),
               "loads: expected [L, Nlog] = [", p.num_layers, ", ", p.num_logical, "], got ",
               loads.size(), " values");
  std::vector<double> out(static_cast<size_t>(p.num_layers));
  for (int64_t l = 0; l < p.num_layers; ++l)
    out[l] = balance_of(gpu_loads(p, l, loads.subspan(l * p.num_logical, p.num_logical), num_gpus));
  return out;
}

}  // namespace troupe::runtime::eplb
