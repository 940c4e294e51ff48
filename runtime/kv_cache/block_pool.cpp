#include "runtime/kv_cache/block_pool.h"

#include <algorithm>
#include <cstring>

#include "kernels/check.h"

namespace troupe::runtime {

BlockPool::BlockPool(int64_t num_blocks, int64_t block_size)
    : block_size_(block_size),
      blocks_(size_t(num_blocks)),
      tokens_(std::make_unique_for_overwrite<int32_t[]>(size_t(num_blocks * block_size))),
      by_hash_(num_blocks) {
  TROUPE_CHECK(num_blocks >= 1 && num_blocks <= INT32_MAX, "num_blocks out of range: ", num_blocks);
  TROUPE_CHECK(block_size >= 1, "block_size must be >= 1, got ", block_size);
  for (int32_t b = 0; b < int32_t(num_blocks); ++b) push_back(b);
}

int64_t BlockPool::take(int64_t n, std::vector<int32_t>& out, std::vector<int32_t>* evicted_ids) {
  if (n > num_in_list_) return -1;
  int64_t evicted = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t b = head_;
    unlink(b);
    if (blocks_[b].hashed) {
      evict(b), ++evicted;
      if (evicted_ids) evicted_ids->push_back(b);
    }
    blocks_[b].ref = 1;
    out.push_back(b);
  }
  return evicted;
}

int32_t BlockPool::lookup(uint64_t hash, uint64_t parent_hash,
                          std::span<const int32_t> tokens) const {
  const int32_t b = by_hash_.find(hash);
  if (b < 0) return -1;
  // The chained hash alone could collide; the parent hash and the tokens pin it down.
  if (blocks_[b].parent_hash != parent_hash || tokens.size() != size_t(block_size_)) return -1;
  if (std::memcmp(tokens_of(b).data(), tokens.data(), tokens.size_bytes()) != 0) return -1;
  return b;
}

int32_t BlockPool::find_hash(uint64_t hash) const {
  return by_hash_.find(hash);
}

void BlockPool::ref(int32_t b) {
  if (blocks_[b].ref++ == 0) unlink(b);
}

void BlockPool::unref(int32_t b) {
  TROUPE_CHECK(blocks_[b].ref > 0, "unref of free block ", b);
  if (--blocks_[b].ref == 0) push_back(b);
}

bool BlockPool::publish(int32_t b, uint64_t hash, uint64_t parent_hash,
                        std::span<const int32_t> tokens) {
  TROUPE_CHECK(blocks_[b].ref > 0 && !blocks_[b].hashed, "publish of block ", b,
               " that is not a used private block");
  TROUPE_CHECK(tokens.size() == size_t(block_size_), "publish needs a full block");
  if (!by_hash_.insert(hash, b)) return false;
  Block& blk = blocks_[b];
  blk.hashed = true, blk.hash = hash, blk.parent_hash = parent_hash;
  std::memcpy(tokens_of(b).data(), tokens.data(), tokens.size_bytes());
  return true;
}

std::vector<int32_t> BlockPool::lru_order() const {
  std::vector<int32_t> order;
  for (int32_t b = head_; b != -1; b = blocks_[b].next) order.push_back(b);
  return order;
}

void BlockPool::check_invariants() const {
  int64_t listed = 0, cached = 0;
  for (int32_t b = head_, prev = -1; b != -1; prev = b, b = blocks_[b].next) {
    TROUPE_CHECK(blocks_[b].ref == 0, "block ", b, " in the free list with ref ", blocks_[b].ref);
    TROUPE_CHECK(blocks_[b].prev == prev, "broken free-list link at block ", b);
    TROUPE_CHECK(++listed <= num_blocks(), "cycle in the free list");
    cached += blocks_[b].hashed;
  }
  int64_t zero = 0;
  for (const Block& blk : blocks_) zero += blk.ref == 0;
  TROUPE_CHECK(listed == zero && listed == num_in_list_, "free list holds ", listed, " blocks, ",
               zero, " have ref 0, counter says ", num_in_list_);
  TROUPE_CHECK(cached == num_cached_in_list_, "cached counter ", num_cached_in_list_, " vs ",
               cached, " in the list");
  int64_t hashed = 0;
  for (const Block& blk : blocks_) hashed += blk.hashed;
  TROUPE_CHECK(hashed == int64_t(by_hash_.size()), "hash map size mismatch");
  by_hash_.for_each([&](uint64_t h, int32_t b) {
    TROUPE_CHECK(blocks_[b].hashed && blocks_[b].hash == h, "stale hash entry for block ", b);
  });
}

void BlockPool::unlink(int32_t b) {
  Block& blk = blocks_[b];
  (blk.prev == -1 ? head_ : blocks_[blk.prev].next) = blk.next;
  (blk.next == -1 ? tail_ : blocks_[blk.next].prev) = blk.prev;
  blk.prev = blk.next = -1;
  --num_in_list_;
  num_cached_in_list_ -= blk.hashed;
}

void BlockPool::push_back(int32_t b) {
  Block& blk = blocks_[b];
  blk.prev = tail_, blk.next = -1;
  (tail_ == -1 ? head_ : blocks_[tail_].next) = b;
  tail_ = b;
  ++num_in_list_;
  num_cached_in_list_ += blk.hashed;
}

void BlockPool::evict(int32_t b) {
  by_hash_.erase(blocks_[b].hash);
  blocks_[b].hashed = false;
}

std::span<int32_t> BlockPool::tokens_of(int32_t b) const {
  return {tokens_.get() + int64_t(b) * block_size_, size_t(block_size_)};
}

}  // namespace troupe::runtime
