// The file of one block in the disk tier (docs/kv-cache.md "Host and disk tiers"). Fixed
// size, little-endian, checked as a whole before a byte of it is used:
//
//   offset        size          field
//   0             8             magic "TRPKVB" 0 1 (format version 1)
//   8             8             model_tag   (model, block layout and executor mode: a
//                               file of another model or mode is foreign)
//   16            8             block_size  (tokens)
//   24            8             block_bytes (payload)
//   32            8             hash        (the block's chained hash: the file's name)
//   40            8             parent_hash (the chain: the block before it)
//   48            4·block_size  token ids
//   48 + 4·bs     block_bytes   payload: the block's rows, as PagedKvStorage holds them
//   end - 8       8             checksum: hash_bytes over everything before it
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
  int64_t file_bytes() const { return 56 + 4 * block_size + block_bytes; }
};

struct BlockFileHeader {
  uint64_t hash = 0, parent_hash = 0;
  std::vector<int32_t> tokens;  // [block_size]
};

std::vector<std::byte> encode_block_file(const BlockFileGeometry& g, const BlockFileHeader& h,
                                         std::span<const std::byte> payload);

// The header of `file` if it is a whole, intact block file of geometry g whose tokens
// hash (block_hash) to its hash over its parent hash, else nullopt with *why saying what
// is wrong. Never throws on any input. payload_out, when not empty ([block_bytes]), gets
// the payload. Callers still compare the header with the block they expect.
std::optional<BlockFileHeader> parse_block_file(std::span<const std::byte> file,
                                                const BlockFileGeometry& g, std::string* why,
                                                std::span<std::byte> payload_out = {});

// "<hash as 16 hex digits>.kvb"
std::string block_file_name(uint64_t hash);

}  // namespace troupe::runtime
