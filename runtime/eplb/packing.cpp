#include "runtime/eplb/packing.h"

#include <algorithm>
#include <numeric>

#include "kernels/check.h"

namespace troupe::runtime::eplb {

Packing balanced_packing(std::span<const float> weight, int64_t num_packs) {
  const auto n = static_cast<int64_t>(weight.size());
  TROUPE_CHECK(num_packs >= 1, "balanced_packing: num_packs must be >= 1, got ", num_packs);
  TROUPE_CHECK(n % num_packs == 0, "balanced_packing: ", n, " items do not divide into ", num_packs,
               " packs (num_packs)");
  const int64_t per_pack = n / num_packs;
  Packing out;
  out.pack_index.resize(static_cast<size_t>(n));
  out.rank_in_pack.assign(static_cast<size_t>(n), 0);
  if (per_pack == 1) {  // eplb.py's shortcut; the greedy loop would give the same answer
    std::iota(out.pack_index.begin(), out.pack_index.end(), 0);
    return out;
  }

  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return weight[a] > weight[b]; });

  std::vector<float> pack_weight(static_cast<size_t>(num_packs), 0.0f);
  std::vector<int64_t> pack_items(static_cast<size_t>(num_packs), 0);
  for (const int64_t item : order) {
    int64_t best = -1;
    for (int64_t k = 0; k < num_packs; ++k)
      if (pack_items[k] < per_pack && (best < 0 || pack_weight[k] < pack_weight[best])) best = k;
    out.pack_index[item] = best;
    out.rank_in_pack[item] = pack_items[best]++;
    pack_weight[best] += weight[item];
  }
  return out;
}

Replication replicate_experts(std::span<const float> weight, int64_t num_physical) {
  const auto n = static_cast<int64_t>(weight.size());
  TROUPE_CHECK(n >= 1, "replicate_experts: weight must not be empty");
  TROUPE_CHECK(num_physical >= n, "replicate_experts: num_physical ", num_physical,
               " is below the ", n, " logical experts");
  Replication out;
  out.phy2log.resize(static_cast<size_t>(num_physical));
  out.rank.assign(static_cast<size_t>(num_physical), 0);
  out.logcnt.assign(static_cast<size_t>(n), 1);
  std::iota(out.phy2log.begin(), out.phy2log.begin() + n, 0);
  for (int64_t i = n; i < num_physical; ++i) {
    int64_t best = 0;
    float best_load = weight[0] / static_cast<float>(out.logcnt[0]);
    for (int64_t j = 1; j < n; ++j) {
      const float load = weight[j] / static_cast<float>(out.logcnt[j]);
      if (load > best_load) best = j, best_load = load;
    }
    out.phy2log[i] = best;
    out.rank[i] = out.logcnt[best]++;
  }
  return out;
}

}  // namespace troupe::runtime::eplb
