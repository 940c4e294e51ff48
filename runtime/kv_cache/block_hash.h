// Chained 64-bit hash of one full KV block: hash(parent hash, the block's token ids).
// Chaining makes a block's hash name the whole prefix up to its end. Not cryptographic:
// hits are verified against stored token ids (BlockPool::lookup), so a collision costs a
// miss, never a wrong answer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace troupe::runtime {

// Parent hash of a request's first block.
inline constexpr uint64_t kRootBlockHash = 0x9e3779b97f4a7c15ull;

// Signature of a block hash; KvCacheConfig::hash_fn lets tests force collisions.
using BlockHashFn = uint64_t (*)(uint64_t parent, std::span<const int32_t> tokens);

// xxHash64-style: four independent multiply-rotate lanes over 32-byte stripes (so the
// multiplies overlap), then a final avalanche. ~10 GB/s: 855K tokens hash in ~0.3 ms.
uint64_t block_hash(uint64_t parent, std::span<const int32_t> tokens);

// The same hash over any bytes (block_hash is hash_bytes of the token ids' bytes); the
// checksum of a disk tier file (runtime/kv_cache/block_file.h).
uint64_t hash_bytes(uint64_t seed, std::span<const std::byte> bytes);

}  // namespace troupe::runtime
