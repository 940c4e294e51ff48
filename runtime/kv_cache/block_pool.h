// The pool of global KV block ids: ref counts, the LRU list of ref-0 blocks (never used
// and cached alike; the head is handed out / evicted first) and the hash -> block map of
// the prefix cache. Every block is in exactly one state:
//
//   free    ref 0, not hashed    in LRU list
//   cached  ref 0, hashed        in LRU list, findable by hash (evicted when handed out)
//   used    ref > 0              not in list (may also be hashed: shared prefix)
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "runtime/kv_cache/block_hash_map.h"

namespace troupe::runtime {

class BlockPool {
 public:
  BlockPool(int64_t num_blocks, int64_t block_size);

  // Appends n blocks (ref 1) from the LRU head to `out`, evicting cached ones; returns
  // the number evicted, or -1 (and changes nothing) if fewer than n blocks are free.
  // evicted_ids, when given, gets the ids of the cached blocks evicted (their snapshots go).
  int64_t take(int64_t n, std::vector<int32_t>& out, std::vector<int32_t>* evicted_ids = nullptr);
  // A cached block with this hash whose parent hash and tokens match, or -1.
  int32_t lookup(uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens) const;
  // The block published under `hash` (a request's own hash names it even when its copy
  // stayed private), or -1. Unverified: for hashes a request computed over its own tokens.
  int32_t find_hash(uint64_t hash) const;
  void ref(int32_t block);    // a hit on a cached ref-0 block takes it off the LRU list
  void unref(int32_t block);  // ref 0: to the LRU tail (most recently used)
  // Makes a full used block findable. False if the hash is taken (another request
  // computed the same prefix first); the block then stays private and is freed as such.
  bool publish(int32_t block, uint64_t hash, uint64_t parent_hash, std::span<const int32_t> tokens);

  int32_t ref_count(int32_t block) const { return blocks_[block].ref; }
  // A hashed block's hash, parent hash and token ids; still there right after take()
  // evicted it (until it is published again), so the evicted block can move to a tier.
  uint64_t hash_of(int32_t block) const { return blocks_[block].hash; }
  uint64_t parent_hash_of(int32_t block) const { return blocks_[block].parent_hash; }
  std::span<const int32_t> stored_tokens(int32_t block) const { return tokens_of(block); }
  bool is_hashed(int32_t block) const { return blocks_[block].hashed; }
  int64_t num_blocks() const { return int64_t(blocks_.size()); }
  int64_t num_free() const { return num_in_list_; }                // free + cached
  int64_t num_cached_free() const { return num_cached_in_list_; }  // cached
  int64_t num_used() const { return num_blocks() - num_in_list_; }
  std::vector<int32_t> lru_order() const;  // head (next out) first; for tests

  void check_invariants() const;  // list/ref/hash consistency; throws troupe::Error

 private:
  struct Block {
    int32_t ref = 0;
    bool hashed = false;
    int32_t prev = -1, next = -1;  // LRU links while ref == 0
    uint64_t hash = 0, parent_hash = 0;
  };
  void unlink(int32_t b);
  void push_back(int32_t b);
  void evict(int32_t b);  // drop a cached block's hash entry
  std::span<int32_t> tokens_of(int32_t b) const;

  int64_t block_size_;
  std::vector<Block> blocks_;
  // Token ids of hashed blocks for hit verification, [num_blocks * block_size]; pages are
  // untouched until a block is first published.
  std::unique_ptr<int32_t[]> tokens_;
  BlockHashMap by_hash_;  // at most one entry per block
  int32_t head_ = -1, tail_ = -1;
  int64_t num_in_list_ = 0, num_cached_in_list_ = 0;
};

}  // namespace troupe::runtime
