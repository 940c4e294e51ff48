#include "runtime/kv_cache/kv_cache_manager.h"

#include <algorithm>

#include "kernels/check.h"

namespace troupe::runtime {
namespace {

const KvCacheConfig& validated(const KvCacheConfig& c) {
  c.validate();
  return c;
}

}  // namespace

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : config_(validated(config)), pool_(config.num_blocks, config.block_size) {
  if (!config_.hash_fn) config_.hash_fn = block_hash;
  // Popped from the back: slot 0 is handed out first.
  for (int64_t s = config_.swa_slots - 1; s >= 0; --s) free_slots_.push_back(int32_t(s));
  if (config_.snapshot_slots > 0 && config_.enable_prefix_cache)
    snapshots_ = std::make_unique<SnapshotTable>(config_.snapshot_slots, int32_t(config_.swa_slots));
  if (config_.host_blocks > 0 && config_.enable_prefix_cache)
    tiers_ = std::make_unique<KvTiers>(config_.host_blocks, config_.disk_blocks, config_.block_size,
                                       snapshots_ ? config_.host_snapshots : 0,
                                       snapshots_ ? config_.disk_snapshots : 0);
}

CachedPrefix KvCacheManager::find_cached_prefix(std::span<const int32_t> tokens,
                                                bool has_window, int64_t num_prompt_tokens) const {
  CachedPrefix hit;
  hit.epoch = epoch_;
  hit.num_query_tokens = int64_t(tokens.size());
  if (!config_.enable_prefix_cache) return hit;
  const int64_t bs = config_.block_size;
  hash_blocks(tokens, int64_t(tokens.size()) / bs, hit.hashes);
  // Leave at least one token to compute: the step that ends the prompt needs its logits.
  const int64_t max_blocks = tokens.empty() ? 0 : (int64_t(tokens.size()) - 1) / bs;
  hit.blocks.reserve(size_t(max_blocks));
  for (int64_t i = 0; i < max_blocks; ++i) {
    const uint64_t parent = i ? hit.hashes[i - 1] : kRootBlockHash;
    const auto block_tokens = tokens.subspan(i * bs, bs);
    const int32_t b = pool_.lookup(hit.hashes[i], parent, block_tokens);
    // Not in the primary pool: a lower tier may hold it.
    if (b < 0 && !find_in_tiers(hit, i, parent, block_tokens)) break;
    hit.blocks.push_back(b);
  }
  hit.num_tokens = int64_t(hit.blocks.size()) * bs;
  int64_t anchor = hit.num_tokens;
  if (config_.tail_tokens >= 0) {
    const int64_t E = num_prompt_tokens >= 0 ? num_prompt_tokens : int64_t(tokens.size());
    anchor = std::min(anchor, E - config_.tail_tokens);
  }
  hit.replay_from = has_window ? hit.num_tokens : std::max<int64_t>(0, anchor - config_.window);
  // A snapshot at B: in the primary tier with B's block, else with its lower-tier copy.
  if (snapshots_ && !has_window && !hit.blocks.empty()) {
    if (hit.blocks.back() >= 0) hit.snapshot_slot = snapshots_->find(hit.blocks.back(), hit.num_tokens);
    if (hit.snapshot_slot < 0) find_tier_snapshot(hit, tokens);
    if (hit.snapshot_slot >= 0 || hit.tier_snapshot) hit.replay_from = hit.num_tokens;
  }
  return hit;
}

int64_t KvCacheManager::cached_prefix_tokens(std::span<const int32_t> tokens) const {
  if (!config_.enable_prefix_cache || tokens.empty()) return 0;
  const int64_t bs = config_.block_size;
  const int64_t max_blocks = (int64_t(tokens.size()) - 1) / bs;  // as find_cached_prefix
  std::vector<uint64_t> hashes;
  hash_blocks(tokens, max_blocks, hashes);
  int64_t i = 0;
  for (; i < max_blocks; ++i) {
    const uint64_t parent = i ? hashes[size_t(i - 1)] : kRootBlockHash;
    const auto block_tokens = tokens.subspan(size_t(i * bs), size_t(bs));
    if (pool_.lookup(hashes[size_t(i)], parent, block_tokens) < 0 &&
        !(tiers_ && tiers_->holds(hashes[size_t(i)], parent, block_tokens)))
      break;
  }
  return i * bs;
}

bool KvCacheManager::read_disk(CachedPrefix& hit, int64_t i, int32_t slot,
                               std::span<const int32_t> tokens, std::vector<uint8_t>& payload,
                               std::vector<uint8_t>& snapshot) const {
  const uint64_t parent = i ? hit.hashes[size_t(i - 1)] : kRootBlockHash;
  if (disk_reader_ && disk_reader_(hit.hashes[size_t(i)], parent, tokens, payload, snapshot))
    return true;
  tiers_->drop_disk(slot);
  hit.epoch = ++epoch_;
  return false;
}

bool KvCacheManager::find_in_tiers(CachedPrefix& hit, int64_t i, uint64_t parent,
                                   std::span<const int32_t> tokens) const {
  if (!tiers_) return false;
  const std::optional<TierSource> src = tiers_->find(hit.hashes[size_t(i)], parent, tokens);
  if (!src) return false;
  TierFetch f{i, *src, {}, {}};
  // A disk block is read and checked now, so a bad file is a miss, never a wrong row.
  if (src->tier == KvTier::Disk && !read_disk(hit, i, src->slot, tokens, f.payload, f.snapshot))
    return false;
  hit.fetches.push_back(std::move(f));
  return true;
}

void KvCacheManager::find_tier_snapshot(CachedPrefix& hit, std::span<const int32_t> tokens) const {
  if (!tiers_) return;
  const int64_t k = int64_t(hit.blocks.size()) - 1, bs = config_.block_size;
  const auto block_tokens = tokens.subspan(size_t(k * bs), size_t(bs));
  const uint64_t parent = k ? hit.hashes[size_t(k - 1)] : kRootBlockHash;
  const std::optional<TierSource> src = tiers_->find_snapshot(hit.hashes[size_t(k)], parent, block_tokens);
  if (!src) return;
  if (src->tier == KvTier::Disk) {
    // The last block came from this very file: its snapshot was read with it.
    if (!hit.fetches.empty() && hit.fetches.back().index == k &&
        hit.fetches.back().src.tier == KvTier::Disk) {
      hit.tier_snapshot_bytes = std::move(hit.fetches.back().snapshot);
    } else {
      std::vector<uint8_t> payload;
      // A bad file here only costs the snapshot: the block the hit holds is elsewhere.
      if (!read_disk(hit, k, src->slot, block_tokens, payload, hit.tier_snapshot_bytes)) return;
    }
    if (hit.tier_snapshot_bytes.empty()) return;  // the file has none (rewritten since)
  }
  hit.tier_snapshot = src;
}

std::optional<Admission> KvCacheManager::admit(RequestId id, CachedPrefix prefix,
                                               int64_t total_tokens) {
  TROUPE_CHECK(!contains(id), "admit: request ", id, " is already admitted");
  TROUPE_CHECK(total_tokens >= 0, "admit: total_tokens must be >= 0, got ", total_tokens);
  TROUPE_CHECK(prefix.epoch == epoch_,
               "admit: prefix is stale (blocks were evicted since find_cached_prefix)");
  if (free_slots_.empty()) return std::nullopt;
  const int64_t num_hit = int64_t(prefix.blocks.size());
  const int64_t num_fetch = int64_t(prefix.fetches.size());
  // Fresh blocks: the table past the hit, and one for each hit block a lower tier holds.
  const int64_t need =
      blocks_for(std::max(total_tokens, prefix.num_tokens)) - num_hit + num_fetch;
  // Hit blocks with ref 0 sit in the free list: taking them shrinks what is left.
  int64_t hit_free = 0;
  for (int32_t b : prefix.blocks) hit_free += b >= 0 && pool_.ref_count(b) == 0;
  if (need > pool_.num_free() - hit_free) return std::nullopt;

  // The ring slot this request gets; a snapshot from a lower tier is restored into it by
  // an op ahead of the ones the take below causes (they may reuse its host slot).
  const int32_t swa_slot = free_slots_.back();
  if (prefix.tier_snapshot)
    tiers_->load_snapshot(*prefix.tier_snapshot, swa_slot, std::move(prefix.tier_snapshot_bytes));
  RequestBlocks& r = requests_[id];
  r.table = std::move(prefix.blocks);
  r.table.reserve(size_t(num_hit - num_fetch + need));
  for (int32_t b : r.table)
    if (b >= 0) pool_.ref(b);
  if (num_fetch == 0) {
    TROUPE_CHECK(take_blocks(need, r.table) >= 0, "admit: pool lost blocks between check and take");
  } else {
    std::vector<int32_t> fresh;
    fetch_from_tiers(prefix, need, r.table, fresh);
    r.table.insert(r.table.end(), fresh.begin() + num_fetch, fresh.end());
  }
  r.hashes = std::move(prefix.hashes);
  r.num_committed = num_hit;
  r.swa_slot = swa_slot;
  free_slots_.pop_back();

  const int32_t restore = prefix.tier_snapshot ? swa_slot : prefix.snapshot_slot;
  const Admission adm{prefix.num_tokens, prefix.replay_from, r.swa_slot, restore};
  if (prefix.snapshot_slot >= 0) snapshots_->touch(r.table[size_t(num_hit - 1)]);
  if (prefix.tier_snapshot) ++stats_.tier_snapshot_hits[int(prefix.tier_snapshot->tier)];
  else if (prefix.snapshot_slot >= 0) ++stats_.tier_snapshot_hits[int(KvTier::Primary)];
  count_hit(prefix, num_hit);  // prefix.blocks moved into the table
  stats_.snapshot_hits += adm.restore_slot >= 0;
  stats_.replay_hits += num_hit > 0 && adm.restore_slot < 0;
  stats_.replay_tokens += adm.num_replay_tokens();
  return adm;
}

// Takes the `need` fresh blocks admit() needs into `fresh`; its first fetches.size() become the
// hit blocks lower tiers bring back (the loads run after the saves the take caused, in op
// order), published at once: later plans run after this one's loads.
void KvCacheManager::fetch_from_tiers(CachedPrefix& prefix, int64_t need,
                                      std::vector<int32_t>& table, std::vector<int32_t>& fresh) {
  // The saves this take causes must not reuse the slots (or files) the loads read.
  for (const TierFetch& f : prefix.fetches) tiers_->pin(f.src);
  const int64_t evicted = take_blocks(need, fresh);
  TROUPE_CHECK(evicted >= 0, "admit: pool lost blocks between check and take");
  for (size_t k = 0; k < prefix.fetches.size(); ++k) {
    TierFetch& f = prefix.fetches[k];
    const int32_t b = fresh[k];
    table[size_t(f.index)] = b;
    tiers_->load(f.src, b, std::move(f.payload));
    const uint64_t parent = f.index ? prefix.hashes[size_t(f.index - 1)] : kRootBlockHash;
    pool_.publish(b, prefix.hashes[size_t(f.index)], parent, tiers_->tokens_of(f.src));
    tiers_->unpin(f.src);
  }
}

void KvCacheManager::count_hit(const CachedPrefix& prefix, int64_t num_hit) {
  int64_t blocks[kNumKvTiers] = {num_hit, 0, 0};
  for (const TierFetch& f : prefix.fetches) ++blocks[int(f.src.tier)], --blocks[0];
  for (int t = 0; t < kNumKvTiers; ++t) {
    stats_.tier_hits[t] += blocks[t] > 0;
    stats_.tier_hit_tokens[t] += blocks[t] * config_.block_size;
  }
  stats_.admissions += 1;
  stats_.prefix_hits += num_hit > 0;
  stats_.query_tokens += prefix.num_query_tokens;
  stats_.hit_tokens += prefix.num_tokens;
}

std::vector<TierOp> KvCacheManager::take_tier_ops() {
  return tiers_ ? tiers_->take_ops() : std::vector<TierOp>{};
}

int64_t KvCacheManager::adopt_disk_blocks(std::span<const BlockFileHeader> blocks) {
  if (!tiers_) return 0;
  int64_t adopted = 0;
  for (const BlockFileHeader& h : blocks)
    if (int64_t(h.tokens.size()) == config_.block_size)
      adopted += tiers_->adopt_disk_block(h.hash, h.parent_hash, h.tokens, h.has_snapshot);
  ++epoch_;
  return adopted;
}

bool KvCacheManager::allocate(RequestId id, int64_t total_tokens) {
  RequestBlocks& r = request(id);
  const int64_t need = blocks_for(total_tokens) - int64_t(r.table.size());
  if (need <= 0) return true;
  if (need > pool_.num_free()) return false;
  // Geometric reserve keeps growth by one block per decode step amortized O(1).
  if (r.table.capacity() < r.table.size() + size_t(need))
    r.table.reserve(std::max(r.table.size() + size_t(need), 2 * r.table.capacity()));
  take_blocks(need, r.table);
  return true;
}

void KvCacheManager::reserve(RequestId id, int64_t max_tokens) {
  RequestBlocks& r = request(id);
  r.table.reserve(size_t(blocks_for(max_tokens)));
  r.hashes.reserve(size_t(max_tokens / config_.block_size));
}

void KvCacheManager::commit_full_blocks(RequestId id, std::span<const int32_t> tokens,
                                        int64_t num_computed) {
  RequestBlocks& r = request(id);
  const int64_t bs = config_.block_size;
  TROUPE_CHECK(num_computed >= 0 && num_computed <= int64_t(tokens.size()),
               "commit_full_blocks: num_computed ", num_computed, " outside [0, ", tokens.size(),
               "]");
  TROUPE_CHECK(num_computed <= int64_t(r.table.size()) * bs, "commit_full_blocks: ", num_computed,
               " tokens computed but the table covers ", r.table.size() * bs);
  const int64_t num_full = num_computed / bs;
  if (num_full <= r.num_committed) return;
  if (config_.enable_prefix_cache) {
    hash_blocks(tokens, num_full, r.hashes);
    for (int64_t i = r.num_committed; i < num_full; ++i) {
      const uint64_t parent = i ? r.hashes[i - 1] : kRootBlockHash;
      // A taken hash means another request published this prefix first: ours stays private.
      pool_.publish(r.table[i], r.hashes[i], parent, tokens.subspan(i * bs, bs));
    }
  }
  r.num_committed = num_full;
}

std::optional<Fork> KvCacheManager::fork(RequestId parent, RequestId child, int64_t num_tokens) {
  TROUPE_CHECK(!contains(child), "fork: request ", child, " is already admitted");
  const RequestBlocks& p = request(parent);
  TROUPE_CHECK(num_tokens > 0 && blocks_for(num_tokens) <= int64_t(p.table.size()),
               "fork: num_tokens ", num_tokens, " is outside request ", parent, "'s ",
               p.table.size(), " blocks");
  const int64_t num_full = num_tokens / config_.block_size;
  const bool partial = num_tokens % config_.block_size != 0;
  if (free_slots_.empty() || (partial && pool_.num_free() < 1)) return std::nullopt;

  RequestBlocks c;
  c.table.assign(p.table.begin(), p.table.begin() + num_full);
  for (int32_t b : c.table) pool_.ref(b);
  Fork f;
  if (partial) {
    take_blocks(1, c.table);
    f.src_block = p.table[size_t(num_full)];
    f.dst_block = c.table.back();
  }
  const int64_t num_hashes = std::min<int64_t>(num_full, int64_t(p.hashes.size()));
  c.hashes.assign(p.hashes.begin(), p.hashes.begin() + num_hashes);
  c.num_committed = num_full;  // the parent publishes the shared blocks
  c.swa_slot = f.swa_slot = free_slots_.back();
  free_slots_.pop_back();
  requests_.emplace(child, std::move(c));
  return f;
}

int32_t KvCacheManager::snapshot_slot_for(RequestId id) {
  request(id);  // known
  if (!snapshots_) return -1;
  bool evicted = false;
  const int32_t slot = snapshots_->writer_slot(id, &evicted);
  if (evicted) {
    ++stats_.snapshots_evicted;
    ++epoch_;  // a CachedPrefix may name the dropped snapshot
  }
  return slot;
}

void KvCacheManager::note_snapshot(RequestId id, int64_t boundary) {
  TROUPE_CHECK(boundary > 0 && boundary % config_.block_size == 0, "note_snapshot: ", boundary,
               " is not a block boundary");
  if (snapshots_) snapshots_->note_written(id, boundary);
}

void KvCacheManager::free(RequestId id, bool keep_snapshot) {
  const auto it = requests_.find(id);
  if (it == requests_.end()) return;
  if (snapshots_) {
    // The block that ends at the snapshot's boundary, if it is in the cache: ours, or the
    // copy another request published first (same tokens, same hash).
    const int64_t boundary = snapshots_->written_boundary(id);
    const int64_t k = boundary / config_.block_size - 1;
    const RequestBlocks& r = it->second;
    int32_t block = -1;
    if (keep_snapshot && k >= 0 && k < r.num_committed && k < int64_t(r.hashes.size()))
      block = pool_.find_hash(r.hashes[size_t(k)]);
    snapshots_->release(id, block);
    stats_.snapshots_kept += block >= 0;
    if (block >= 0 && pinning_.count(id)) finish_pin(id, block);
  }
  if (pinning_.count(id)) finish_pin(id, -1);
  // Tail first, so a request's last blocks are evicted before its first ones: the
  // prefix (shared by more future requests) outlives its extensions.
  for (auto b = it->second.table.rbegin(); b != it->second.table.rend(); ++b) pool_.unref(*b);
  free_slots_.push_back(it->second.swa_slot);
  requests_.erase(it);
}

std::span<const int32_t> KvCacheManager::block_table(RequestId id) const {
  return request(id).table;
}

int32_t KvCacheManager::swa_slot(RequestId id) const {
  return request(id).swa_slot;
}

int64_t KvCacheManager::blocks_for(int64_t tokens) const {
  return (tokens + config_.block_size - 1) / config_.block_size;
}

double KvCacheManager::usage() const {
  return double(pool_.num_used()) / double(pool_.num_blocks());
}

void KvCacheManager::check_invariants() const {
  pool_.check_invariants();
  if (tiers_) tiers_->check_invariants();
  if (snapshots_) {
    snapshots_->check_invariants();
    for (int32_t b : snapshots_->cached_blocks())
      TROUPE_CHECK(pool_.is_hashed(b), "a window snapshot is cached on block ", b,
                   " which is not in the prefix cache");
    for (RequestId id : snapshots_->writer_ids())
      TROUPE_CHECK(contains(id), "request ", id, " holds a snapshot slot but no KV (leaked)");
  }
  std::vector<int32_t> refs(size_t(pool_.num_blocks()), 0);
  std::vector<char> slot_seen(size_t(config_.swa_slots), 0);
  for (const auto& [name, pin] : pins_)
    for (int32_t b : pin.blocks) ++refs[size_t(b)];
  for (const auto& [id, r] : requests_) {
    for (int32_t b : r.table) ++refs[size_t(b)];
    TROUPE_CHECK(!slot_seen[size_t(r.swa_slot)]++, "SWA slot ", r.swa_slot, " held twice");
    TROUPE_CHECK(r.num_committed <= int64_t(r.table.size()), "request ", id,
                 " committed past its table");
  }
  for (int32_t s : free_slots_)
    TROUPE_CHECK(!slot_seen[size_t(s)]++, "SWA slot ", s, " both free and held");
  TROUPE_CHECK(int64_t(free_slots_.size() + requests_.size()) == config_.swa_slots,
               "SWA slots leaked");
  for (int32_t b = 0; b < int32_t(refs.size()); ++b)
    TROUPE_CHECK(refs[size_t(b)] == pool_.ref_count(b), "block ", b, " has ref ",
                 pool_.ref_count(b), " but is held by ", refs[size_t(b)], " tables and pins");
}

KvCacheManager::RequestBlocks& KvCacheManager::request(RequestId id) {
  const auto it = requests_.find(id);
  TROUPE_CHECK(it != requests_.end(), "unknown request ", id);
  return it->second;
}

const KvCacheManager::RequestBlocks& KvCacheManager::request(RequestId id) const {
  const auto it = requests_.find(id);
  TROUPE_CHECK(it != requests_.end(), "unknown request ", id);
  return it->second;
}

void KvCacheManager::hash_blocks(std::span<const int32_t> tokens, int64_t num_full,
                                 std::vector<uint64_t>& hashes) const {
  const int64_t bs = config_.block_size;
  // Geometric growth: commits arrive one block at a time during decode.
  if (hashes.capacity() < size_t(num_full))
    hashes.reserve(std::max(size_t(num_full), 2 * hashes.capacity()));
  for (int64_t i = int64_t(hashes.size()); i < num_full; ++i)
    hashes.push_back(
        config_.hash_fn(i ? hashes[i - 1] : kRootBlockHash, tokens.subspan(i * bs, bs)));
}

int64_t KvCacheManager::take_blocks(int64_t n, std::vector<int32_t>& out) {
  evicted_scratch_.clear();
  const bool track = snapshots_ || tiers_;
  const int64_t evicted = pool_.take(n, out, track ? &evicted_scratch_ : nullptr);
  for (int32_t b : evicted_scratch_) {
    // Its hash, parent and tokens outlive the eviction until the block is published again;
    // its snapshot's slot bytes until this plan's forward (a writer handed the slot writes
    // after it), so the save below still reads them.
    if (tiers_)
      tiers_->on_evicted(b, pool_.hash_of(b), pool_.parent_hash_of(b), pool_.stored_tokens(b),
                         snapshots_ ? snapshots_->slot_of(b) : -1);
    if (snapshots_) stats_.snapshots_evicted += snapshots_->drop_block(b);
  }
  note_evictions(evicted);
  return evicted;
}

std::string KvCacheManager::reserve_pin(RequestId id, const std::string& name,
                                        std::span<const int32_t> tokens) {
  const int64_t need = int64_t(tokens.size()) / config_.block_size;
  if (!config_.enable_prefix_cache) return "KV save needs the prefix cache (enable-prefix-caching)";
  if (config_.pinned_blocks <= 0) return "KV save is off: kv-pinned-bytes is 0";
  if (need == 0)
    return "nothing to save: " + std::to_string(tokens.size()) +
           " tokens are less than one block of " + std::to_string(config_.block_size);
  const int64_t used = num_pinned_blocks();
  if (used + need > config_.pinned_blocks)
    return "the pinned KV budget (kv-pinned-bytes) is full: " + std::to_string(used) + " of " +
           std::to_string(config_.pinned_blocks) + " blocks pinned, this prefix needs " +
           std::to_string(need) + "; delete a saved prefix first";
  reserved_[id] = {name, {tokens.begin(), tokens.end()}, need};
  return {};
}

void KvCacheManager::pin_finished(RequestId id) {
  const auto res = reserved_.find(id);
  const auto it = requests_.find(id);
  if (res == reserved_.end()) return;
  PinReservation r = std::move(res->second);
  reserved_.erase(res);
  if (it == requests_.end()) return;
  if (const auto old = pins_.find(r.name); old != pins_.end()) {
    release_pin(old->second);
    pins_.erase(old);
  }
  KvPin pin;
  pin.num_blocks = r.num_blocks;
  pin.tokens = std::move(r.tokens);
  // The published copy of each block (this request's, or the one another request
  // published first under the same hash): the one later hits find.
  const RequestBlocks& req = it->second;
  const int64_t n = std::min<int64_t>({pin.num_blocks, req.num_committed, int64_t(req.hashes.size())});
  for (int64_t k = 0; k < n; ++k) {
    const int32_t b = pool_.find_hash(req.hashes[size_t(k)]);
    if (b < 0) break;
    pool_.ref(b);
    pin.blocks.push_back(b);
  }
  pins_[r.name] = std::move(pin);
  pinning_[id] = r.name;
  ++pins_version_;
}

void KvCacheManager::finish_pin(RequestId id, int32_t block) {
  const auto it = pinning_.find(id);
  KvPin& pin = pins_.at(it->second);
  pinning_.erase(it);
  // Its snapshot: only the one at the end of the pinned blocks serves a restore, and one
  // slot per running request stays unpinned for the writers.
  if (block >= 0 && !pin.blocks.empty() && block == pin.blocks.back() &&
      snapshots_->num_pinned() + config_.swa_slots < snapshots_->num_slots() &&
      snapshots_->pin(block))
    pin.snapshot_block = block;
  if (!tiers_) return;
  for (size_t k = 0; k < pin.blocks.size(); ++k) {
    const int32_t b = pin.blocks[k];
    const int32_t snap = b == pin.snapshot_block ? snapshots_->slot_of(b) : -1;
    const int32_t slot = tiers_->write_pinned(b, pool_.hash_of(b), pool_.parent_hash_of(b),
                                              pool_.stored_tokens(b), snap);
    if (slot < 0) break;
    pin.disk_slots.push_back(slot);
    pin.disk_hashes.push_back(pool_.hash_of(b));
  }
}

void KvCacheManager::release_pin(KvPin& pin) {
  if (pin.snapshot_block >= 0) snapshots_->unpin(pin.snapshot_block);
  for (auto b = pin.blocks.rbegin(); b != pin.blocks.rend(); ++b) pool_.unref(*b);
  for (size_t k = 0; k < pin.disk_slots.size(); ++k)
    tiers_->unpin_disk(pin.disk_slots[k], pin.disk_hashes[k]);
  pin = {};
}

bool KvCacheManager::adopt_pin(const std::string& name, std::span<const int32_t> tokens) {
  const int64_t bs = config_.block_size;
  KvPin pin;
  pin.num_blocks = int64_t(tokens.size()) / bs;
  if (pin.num_blocks == 0 || num_pinned_blocks() + pin.num_blocks > config_.pinned_blocks ||
      pins_.count(name))
    return false;
  pin.tokens.assign(tokens.begin(), tokens.end());
  std::vector<uint64_t> hashes;
  hash_blocks(tokens, pin.num_blocks, hashes);
  for (int64_t k = 0; tiers_ && k < pin.num_blocks; ++k) {
    const uint64_t parent = k ? hashes[size_t(k - 1)] : kRootBlockHash;
    const int32_t slot = tiers_->pin_disk(hashes[size_t(k)], parent, tokens.subspan(size_t(k * bs), size_t(bs)));
    if (slot < 0) break;
    pin.disk_slots.push_back(slot);
    pin.disk_hashes.push_back(hashes[size_t(k)]);
  }
  pins_[name] = std::move(pin);
  ++pins_version_;
  return true;
}

bool KvCacheManager::unpin(const std::string& name) {
  const auto it = pins_.find(name);
  if (it == pins_.end()) return false;
  for (auto p = pinning_.begin(); p != pinning_.end();)  // its request is being freed: no snapshot
    p = p->second == name ? pinning_.erase(p) : std::next(p);
  release_pin(it->second);
  pins_.erase(it);
  ++pins_version_;
  return true;
}

const KvPin* KvCacheManager::find_pin(const std::string& name) const {
  const auto it = pins_.find(name);
  return it == pins_.end() ? nullptr : &it->second;
}

int64_t KvCacheManager::num_pinned_blocks() const {
  int64_t n = 0;
  for (const auto& [name, pin] : pins_) n += pin.num_blocks;
  for (const auto& [id, r] : reserved_) n += r.num_blocks;
  return n;
}

int64_t KvCacheManager::pinned_bytes() const {
  int64_t n = 0;
  for (const auto& [name, pin] : pins_)
    n += pin.num_blocks * config_.block_bytes + (pin.snapshot_block >= 0) * config_.tier_snapshot_bytes;
  return n;
}

void KvCacheManager::note_evictions(int64_t evicted) {
  if (evicted <= 0) return;
  stats_.evictions += evicted;
  ++epoch_;  // a CachedPrefix may name an evicted block now
}

}  // namespace troupe::runtime
