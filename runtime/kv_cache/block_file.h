// The file of one block in the disk tier (docs/kv-cache.md "Host and disk tiers"). One of
// two fixed sizes (with or without a window snapshot), little-endian, checked as a whole
// before a byte of it is used:
//
//   offset        size            field
//   0             8               magic "TRPKVB" 0 2 (format version 2; version 1 files,
//                                 which had no snapshot field, are rejected as foreign)
//   8             8               model_tag   (model, block layout and executor mode: a
//                                 file of another model or mode is foreign)
//   16            8               block_size  (tokens)
//   24            8               block_bytes (payload)
//   32            8               snapshot_bytes: 0 (no snapshot) or the geometry's
//   40            8               hash        (the block's chained hash: the file's name)
//   48            8               parent_hash (the chain: the block before it)
//   56            4·block_size    token ids
//   56 + 4·bs     block_bytes     payload: the block's rows, as PagedKvStorage holds them
//   ...           snapshot_bytes  the window snapshot at the block's end boundary
//                                 (PagedKvStorage::save_snapshot), if any
//   end - 8       8               checksum: hash_bytes over everything before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace troupe::runtime {

// What a file must match to be one of ours.
struct BlockFileGeometry {
  uint64_t model_tag = 0;
  int64_t block_size = 0;
  int64_t block_bytes = 0;
  int64_t snapshot_bytes = 0;  // a snapshot section's size (0: files never carry one)
  int64_t file_bytes(bool with_snapshot = false) const {
    return 64 + 4 * block_size + block_bytes + (with_snapshot ? snapshot_bytes : 0);
  }
};

struct BlockFileHeader {
  uint64_t hash = 0, parent_hash = 0;
  std::vector<int32_t> tokens;  // [block_size]
  bool has_snapshot = false;
};

// snapshot: empty (none) or [g.snapshot_bytes].
std::vector<std::byte> encode_block_file(const BlockFileGeometry& g, const BlockFileHeader& h,
                                         std::span<const std::byte> payload,
                                         std::span<const std::byte> snapshot = {});

// The header of `file` if it is a whole, intact block file of geometry g whose tokens
// hash (block_hash) to its hash over its parent hash, else nullopt with *why saying what
// is wrong. Never throws on any input. payload_out, when not empty ([block_bytes]), gets
// the payload; snapshot_out, when not null, gets the snapshot section (emptied if the
// file has none). Callers still compare the header with the block they expect.
std::optional<BlockFileHeader> parse_block_file(std::span<const std::byte> file,
                                                const BlockFileGeometry& g, std::string* why,
                                                std::span<std::byte> payload_out = {},
                                                std::vector<std::byte>* snapshot_out = nullptr);

// "<hash as 16 hex digits>.kvb"
std::string block_file_name(uint64_t hash);

}  // namespace troupe::runtime
