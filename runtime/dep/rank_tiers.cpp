#include "runtime/dep/rank_tiers.h"

#include <algorithm>
#include <filesystem>

#include "kernels/check.h"
#include "kernels/parallel.h"

namespace troupe::runtime {

EngineConfig rank_share(EngineConfig c, int ranks) {
  TROUPE_CHECK(ranks >= 1, "rank_share: ranks must be >= 1, got ", ranks);
  if (ranks == 1) return c;
  if (c.executor.kernel_threads == 0) c.executor.kernel_threads = std::max(1, kernels::default_num_threads() / ranks);
  c.kv_offload_bytes /= ranks;
  c.kv_disk_bytes /= ranks;
  if (c.kv_offload_snapshots > 0) c.kv_offload_snapshots /= ranks;
  if (c.kv_disk_snapshots > 0) c.kv_disk_snapshots /= ranks;
  return c;
}

std::string rank_disk_dir(const std::string& dir, int rank, int ranks) {
  TROUPE_CHECK(rank >= 0 && rank < ranks, "rank_disk_dir: rank ", rank, " of ", ranks);
  if (dir.empty() || ranks == 1) return dir;
  return (std::filesystem::path(dir) / ("rank-" + std::to_string(rank))).string();
}

EngineConfig rank_tier_config(const EngineConfig& share, int rank, int ranks) {
  EngineConfig c = share;
  c.kv_disk_dir = rank_disk_dir(share.kv_disk_dir, rank, ranks);
  return c;
}

}  // namespace troupe::runtime
