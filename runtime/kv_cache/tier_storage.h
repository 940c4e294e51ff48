// The bytes of the host and disk tiers (issue 14), next to the primary PagedKvStorage on
// the rank: host slots in one buffer, disk blocks one file each (runtime/kv_cache/
// block_file.h) in the disk dir. Carries out the TierOps KvTiers decided, in order.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/serving_shape.h"
#include "runtime/kv_cache/block_file.h"
#include "runtime/kv_cache/paged_kv.h"
#include "runtime/kv_cache/tier_op.h"

namespace troupe::runtime {

// What makes a block's bytes mean the same thing: the model's shape, the block layout and
// `mode` (the executor's replay mode and the checkpoint's id: the caller's words). Files
// with another tag are foreign.
uint64_t kv_disk_model_tag(const model::ServingShape& m, int64_t block_size, int64_t block_bytes,
                           std::string_view mode);

// The disk tier's file of a block, read and checked: the header of dir/<hash>.kvb must be
// this geometry's, its checksum good and its block this one (hash, parent, tokens). False
// with a log line otherwise (a miss). Safe beside a rank writing the dir: files appear by
// rename, whole.
// snapshot: the file's window snapshot section (empty when it has none).
bool read_block_file(const std::string& dir, const BlockFileGeometry& g, uint64_t hash,
                     uint64_t parent_hash, std::span<const int32_t> tokens,
                     std::vector<uint8_t>& payload, std::vector<uint8_t>& snapshot);
std::string block_file_path(const std::string& dir, uint64_t hash);

// Creates the disk tier's folder (and parents) if missing; throws troupe::Error naming it
// if it cannot (a start-up check, before any allocation).
void ensure_disk_dir(const std::string& dir);

class TierStorage {
 public:
  // disk_dir empty: no disk tier. Creates the dir; throws troupe::Error if it cannot.
  // host_snapshots: window snapshot slots on host, of geometry.snapshot_bytes each.
  TierStorage(int64_t host_slots, const BlockFileGeometry& geometry, std::string disk_dir,
              int64_t host_snapshots = 0);

  // Runs `ops` in order against `primary`. Disk loads carry their checked bytes (the
  // find read them), so nothing here reads a file. A disk write or delete that fails is
  // logged; the block is then missing on disk and a later find reads that as a miss.
  void apply(std::span<const TierOp> ops, PagedKvStorage& primary);

  // Start-up: the header of every intact block file of this geometry in the disk dir,
  // oldest first (by modification time). Corrupt, truncated, foreign and misnamed files
  // are skipped with a log line and left in place.
  std::vector<BlockFileHeader> scan_disk() const;

  const BlockFileGeometry& geometry() const { return geometry_; }
  const std::string& disk_dir() const { return disk_dir_; }
  std::span<uint8_t> host_slot(int32_t slot);
  std::span<uint8_t> host_snapshot(int32_t slot);

 private:
  // The file of op.hash with these rows; a Spill's snapshot comes from its host snapshot.
  void write_file(const TierOp& op, std::span<const uint8_t> payload,
                  std::span<const uint8_t> snapshot);

  BlockFileGeometry geometry_;
  std::string disk_dir_;
  std::vector<uint8_t> host_;            // [host_slots, block_bytes]
  std::vector<uint8_t> host_snapshots_;  // [host_snapshots, snapshot_bytes]
};

}  // namespace troupe::runtime
