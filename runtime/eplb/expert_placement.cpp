#include "runtime/eplb/expert_placement.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime::eplb {

ExpertPlacement make_placement(int64_t num_layers, int64_t num_logical, int64_t num_physical,
                               std::span<const int64_t> phy2log,
                               std::span<const int64_t> phy_rank) {
  TROUPE_CHECK(num_layers >= 0 && num_logical >= 1 && num_physical >= num_logical,
               "make_placement: need num_logical >= 1 and num_physical >= num_logical, got ",
               num_logical, " and ", num_physical);
  const auto slots = static_cast<size_t>(num_layers * num_physical);
  TROUPE_CHECK(phy2log.size() == slots, "phy2log: expected [", num_layers, ", ", num_physical,
               "], got ", phy2log.size(), " values");
  TROUPE_CHECK(phy_rank.size() == slots, "phy_rank: expected [", num_layers, ", ", num_physical,
               "], got ", phy_rank.size(), " values");

  ExpertPlacement p;
  p.num_layers = num_layers;
  p.num_logical = num_logical;
  p.num_physical = num_physical;
  p.phy2log.assign(phy2log.begin(), phy2log.end());
  p.logcnt.assign(static_cast<size_t>(num_layers * num_logical), 0);
  for (int64_t l = 0; l < num_layers; ++l)
    for (int64_t s = 0; s < num_physical; ++s) {
      const int64_t e = p.logical_of(l, s);
      TROUPE_CHECK(e >= 0 && e < num_logical, "phy2log[", l, ", ", s, "] = ", e,
                   " is not a logical expert in [0, ", num_logical, ")");
      ++p.logcnt[l * num_logical + e];
    }
  p.max_replicas = p.logcnt.empty() ? 0 : *std::max_element(p.logcnt.begin(), p.logcnt.end());

  p.log2phy.assign(p.logcnt.size() * static_cast<size_t>(p.max_replicas), -1);
  for (int64_t l = 0; l < num_layers; ++l)
    for (int64_t s = 0; s < num_physical; ++s) {
      const int64_t e = p.logical_of(l, s);
      const int64_t r = phy_rank[l * num_physical + s];
      TROUPE_CHECK(r >= 0 && r < p.replica_count(l, e), "phy_rank[", l, ", ", s, "] = ", r,
                   " but expert ", e, " has ", p.replica_count(l, e), " replicas");
      int64_t& entry = p.log2phy[(l * num_logical + e) * p.max_replicas + r];
      TROUPE_CHECK(entry == -1, "phy_rank: expert ", e, " of layer ", l, " has replica rank ", r,
                   " twice (slots ", entry, " and ", s, ")");
      entry = s;
    }
  check_placement(p);
  return p;
}

ExpertPlacement unreplicated_placement(int64_t num_layers, int64_t num_logical) {
  std::vector<int64_t> phy2log(static_cast<size_t>(num_layers * num_logical));
  for (size_t i = 0; i < phy2log.size(); ++i) phy2log[i] = static_cast<int64_t>(i) % num_logical;
  const std::vector<int64_t> rank(phy2log.size(), 0);
  return make_placement(num_layers, num_logical, num_logical, phy2log, rank);
}

namespace {

// One layer: log2phy lists each slot exactly once, under the expert phy2log names.
void check_layer(const ExpertPlacement& p, int64_t l) {
  std::vector<char> listed(static_cast<size_t>(p.num_physical), 0);
  int64_t total = 0;
  for (int64_t e = 0; e < p.num_logical; ++e) {
    const int64_t cnt = p.replica_count(l, e);
    TROUPE_CHECK(cnt >= 1 && cnt <= p.max_replicas, "logcnt[", l, ", ", e, "] = ", cnt,
                 " is not in [1, max_replicas = ", p.max_replicas, "]");
    total += cnt;
    for (int64_t r = 0; r < p.max_replicas; ++r) {
      const int64_t s = p.slot_of(l, e, r);
      if (r >= cnt) {
        TROUPE_CHECK(s == -1, "log2phy[", l, ", ", e, ", ", r, "] = ", s, ": expected -1 after ",
                     cnt, " replicas");
        continue;
      }
      TROUPE_CHECK(s >= 0 && s < p.num_physical && p.logical_of(l, s) == e, "log2phy[", l, ", ", e,
                   ", ", r, "] = ", s, " is not a slot holding expert ", e);
      TROUPE_CHECK(!listed[s], "log2phy: slot ", s, " of layer ", l, " is listed twice");
      listed[s] = 1;
    }
  }
  TROUPE_CHECK(total == p.num_physical, "logcnt: layer ", l, " counts sum to ", total,
               ", expected num_physical = ", p.num_physical);
}

}  // namespace

void check_placement(const ExpertPlacement& p) {
  TROUPE_CHECK(p.phy2log.size() == static_cast<size_t>(p.num_layers * p.num_physical),
               "phy2log: expected [L, Nphy] = [", p.num_layers, ", ", p.num_physical, "]");
  TROUPE_CHECK(p.logcnt.size() == static_cast<size_t>(p.num_layers * p.num_logical),
               "logcnt: expected [L, Nlog] = [", p.num_layers, ", ", p.num_logical, "]");
  TROUPE_CHECK(p.log2phy.size() == p.logcnt.size() * static_cast<size_t>(p.max_replicas),
               "log2phy: expected [L, Nlog, max_cnt] = [", p.num_layers, ", ", p.num_logical, ", ",
               p.max_replicas, "]");
  for (int64_t l = 0; l < p.num_layers; ++l) check_layer(p, l);
}

}  // namespace troupe::runtime::eplb
