#include "runtime/kv_cache/kv_cache_config.h"

#include <cmath>

#include "kernels/check.h"

namespace troupe::runtime {

void KvCacheConfig::validate() const {
  TROUPE_CHECK(block_size >= 1, "KvCacheConfig.block_size must be >= 1, got ", block_size);
  TROUPE_CHECK(num_blocks >= 1 && num_blocks <= INT32_MAX,
               "KvCacheConfig.num_blocks must be in [1, 2^31), got ", num_blocks);
  TROUPE_CHECK(swa_slots >= 1 && swa_slots <= INT32_MAX,
               "KvCacheConfig.swa_slots must be in [1, 2^31), got ", swa_slots);
  TROUPE_CHECK(window >= 0, "KvCacheConfig.window must be >= 0, got ", window);
  TROUPE_CHECK(tail_tokens >= -1, "KvCacheConfig.tail_tokens must be >= -1, got ", tail_tokens);
  TROUPE_CHECK(snapshot_slots >= 0 && snapshot_slots <= INT32_MAX - swa_slots,
               "KvCacheConfig.snapshot_slots must be in [0, 2^31 - swa_slots), got ", snapshot_slots);
  TROUPE_CHECK(host_blocks >= 0 && host_blocks <= INT32_MAX,
               "KvCacheConfig.host_blocks must be in [0, 2^31), got ", host_blocks);
  TROUPE_CHECK(disk_blocks >= 0 && disk_blocks <= INT32_MAX,
               "KvCacheConfig.disk_blocks must be in [0, 2^31), got ", disk_blocks);
  // The disk tier is fed by host slots being reused (kv_tiers.h).
  TROUPE_CHECK(host_snapshots >= 0 && disk_snapshots >= 0 && tier_snapshot_bytes >= 0,
               "KvCacheConfig: tier snapshot counts and bytes must be >= 0");
  TROUPE_CHECK(disk_blocks == 0 || host_blocks >= 1,
               "KvCacheConfig: a disk tier needs a host tier (host_blocks >= 1)");
}

KvCacheBudget plan_kv_budget(const model::ServingShape& m, int64_t budget_bytes, int64_t max_running,
                             int64_t block_size, int64_t snapshot_slots) {
  TROUPE_CHECK(max_running >= 1, "max_running must be >= 1, got ", max_running);
  TROUPE_CHECK(snapshot_slots >= 0, "snapshot_slots must be >= 0, got ", snapshot_slots);
  TROUPE_CHECK(block_size >= 1, "block_size must be >= 1, got ", block_size);
  for (int64_t r : m.ratio)
    TROUPE_CHECK(r <= 1 || block_size % r == 0, "block_size ", block_size,
                 " must be a multiple of every compress ratio (", r, ")");
  KvCacheBudget b;
  b.kv_bytes_per_token = m.kv_bytes_per_token;
  b.bytes_per_block = int64_t(std::ceil(double(block_size) * b.kv_bytes_per_token));
  const model::RequestState& s = m.request_state;
  b.request_state_bytes = s.swa_bytes + s.dspark_bytes + s.compressor_bytes;
  // A snapshot holds what PagedKvStorage::copy_slot copies: rings and carry (no DSpark
  // state: the paged engine keeps none yet).
  b.snapshot_bytes = s.swa_bytes + s.compressor_bytes;
  b.snapshot_slots = snapshot_slots;
  b.reserved_bytes = max_running * b.request_state_bytes + snapshot_slots * b.snapshot_bytes;
  TROUPE_CHECK(b.bytes_per_block > 0, "model has no global KV (no Full layer)");
  const int64_t left = budget_bytes - b.reserved_bytes;
  b.num_blocks = left > 0 ? left / b.bytes_per_block : 0;
  // The smallest budget that works: the reserved state plus one block per request.
  TROUPE_CHECK(b.num_blocks >= max_running, "KV budget of ", budget_bytes, " bytes leaves ",
               b.num_blocks, " blocks of ", b.bytes_per_block, " bytes after reserving ",
               b.reserved_bytes, " bytes of per-request state (", b.request_state_bytes,
               " each) for ", max_running, " requests; need one block per request: at least ",
               b.reserved_bytes + max_running * b.bytes_per_block,
               " bytes, or fewer requests at once");
  return b;
}

KvCacheConfig kv_cache_config_for(const model::ServingShape& m, int64_t budget_bytes,
                                  int64_t max_running, int64_t block_size, int64_t snapshot_slots) {
  const KvCacheBudget b = plan_kv_budget(m, budget_bytes, max_running, block_size, snapshot_slots);
  KvCacheConfig c;
  c.block_size = block_size;
  c.num_blocks = b.num_blocks;
  c.swa_slots = max_running;
  c.snapshot_slots = snapshot_slots;
  c.window = m.window;
  c.validate();
  return c;
}

}  // namespace troupe::runtime
