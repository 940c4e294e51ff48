// Engine-side sizing of the KV cache: how many global KV blocks and SWA ring slots a
// memory budget buys (MODEL.md §4 bytes via model/footprint.h). Runtime parameters, kept
// apart from the checkpoint's ModelConfig.
#pragma once

#include <cstdint>

#include "model/serving_shape.h"
#include "runtime/kv_cache/block_hash.h"

namespace troupe::runtime {

struct KvCacheConfig {
  int64_t block_size = 64;  // tokens per block; a multiple of every compress ratio
  int64_t num_blocks = 0;   // global KV blocks in the pool, >= 1
  int64_t swa_slots = 1;    // SWA rings = most requests admitted at once, >= 1
  int64_t window = 0;       // tokens replayed before the replay anchor (§6: W = R_enc), >= 0
  // The replay anchor: the hit boundary B when < 0, else min(B, E_prompt - tail_tokens),
  // so the replay also rebuilds the windows the prompt's decoder tail reads (an exact
  // replay under bounded replay sets this to R; runtime/executor/executor.h).
  int64_t tail_tokens = -1;
  bool enable_prefix_cache = true;
  // SWA window snapshots (runtime/kv_cache/snapshot_table.h): slots for the rings and
  // carry of a request at a block boundary, kept with that block in the prefix cache so a
  // hit exactly there restores them and replays nothing. 0: off. Their storage slots
  // follow the swa_slots ring slots: ids [swa_slots, swa_slots + snapshot_slots).
  int64_t snapshot_slots = 0;
  // Host and disk tiers (runtime/kv_cache/kv_tiers.h): blocks the host tier holds (evicted
  // primary blocks are copied there; 0: off, evicted blocks are lost) and blocks the disk
  // tier holds (fed from the host tier; 0: off; needs host_blocks >= 1).
  int64_t host_blocks = 0;
  int64_t disk_blocks = 0;
  // Of those, how many may carry a window snapshot (moved with its block; needs
  // snapshot_slots > 0), and a snapshot's bytes as the tiers and saved prefixes hold it
  // (for the figures).
  int64_t host_snapshots = 0;
  int64_t disk_snapshots = 0;
  int64_t tier_snapshot_bytes = 0;
  int64_t block_bytes = 0;  // bytes of one block's rows, for the bytes-per-tier figures
                            // (0: unknown, they read 0)
  // KV save (docs/kv-cache.md "Saved prefixes"): blocks saved prefixes may pin at most
  // (kv-pinned-bytes / block bytes); 0: saves are refused.
  int64_t pinned_blocks = 0;
  BlockHashFn hash_fn = nullptr;  // nullptr: block_hash. Tests only (forced collisions).

  void validate() const;  // throws troupe::Error naming the bad field
  // Slots PagedKvStorage holds: the rings of running requests, then the snapshots.
  int64_t storage_slots() const { return swa_slots + snapshot_slots; }
};

// The split of a memory budget. SWA rings (+ compressor carry + DSpark rings) of
// max_running requests are reserved first, statically: a request that got a ring slot
// can always be admitted as far as its window goes, and the SWA side never competes with
// (or evicts) cached prefix blocks. The rest is global KV blocks.
struct KvCacheBudget {
  double kv_bytes_per_token = 0;    // global KV, all Full layers (§4, 890 for full)
  int64_t bytes_per_block = 0;      // ceil(block_size * kv_bytes_per_token)
  int64_t request_state_bytes = 0;  // SWA rings + compressor carry + DSpark, per request
  int64_t snapshot_bytes = 0;       // SWA rings + compressor carry: one window snapshot
  int64_t snapshot_slots = 0;       // window snapshots reserved
  int64_t reserved_bytes = 0;       // max_running * request_state_bytes + snapshots
  int64_t num_blocks = 0;           // (budget - reserved) / bytes_per_block
};

// Throws if the budget does not cover the reservation and at least one block per request,
// or if block_size is not a multiple of every compress ratio (hit boundaries must close
// every compressor group so no open-group carry needs caching). Window snapshots are
// reserved like the rings (snapshot_slots * snapshot_bytes), so they come out of the
// global KV blocks the budget would otherwise buy.
KvCacheBudget plan_kv_budget(const model::ServingShape& m, int64_t budget_bytes, int64_t max_running,
                             int64_t block_size = 64, int64_t snapshot_slots = 0);
KvCacheConfig kv_cache_config_for(const model::ServingShape& m, int64_t budget_bytes,
                                  int64_t max_running, int64_t block_size = 64,
                                  int64_t snapshot_slots = 0);

}  // namespace troupe::runtime
