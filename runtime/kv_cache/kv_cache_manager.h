// The engine's KV bookkeeping (MODEL.md §4, §6): which block of the shared global KV
// holds which tokens of which request, which full blocks are cached for reuse by later
// requests with the same prefix, and which requests hold a SWA ring slot. Pure logic: no
// bytes are stored here (block ids and ring slots index storage owned elsewhere).
//
// Global KV (compressed KV rows + index keys of every Full layer) is paged in blocks of
// `block_size` tokens; one block id covers the same token range for every source layer,
// so a request has ONE block table:
//
//   tokens   [0 ........ 64)[64 ...... 128)[128 ..... 192)[192 .. 203)
//   table    [     17      ][      4      ][     30      ][    9     ]   block_size = 64
//            <------- full blocks: hashed, shareable ------><- partial: private ->
//
// A full block's hash chains over its parent's hash and its own token ids, so a hash
// names the whole prefix up to the block's end; hits are verified against stored token
// ids. Blocks are ref counted; when the last holder frees a cached block it stays in the
// pool (ref 0) in LRU order until a new allocation evicts it.
//
// SWA rings are per request and never cached: a request holds one ring slot from
// admission to free(). A prefix hit at boundary B therefore comes with a replay range
// [replay_from, B) = [max(0, B - W), B) that the encoder must recompute to rebuild the
// windows (R_enc = W, §6; config.window and tail_tokens can widen it), unless the
// request carries its window already, or a window snapshot (config.snapshot_slots > 0,
// runtime/kv_cache/snapshot_table.h) of an earlier request's rings at exactly B is
// cached with B's block: then the hit restores it and replays nothing.
//
// Typical use by the scheduler:
//   CachedPrefix hit = kv.find_cached_prefix(prompt, /*has_window=*/false);
//   auto adm = kv.admit(id, std::move(hit), hit_tokens + first_chunk);  // nullopt: no room
//   ... each step:  kv.allocate(id, num_computed + num_new)              // false: preempt
//   ... after the step ran: kv.commit_full_blocks(id, all_tokens, num_computed)
//   ... a chunk ending on a block boundary: slot = kv.snapshot_slot_for(id) (the executor
//       copies the rings there); after it ran: kv.note_snapshot(id, boundary)
//   ... finish / abort / preempt: kv.free(id)
//   n > 1: after the leader's prompt: kv.fork(leader, sibling, prompt_len) (docs/kv-cache.md)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/kv_cache/block_pool.h"
#include "runtime/kv_cache/block_file.h"
#include "runtime/kv_cache/kv_cache_config.h"
#include "runtime/kv_cache/kv_tiers.h"
#include "runtime/kv_cache/snapshot_table.h"

namespace troupe::runtime {

// Identical redeclarations of this alias (e.g. in runtime/request.h) are allowed.
using RequestId = int64_t;

// A hit block a lower tier holds: blocks[index] is filled by admit() with a fresh block
// the executor copies it into.
struct TierFetch {
  int64_t index = 0;
  TierSource src;
  std::vector<uint8_t> payload;   // from disk: the block's bytes, read and checked by the find
  std::vector<uint8_t> snapshot;  // from disk: the file's window snapshot, if it has one
};

// Reads the disk tier's file of a block and checks it (header, checksum, and that it is
// this block); false, with a log line, for a missing, corrupt, truncated or foreign file.
// snapshot: the file's window snapshot section (empty if it has none).
using DiskBlockReader = std::function<bool(uint64_t hash, uint64_t parent_hash,
                                           std::span<const int32_t> tokens,
                                           std::vector<uint8_t>& payload,
                                           std::vector<uint8_t>& snapshot)>;

// Longest cached, block-aligned prefix of a token sequence. Valid until the manager next
// evicts a cached block (admit checks this); admit right after finding is always safe.
struct CachedPrefix {
  int64_t num_tokens = 0;        // hit boundary B, a multiple of block_size
  int64_t num_query_tokens = 0;  // tokens looked up (the prompt), for the hit rate
  int64_t replay_from = 0;       // P' (§6): encoder recomputes [replay_from, B)
  std::vector<int32_t> blocks;   // [B / block_size] cached block ids covering [0, B); -1:
                                 // held by a lower tier (fetches says where)
  std::vector<TierFetch> fetches;  // the hit blocks the host and disk tiers bring back
  std::vector<uint64_t> hashes;  // [full blocks of the tokens] chained hashes, all of them
  uint64_t epoch = 0;            // manager state this answer was computed against
  int32_t snapshot_slot = -1;    // a cached window snapshot at exactly B (replay_from = B)
  // Else one a lower tier holds with B's block (replay_from = B too): admit restores it
  // straight into the request's ring slot. From disk, the bytes the find read.
  std::optional<TierSource> tier_snapshot;
  std::vector<uint8_t> tier_snapshot_bytes;
  int64_t num_replay_tokens() const { return num_tokens - replay_from; }
};

// What admission granted.
struct Admission {
  int64_t num_cached_tokens = 0;  // B: tokens [0, B) already in the global KV
  int64_t replay_from = 0;        // encoder starts at this position (== B if no replay)
  int32_t swa_slot = -1;          // ring slot in [0, swa_slots) held until free()
  int32_t restore_slot = -1;      // snapshot slot to copy into swa_slot first, or -1;
                                  // == swa_slot: a tier op restores it there (no copy)
  int64_t num_replay_tokens() const { return num_cached_tokens - replay_from; }
};

// What fork() granted: the child's ring slot, and the block the caller must copy (the
// parent's partial last block, which the child owns privately), if any.
struct Fork {
  int32_t swa_slot = -1;     // the child's slot: copy the parent's rings and carry into it
  int32_t src_block = -1;    // parent's block holding tokens past the last full block, or -1
  int32_t dst_block = -1;    // the child's fresh copy of it, or -1
};

struct KvCacheStats {
  int64_t admissions = 0;     // successful admit() calls
  int64_t prefix_hits = 0;    // admissions with a hit of at least one block
  int64_t query_tokens = 0;   // prompt tokens looked up by admitted requests
  int64_t hit_tokens = 0;     // of those, served from the cache
  int64_t replay_tokens = 0;  // tokens to recompute for SWA windows on hits
  int64_t snapshot_hits = 0;  // of prefix_hits, served by a window snapshot (no replay)
  int64_t replay_hits = 0;    // of prefix_hits, served by a replay (prefix_hits - snapshot_hits)
  int64_t snapshots_kept = 0;     // window snapshots cached when their request ended
  int64_t snapshots_evicted = 0;  // cached ones dropped: their block went, or a writer needed the slot
  int64_t evictions = 0;      // cached blocks reclaimed for new allocations
  // By the tier that served them (primary, host, disk); hit_tokens is their sum.
  int64_t tier_hits[kNumKvTiers] = {0, 0, 0};        // admissions with >= 1 block from it
  int64_t tier_hit_tokens[kNumKvTiers] = {0, 0, 0};  // hit tokens it served
  // Of snapshot_hits, by the tier that held the snapshot.
  int64_t tier_snapshot_hits[kNumKvTiers] = {0, 0, 0};
  double hit_rate() const { return query_tokens ? double(hit_tokens) / double(query_tokens) : 0; }
};

// A saved prefix (KV save by name, docs/kv-cache.md "Saved prefixes"): the full blocks of
// a token sequence held with one more ref each (never evicted), the window snapshot at
// their end pinned with the last one, and with a disk tier their files pinned there too.
struct KvPin {
  std::vector<int32_t> tokens;      // the saved sequence; a restore puts it before its prompt
  std::vector<int32_t> blocks;      // primary blocks held; empty when adopted at start-up
  int32_t snapshot_block = -1;      // the block whose cached snapshot is pinned, or -1
  std::vector<int32_t> disk_slots;  // disk tier slots pinned
  std::vector<uint64_t> disk_hashes;  // [disk_slots] the block each one holds
  int64_t num_blocks = 0;           // full blocks of tokens: what it counts against the budget
};

class KvCacheManager {
 public:
  explicit KvCacheManager(const KvCacheConfig& config);  // validates config

  // Longest cached prefix of `tokens`, block aligned and capped below tokens.size() so at
  // least one token is left to compute (the last position's logits). Hashes every full
  // block of `tokens` once (kept in the result for admit/commit). Takes no references.
  // has_window: the request already holds its SWA rings (e.g. after a P/D transfer), so
  // replay_from = B. num_prompt_tokens: E_prompt for the config's tail anchor (-1: all of
  // tokens).
  CachedPrefix find_cached_prefix(std::span<const int32_t> tokens, bool has_window = false,
                                  int64_t num_prompt_tokens = -1) const;

  // How many leading tokens of `tokens` find_cached_prefix would hit (same cap), in any
  // tier, without reading a disk file or changing a count: what a rank reports to rank
  // choice (runtime/dep/rank_choice.h), so a prefix pushed to host or disk still draws its
  // conversation back to this rank. A disk file that fails its check later is a miss then.
  int64_t cached_prefix_tokens(std::span<const int32_t> tokens) const;

  // Admits request `id` (not yet known): takes refs on the prefix blocks, a SWA ring
  // slot, and fresh blocks so the table covers max(total_tokens, B) tokens. Returns
  // nullopt and changes nothing if blocks or ring slots run out. `prefix` must come from
  // find_cached_prefix with no eviction in between (checked). Hit stats count here.
  std::optional<Admission> admit(RequestId id, CachedPrefix prefix, int64_t total_tokens);

  // Grows the table of admitted request `id` to cover `total_tokens` tokens (never
  // shrinks). Returns false and changes nothing if there are not enough blocks.
  bool allocate(RequestId id, int64_t total_tokens);
  // Sizes the request's block table and block hashes for max_tokens tokens at once, so
  // decode steps never reallocate them (the low-latency path; blocks are not taken).
  void reserve(RequestId id, int64_t max_tokens);

  // Publishes the request's full blocks below `num_computed` to the prefix cache (hash
  // then insert). `tokens` is the request's whole sequence so far (prompt + output),
  // tokens.size() >= num_computed. Incremental: each block is hashed once per request.
  void commit_full_blocks(RequestId id, std::span<const int32_t> tokens, int64_t num_computed);

  // Request `child` (not yet known) continues from the first `num_tokens` tokens of
  // admitted request `parent` (n > 1 sampling: siblings share the prompt's KV). The full
  // blocks below num_tokens are shared (ref + 1, already committed for the child: the
  // parent publishes them); the block holding the rest gets a fresh private copy; the
  // child gets its own ring slot. The caller copies the bytes (Fork says which). nullopt
  // and no change if a slot or block is short. The parent's table must cover num_tokens.
  std::optional<Fork> fork(RequestId parent, RequestId child, int64_t num_tokens);

  // Window snapshots (config.snapshot_slots > 0 and the prefix cache on). The storage
  // slot admitted request `id` copies its rings into after a chunk that ends on a block
  // boundary: the one it holds, else a free one, else the least recently used cached
  // snapshot's (evicted); -1: none to spare (no snapshot this time).
  int32_t snapshot_slot_for(RequestId id);
  // That chunk ran: the request's snapshot slot holds its state at `boundary`.
  void note_snapshot(RequestId id, int64_t boundary);
  bool snapshots_enabled() const { return snapshots_ != nullptr; }
  const SnapshotTable* snapshots() const { return snapshots_.get(); }

  // Finished, aborted or preempted: drops the request's refs (blocks whose ref reaches 0
  // join the LRU list, cached ones stay reusable) and its ring slot. Its window snapshot
  // is cached with the block that ends at its boundary when keep_snapshot (false: a chunk
  // still in flight may overwrite the slot) and that block is in the prefix cache; else
  // freed. Unknown id: no-op.
  void free(RequestId id, bool keep_snapshot = true);

  // Host and disk tiers (config.host_blocks > 0 and the prefix cache on). The byte copies
  // decided since the last call, for the executor to run in this order before the
  // step's forward (the scheduler puts them in the plan).
  std::vector<TierOp> take_tier_ops();
  // The executor ran a plan's tier ops (Scheduler::update): its disk writes are done.
  void tier_ops_done(std::span<const TierOp> ops) {
    if (tiers_) tiers_->ops_done(ops);
  }
  bool has_pending_tier_ops() const { return tiers_ && tiers_->has_pending_ops(); }
  const KvTiers* tiers() const { return tiers_.get(); }
  // How finds read disk tier files (without one, disk blocks are never hits). A find
  // that meets a file failing its check forgets that block (the one change a find makes;
  // it invalidates earlier CachedPrefix values) and ends the hit before it.
  void set_disk_reader(DiskBlockReader reader) { disk_reader_ = std::move(reader); }
  // Start-up: the blocks the disk dir holds (TierStorage::scan_disk, oldest first) join
  // the disk tier, up to its size. Returns how many did.
  int64_t adopt_disk_blocks(std::span<const BlockFileHeader> blocks);

  // KV save by name. reserve_pin: request `id` (not admitted yet), whose prompt is
  // `tokens`, is to be saved as `name` when it finishes; its full blocks are counted
  // against config.pinned_blocks from now on. Returns why not (the budget is off or
  // full), or an empty string. pin_finished(id): it finished; call before free(id): its
  // blocks become the pin (replacing an older pin of that name) and free() pins its
  // snapshot and writes them to disk. cancel_pin(id): it ended otherwise.
  std::string reserve_pin(RequestId id, const std::string& name, std::span<const int32_t> tokens);
  void pin_finished(RequestId id);
  void cancel_pin(RequestId id) { reserved_.erase(id); }
  // Start-up: a pin the disk tier's index names; the blocks the disk tier holds are
  // pinned there (a restore loads them). False: over the budget (not adopted).
  bool adopt_pin(const std::string& name, std::span<const int32_t> tokens);
  bool unpin(const std::string& name);  // false: no such pin
  const KvPin* find_pin(const std::string& name) const;
  const std::unordered_map<std::string, KvPin>& pins() const { return pins_; }
  int64_t num_pinned_blocks() const;     // of the pins and the reservations
  int64_t pinned_bytes() const;          // of the pins: blocks and pinned snapshots
  uint64_t pins_version() const { return pins_version_; }  // bumped when pins() changes

  bool contains(RequestId id) const { return requests_.count(id) != 0; }
  std::span<const int32_t> block_table(RequestId id) const;  // [ceil(tokens / block_size)]
  int32_t swa_slot(RequestId id) const;

  // Blocks that can be handed out now: never used + cached with ref 0.
  int64_t num_free_blocks() const { return pool_.num_free(); }
  int64_t num_cached_blocks() const { return pool_.num_cached_free(); }  // ref 0, hashed
  int64_t num_used_blocks() const { return pool_.num_used(); }           // ref > 0
  int64_t num_free_swa_slots() const { return int64_t(free_slots_.size()); }
  int64_t blocks_for(int64_t tokens) const;  // ceil(tokens / block_size)
  double usage() const;                      // used / total blocks, for kv_cache_usage_perc
  const KvCacheStats& stats() const { return stats_; }
  const KvCacheConfig& config() const { return config_; }
  const BlockPool& pool() const { return pool_; }

  // Walks every table and the pool; throws troupe::Error on any leak or ref mismatch.
  void check_invariants() const;

 private:
  struct RequestBlocks {
    std::vector<int32_t> table;    // block ids in token order
    std::vector<uint64_t> hashes;  // chained hashes of full blocks known so far
    int64_t num_committed = 0;     // leading blocks of `table` published to the cache
    int32_t swa_slot = -1;
  };
  RequestBlocks& request(RequestId id);
  const RequestBlocks& request(RequestId id) const;
  // Appends the chained hashes of full blocks [hashes.size(), num_full) of `tokens`.
  void hash_blocks(std::span<const int32_t> tokens, int64_t num_full,
                   std::vector<uint64_t>& hashes) const;
  // pool_.take that also drops the snapshots of the cached blocks it evicts.
  int64_t take_blocks(int64_t n, std::vector<int32_t>& out);
  void note_evictions(int64_t evicted);
  // find_cached_prefix(): block i of a hit from a lower tier, or false (the hit ends).
  bool find_in_tiers(CachedPrefix& hit, int64_t i, uint64_t parent,
                     std::span<const int32_t> tokens) const;
  // find_cached_prefix(): a window snapshot a lower tier holds with the hit's last block.
  void find_tier_snapshot(CachedPrefix& hit, std::span<const int32_t> tokens) const;
  // Reads the disk file of slot `slot` (block i of hit); false: a bad file, forgotten.
  bool read_disk(CachedPrefix& hit, int64_t i, int32_t slot, std::span<const int32_t> tokens,
                 std::vector<uint8_t>& payload, std::vector<uint8_t>& snapshot) const;
  // admit(): blocks for the hit blocks lower tiers hold, their loads, their publication.
  void fetch_from_tiers(CachedPrefix& prefix, int64_t need, std::vector<int32_t>& table,
                        std::vector<int32_t>& fresh);
  void count_hit(const CachedPrefix& prefix, int64_t num_hit);
  // free(): the pin request `id` made pins its snapshot (now cached on `block`) and goes
  // to disk.
  void finish_pin(RequestId id, int32_t block);
  void release_pin(KvPin& pin);  // drops its refs and pins

  struct PinReservation {
    std::string name;
    std::vector<int32_t> tokens;
    int64_t num_blocks = 0;
  };
  std::unordered_map<RequestId, PinReservation> reserved_;
  std::unordered_map<RequestId, std::string> pinning_;  // pin_finished, free() not yet
  std::unordered_map<std::string, KvPin> pins_;
  uint64_t pins_version_ = 0;

  KvCacheConfig config_;
  BlockPool pool_;
  std::vector<int32_t> free_slots_;  // SWA ring slots, a stack
  std::unordered_map<RequestId, RequestBlocks> requests_;
  std::unique_ptr<SnapshotTable> snapshots_;  // null: window snapshots off
  std::unique_ptr<KvTiers> tiers_;            // null: no host and disk tiers
  DiskBlockReader disk_reader_;
  std::vector<int32_t> evicted_scratch_;
  KvCacheStats stats_;
  // Bumped by evictions (and a find dropping a bad disk file), the only changes that
  // invalidate a CachedPrefix.
  mutable uint64_t epoch_ = 0;
};

}  // namespace troupe::runtime
