// The host and disk KV tiers of an instance of R ranks (docs/kv-cache.md "Tiers with R
// ranks", docs/config.md): each rank owns its own tiers, as it owns its own primary pool,
// because a rank's KV manager is the only one that knows which blocks its tiers hold.
// Host memory and the disk are resources of the node, not of a rank, so a process's
// kv-offload-bytes and kv-disk-bytes are split evenly among the ranks it runs (a rank in
// a process of its own, on a node of its own, has all of it), and each rank keeps its
// files in a folder of its own under kv-disk-dir named by its rank in the instance
// (rank-<r>), so no two ranks ever write, adopt or delete the same file (also when the
// nodes of an instance share a host and a folder) and each rebuilds only its own index at
// start-up. Pure: the DepEngine, the actors' supervisor and the cluster file call it.
#pragma once

#include <string>

#include "runtime/engine.h"

namespace troupe::runtime {

// One rank's share of a process: kv_offload_bytes and kv_disk_bytes (and the tier
// snapshot counts when set) divided by `ranks`, the ranks in the process, rounded down;
// and, unless executor.kernel_threads says how many, the process's kernel threads
// (each rank at least one), so R ranks time-share the machine. kv_pinned_bytes is not
// split: it is a share of the rank's own primary pool, which kv_budget_bytes sizes per
// rank. ranks == 1: unchanged.
EngineConfig rank_share(EngineConfig instance, int ranks);

// Rank `rank`'s disk folder: dir/rank-<rank> for ranks > 1, dir itself for one rank (so a
// one-rank daemon keeps the folder it always used). Empty dir: empty (no disk tier).
std::string rank_disk_dir(const std::string& dir, int rank, int ranks);

// The config rank `rank` builds its TierStorage from (make_tier_storage): the share's
// config with the rank's own disk folder.
EngineConfig rank_tier_config(const EngineConfig& share, int rank, int ranks);

}  // namespace troupe::runtime
