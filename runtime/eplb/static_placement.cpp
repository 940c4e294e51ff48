#include "runtime/eplb/static_placement.h"

#include <algorithm>
#include <vector>

#include "kernels/check.h"

namespace troupe::runtime::eplb {

ExpertPlacement neighbor_copy_placement(int64_t num_layers, int64_t num_logical, int64_t num_gpus,
                                        int64_t copies_per_gpu) {
  TROUPE_CHECK(num_gpus >= 1 && num_logical % num_gpus == 0, "num_gpus ", num_gpus,
               " does not divide the ", num_logical, " logical experts");
  const int64_t own = num_logical / num_gpus;
  TROUPE_CHECK(copies_per_gpu >= 0 && copies_per_gpu <= own, "copies_per_gpu ", copies_per_gpu,
               " is not in [0, ", own, "] (the experts a GPU owns)");
  const int64_t per_gpu = own + copies_per_gpu;
  std::vector<int64_t> phy2log, rank;
  phy2log.reserve(static_cast<size_t>(num_layers * num_gpus * per_gpu));
  rank.reserve(phy2log.capacity());
  for (int64_t l = 0; l < num_layers; ++l)
    for (int64_t g = 0; g < num_gpus; ++g) {
      for (int64_t k = 0; k < own; ++k) phy2log.push_back(g * own + k), rank.push_back(0);
      const int64_t next = (g + 1) % num_gpus;
      for (int64_t k = 0; k < copies_per_gpu; ++k)
        phy2log.push_back(next * own + k), rank.push_back(1);
    }
  return make_placement(num_layers, num_logical, num_gpus * per_gpu, phy2log, rank);
}

ExpertPlacement ep_default_placement(int64_t num_layers, int64_t num_logical, int64_t ranks,
                                     int64_t redundant) {
  TROUPE_CHECK(ranks >= 1, "ranks must be >= 1, got ", ranks);
  TROUPE_CHECK(redundant >= 0, "num-redundant-experts must be >= 0, got ", redundant);
  const int64_t physical = (num_logical + redundant + ranks - 1) / ranks * ranks;
  std::vector<int64_t> phy2log, rank;
  std::vector<int64_t> copies(num_logical, 0);
  for (int64_t l = 0; l < num_layers; ++l) {
    std::fill(copies.begin(), copies.end(), 0);
    for (int64_t slot = 0; slot < physical; ++slot) {
      const int64_t e = slot % num_logical;
      phy2log.push_back(e);
      rank.push_back(copies[e]++);
    }
  }
  return make_placement(num_layers, num_logical, physical, phy2log, rank);
}

}  // namespace troupe::runtime::eplb
